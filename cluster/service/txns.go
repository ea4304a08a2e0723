package service

import (
	"github.com/corestream/corestream/shard"
)

// Txns are the transaction calls (docs/design/transactions.md): Kafka's
// transactional producer (InitProducerId with a transactional id,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn), its offsets
// (TxnOffsetCommit, staged in the group's coordinator until the
// transaction's marker decides them) and the operator's calls
// (DescribeTransactions, ListTransactions).
//
// Each call but FindTxnCoordinator is asynchronous and calls done
// exactly once, on from (with from nil, on whatever goroutine completed
// it: done must not block). A transactional id this node does not
// coordinate answers ErrNotCoordinator (hint: the node that does, when
// known), ErrCoordinatorNotAvailable when none does now,
// ErrCoordinatorLoading while this node recovers the coordinator's
// state. The transaction errors: ErrConcurrentTransactions (retry),
// ErrProducerFenced, ErrInvalidProducerIDMapping, ErrInvalidTxnState,
// ErrInvalidTransactionTimeout, ErrTransactionalIDNotFound.
type Txns interface {
	// FindTxnCoordinator is the node that coordinates transactional id
	// (synchronous, any goroutine).
	FindTxnCoordinator(id string) (GroupCoordinator, error)
	// InitTxnProducer gives the transactional id a producer id and a
	// new epoch, fencing the producer that held it.
	InitTxnProducer(from *shard.Shard, req *InitTxnProducerRequest, done func(InitProducerResult, error))
	// AddPartitionsToTxn adds partitions to the producer's open
	// transaction (opening it): one error per entry, in request order,
	// or a request-wide error.
	AddPartitionsToTxn(from *shard.Shard, req *AddPartitionsToTxnRequest, done func(entries []error, err error))
	// AddOffsetsToTxn adds the group's offsets to the transaction (its
	// partition of the groups' internal topic).
	AddOffsetsToTxn(from *shard.Shard, req *AddOffsetsToTxnRequest, done func(error))
	// EndTxn commits or aborts the open transaction; answered once its
	// end is decided and durable (its markers follow).
	EndTxn(from *shard.Shard, req *EndTxnRequest, done func(error))
	// TxnOffsetCommit stages offsets of the group for the producer's
	// transaction: one error per entry, or a request-wide error.
	TxnOffsetCommit(from *shard.Shard, req *TxnOffsetCommitRequest, done func(entries []error, err error))
	// DescribeTransactions describes each id asked, in request order.
	DescribeTransactions(from *shard.Shard, ids []string, done func([]TxnDescription))
	// ListTransactions lists the transactional ids this node
	// coordinates, filtered by state (none: every state) and producer
	// id (none: every producer).
	ListTransactions(from *shard.Shard, req *ListTransactionsRequest, done func([]TxnSummary, error))
}

// InitTxnProducerRequest is InitProducerId with a transactional id.
type InitTxnProducerRequest struct {
	TransactionalID string
	TimeoutMs       int32
	// ProducerID and ProducerEpoch are what the producer holds (KIP-360),
	// -1 when it holds none.
	ProducerID    int64
	ProducerEpoch int16
}

// TxnProducer names a transactional producer in the calls of its
// transaction.
type TxnProducer struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
}

// AddPartitionsToTxnRequest adds partitions to a transaction.
type AddPartitionsToTxnRequest struct {
	TxnProducer
	Partitions []TopicPartition
}

// AddOffsetsToTxnRequest adds a group's offsets to a transaction.
type AddOffsetsToTxnRequest struct {
	TxnProducer
	Group string
}

// EndTxnRequest ends a transaction.
type EndTxnRequest struct {
	TxnProducer
	Commit bool
}

// TxnOffsetCommitRequest stages a group's offsets in a transaction. A
// member id and generation (-1: none, an old client) are checked as an
// offset commit's.
type TxnOffsetCommitRequest struct {
	TxnProducer
	Group, MemberID string
	Generation      int32
	Offsets         []OffsetCommit
}

// TxnDescription is one transactional id's state (DescribeTransactions).
type TxnDescription struct {
	TransactionalID string
	// Err is the id's error (ErrTransactionalIDNotFound, ErrNotCoordinator,
	// …), nil when described.
	Err           error
	State         string
	ProducerID    int64
	ProducerEpoch int16
	TimeoutMs     int32
	StartMs       int64
	Partitions    []TopicPartition
}

// ListTransactionsRequest filters a listing.
type ListTransactionsRequest struct {
	States      []string
	ProducerIDs []int64
}

// TxnSummary is a transactional id in a listing.
type TxnSummary struct {
	TransactionalID string
	ProducerID      int64
	State           string
}
