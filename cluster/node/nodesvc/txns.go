package nodesvc

import (
	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// The transaction calls (service.Txns). The coordinators are the
// node's transaction host (TxnCoordinators, cluster/node/txnshost); the
// service checks the partitions named against the View first, and
// stages a transaction's offsets in the group's coordinator itself.

// TxnCoordinators are the node's transaction coordinators: the calls
// of service.Txns that a transaction coordinator answers.
type TxnCoordinators interface {
	FindTxnCoordinator(id string) (service.GroupCoordinator, error)
	InitTxnProducer(from *shard.Shard, req *service.InitTxnProducerRequest, done func(service.InitProducerResult, error))
	// AddPartitionsToTxn adds partitions the service checked exist.
	AddPartitionsToTxn(from *shard.Shard, req *service.AddPartitionsToTxnRequest, done func(error))
	AddOffsetsToTxn(from *shard.Shard, req *service.AddOffsetsToTxnRequest, done func(error))
	EndTxn(from *shard.Shard, req *service.EndTxnRequest, done func(error))
	DescribeTransactions(from *shard.Shard, ids []string, done func([]service.TxnDescription))
	ListTransactions(from *shard.Shard, req *service.ListTransactionsRequest, done func([]service.TxnSummary, error))
}

func (s *Service) noTxns() error {
	return service.Errorf(service.ErrCoordinatorNotAvailable, "this node runs no transaction coordinator")
}

// FindTxnCoordinator implements service.Txns.
func (s *Service) FindTxnCoordinator(id string) (service.GroupCoordinator, error) {
	if s.d.Txns == nil {
		return service.GroupCoordinator{NodeID: -1}, s.noTxns()
	}
	return s.d.Txns.FindTxnCoordinator(id)
}

// InitTxnProducer implements service.Txns.
func (s *Service) InitTxnProducer(from *shard.Shard, req *service.InitTxnProducerRequest, done func(service.InitProducerResult, error)) {
	if s.d.Txns == nil {
		done(service.InitProducerResult{ProducerID: -1, ProducerEpoch: -1}, s.noTxns())
		return
	}
	s.d.Txns.InitTxnProducer(from, req, done)
}

// AddPartitionsToTxn implements service.Txns: a partition the View does
// not have is refused on its own, and then none is added (Kafka answers
// the others OPERATION_NOT_ATTEMPTED).
func (s *Service) AddPartitionsToTxn(from *shard.Shard, req *service.AddPartitionsToTxnRequest, done func([]error, error)) {
	if s.d.Txns == nil {
		done(nil, s.noTxns())
		return
	}
	entries := make([]error, len(req.Partitions))
	bad := false
	for i, tp := range req.Partitions {
		if metadata.IsInternalTopic(tp.Topic) {
			entries[i] = service.Errorf(service.ErrAuthorization, "topic %q is the broker's own; a transaction may not write it", tp.Topic)
		} else if _, err := s.topicFor(tp.Topic, tp.Partition); err != nil {
			entries[i] = err
		}
		bad = bad || entries[i] != nil
	}
	if bad {
		done(entries, nil)
		return
	}
	s.d.Txns.AddPartitionsToTxn(from, req, func(err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(entries, nil)
	})
}

// AddOffsetsToTxn implements service.Txns.
func (s *Service) AddOffsetsToTxn(from *shard.Shard, req *service.AddOffsetsToTxnRequest, done func(error)) {
	if s.d.Txns == nil {
		done(s.noTxns())
		return
	}
	s.d.Txns.AddOffsetsToTxn(from, req, done)
}

// EndTxn implements service.Txns.
func (s *Service) EndTxn(from *shard.Shard, req *service.EndTxnRequest, done func(error)) {
	if s.d.Txns == nil {
		done(s.noTxns())
		return
	}
	s.d.Txns.EndTxn(from, req, done)
}

// DescribeTransactions implements service.Txns.
func (s *Service) DescribeTransactions(from *shard.Shard, ids []string, done func([]service.TxnDescription)) {
	if s.d.Txns == nil {
		out := make([]service.TxnDescription, len(ids))
		for i, id := range ids {
			out[i] = service.TxnDescription{TransactionalID: id, Err: s.noTxns()}
		}
		done(out)
		return
	}
	s.d.Txns.DescribeTransactions(from, ids, done)
}

// ListTransactions implements service.Txns.
func (s *Service) ListTransactions(from *shard.Shard, req *service.ListTransactionsRequest, done func([]service.TxnSummary, error)) {
	if s.d.Txns == nil {
		done(nil, nil)
		return
	}
	s.d.Txns.ListTransactions(from, req, done)
}

// TxnOffsetCommit implements service.Txns: the group's coordinator
// checks the member and generation and stages the offsets for the
// producer until its transaction's marker decides them. An entry for a
// partition the View does not have is refused on its own.
func (s *Service) TxnOffsetCommit(from *shard.Shard, req *service.TxnOffsetCommitRequest, done func([]error, error)) {
	entries := make([]error, len(req.Offsets))
	var offs []groups.Offset
	for i, o := range req.Offsets {
		t, err := s.topicFor(o.Topic, o.Partition)
		if err == nil {
			err = checkTopicID(o.TopicID, t)
		}
		if err != nil {
			entries[i] = err
			continue
		}
		offs = append(offs, groups.Offset{TopicPartition: groups.TopicPartition{Topic: o.Topic, Partition: o.Partition},
			TopicID: t.ID, Offset: o.Offset, Metadata: o.Metadata})
	}
	pid := req.ProducerID
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(struct{}, error)) {
		c.TxnCommit(s.d.Now(), req.Group, req.MemberID, req.Generation, pid, offs, func(err error) { reply(struct{}{}, s.groupErr(err)) })
	}, func(_ struct{}, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(entries, nil)
	})
}

// TxnsRoutes are the routes of the transaction coordinators' internal
// topic; nil while it does not exist, an error while the node has not
// loaded the metadata.
func (s *Service) TxnsRoutes() ([]service.PartitionRoute, error) {
	return s.internalRoutes(metadata.TransactionsTopic)
}

// CreateTxnsTopic asks the controller, on its shard, to create the
// transaction coordinators' internal topic; done runs on the
// controller's shard.
func (s *Service) CreateTxnsTopic(partitions int, done func(error)) {
	adminCall(s, nil, true, func(c Admin, reply func(struct{}, error)) {
		c.CreateTxnsTopic(partitions, func(err error) { reply(struct{}{}, err) })
	}, func(_ struct{}, err error) { done(err) })
}

// WriteTxnMarker writes transaction marker m to ref's partition on this
// node's replica, which must be its primary, and answers once it
// commits with its offset.
func (s *Service) WriteTxnMarker(from *shard.Shard, ref service.PartitionRef, m batch.TxnMarker, done func(int64, error)) {
	onReplica(s, from, ref, nil, func(r *partition.Replica, _ *metadata.Topic, reply func(int64, error)) {
		r.WriteTxnMarker(&partition.MarkerArgs{Generation: ref.Generation, Marker: m}, func(res partition.ProduceResult) {
			reply(res.Produced.BaseOffset, res.Err)
		})
	}, done)
}
