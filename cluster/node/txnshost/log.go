package txnshost

import (
	"errors"
	"fmt"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/txns"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// A coordinator's log is partition p of the internal topic, written at
// the generation gen the node was elected in, so that a write after the
// node lost the partition is refused instead of landing in a log
// another coordinator now writes. Calls are made from the partition's
// shard and answered there.

func (pt *txnsPart) ref() service.PartitionRef {
	return service.PartitionRef{Topic: metadata.TransactionsTopic, Partition: pt.p, Generation: pt.gen}
}

// append produces rec as one batch with acks = quorum and answers its
// offset. Successive appends reach the replica in order (on its own
// shard, inline), so the log keeps the coordinator's order.
func (h *Host) append(ts *txnsShard, pt *txnsPart, rec txns.Record, done func(int64, error)) {
	b, err := batch.NewBuilder(batch.Options{})
	if err == nil {
		err = b.AppendKV(h.nowMs(), rec.Key, rec.Value)
	}
	var recs []byte
	if err == nil {
		recs, err = b.Build()
	}
	if err != nil {
		done(0, err)
		return
	}
	h.data.ProduceInternal(ts.sh, &service.ProduceRequest{PartitionRef: pt.ref(), Acks: service.AcksQuorum, Timeout: txnsCallTimeout, Records: recs},
		func(res service.ProduceResult, err error) { done(res.BaseOffset, coordinatorErr(err, pt.p)) })
}

// fetch reads committed records from offset on and answers them with
// the offset to read next; control batches are skipped. An offset below
// the log start (compaction or retention) answers none and the start.
func (h *Host) fetch(ts *txnsShard, pt *txnsPart, from int64, done func([]txns.Record, int64, error)) {
	nodesvc.FetchCommitted(h.data.Fetch, ts.sh, pt.ref(), from, txnsLoadFetchBytesMax, func(buf []byte, at int64, err error) {
		if err != nil {
			done(nil, at, err)
			return
		}
		done(records(buf, at))
	})
}

// records splits fetched batches into records at or past from, and the
// offset after the last whole batch.
func records(buf []byte, from int64) ([]txns.Record, int64, error) {
	var out []txns.Record
	next, err := batch.EachRecord(buf, from, func(_ int64, key, value []byte) {
		rec := txns.Record{Key: append([]byte(nil), key...)}
		if value != nil {
			rec.Value = append([]byte{}, value...)
		}
		out = append(out, rec)
	})
	if err != nil {
		return nil, from, fmt.Errorf("txnshost: reading %s %w", metadata.TransactionsTopic, err)
	}
	return out, next, nil
}

// coordinatorErr is a log write's error as a transaction call answers
// it: a partition this node no longer leads means another node
// coordinates the id now (ErrNotCoordinator: the client finds it).
func coordinatorErr(err error, p int32) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, partition.ErrNotPrimary), errors.Is(err, partition.ErrStaleGeneration),
		errors.Is(err, partition.ErrPrimaryNotAvailable):
		return service.Errorf(service.ErrNotCoordinator, "the transaction's state could not be written: %s partition %d moved (%v); find the coordinator again",
			metadata.TransactionsTopic, p, err)
	}
	return service.Errorf(service.ErrCoordinatorNotAvailable, "the transaction's state could not be written to %s partition %d: %v; retry",
		metadata.TransactionsTopic, p, err)
}

// txnKinds gives the coordinator's errors their service kinds.
var txnKinds = []struct {
	is, kind error
}{
	{txns.ErrConcurrentTransactions, service.ErrConcurrentTransactions},
	{txns.ErrProducerFenced, service.ErrProducerFenced},
	{txns.ErrInvalidProducerIDMapping, service.ErrInvalidProducerIDMapping},
	{txns.ErrInvalidTxnState, service.ErrInvalidTxnState},
	{txns.ErrInvalidTimeout, service.ErrInvalidTransactionTimeout},
	{txns.ErrTooMany, service.ErrInvalidRequest},
	{txns.ErrUnknownID, service.ErrTransactionalIDNotFound},
	{txns.ErrNotCoordinator, service.ErrNotCoordinator},
}

// txnErr gives a coordinator error its service kind, message kept.
func txnErr(err error) error {
	if err == nil {
		return nil
	}
	var se *service.Error
	if errors.As(err, &se) {
		return se
	}
	for _, k := range txnKinds {
		if errors.Is(err, k.is) {
			return service.Errorf(k.kind, "%v", err)
		}
	}
	return service.Errorf(service.ErrInternal, "%v", err)
}
