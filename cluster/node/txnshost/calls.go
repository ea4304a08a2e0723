package txnshost

import (
	"fmt"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/txns"
	"github.com/corestream/corestream/shard"
)

var (
	_ nodesvc.TxnCoordinators = (*Host)(nil)
	_ Data                    = (*nodesvc.Service)(nil)
)

// call runs fn with id's loaded coordinator on the shard that owns it
// and answers through done on from (on the owner when from is nil); an
// id this node does not coordinate now is answered its error.
func call[R any](h *Host, from *shard.Shard, id string, fn func(ts *txnsShard, pt *txnsPart, reply func(R, error)), done func(R, error)) {
	var zero R
	if id == "" {
		done(zero, service.Errorf(service.ErrInvalidRequest, "an empty transactional id"))
		return
	}
	routes, err := h.data.TxnsRoutes()
	if err == nil && routes == nil {
		err = h.needTopic(id)
	}
	if err != nil {
		done(zero, err)
		return
	}
	p := PartitionOf(id, len(routes))
	i := h.d.OwnerShard(p)
	if i < 0 || i >= len(h.shards) {
		done(zero, service.Errorf(service.ErrCoordinatorNotAvailable, "%s partition %d, which holds transactional id %q, is not in this node's metadata yet; retry shortly",
			metadata.TransactionsTopic, p, id))
		return
	}
	ts := h.shards[i]
	r := routes[p]
	nodesvc.RunOn(from, ts.sh, nil, func(_ *shard.Shard, reply func(R, error)) {
		pt, err := h.coordinator(ts, p, r, id)
		if err != nil {
			reply(zero, err)
			return
		}
		fn(ts, pt, reply)
	}, done)
}

// coordinator is, on ts, the loaded coordinator of partition p (route
// r), else the error to answer for id.
func (h *Host) coordinator(ts *txnsShard, p int32, r service.PartitionRoute, id string) (*txnsPart, error) {
	pt := ts.parts[p]
	if pt == nil && r.PrimaryID == h.d.Self && r.Generation > 0 {
		h.refresh(ts) // the route says this node leads it: start the load now rather than at the tick
		pt = ts.parts[p]
	}
	if pt != nil {
		if !pt.loaded {
			return nil, service.Errorf(service.ErrCoordinatorLoading,
				"node %d is loading the state of %s partition %d, which holds transactional id %q; retry shortly", h.d.Self, metadata.TransactionsTopic, p, id)
		}
		return pt, nil
	}
	if r.PrimaryID <= 0 || r.PrimaryID == h.d.Self {
		return nil, service.Errorf(service.ErrCoordinatorNotAvailable,
			"%s partition %d, which holds transactional id %q, has no primary now; retry shortly", metadata.TransactionsTopic, p, id)
	}
	e := service.Errorf(service.ErrNotCoordinator, "node %d does not coordinate transactional id %q: node %d, the primary of %s partition %d, does",
		h.d.Self, id, r.PrimaryID, metadata.TransactionsTopic, p)
	e.Hint = &service.Hint{NodeID: r.PrimaryID, Generation: r.Generation, ClientAddr: h.d.AddrOf(r.PrimaryID)}
	return nil, e
}

// needTopic answers a call made before the topic exists: the metadata
// primary creates it (once) and answers ErrCoordinatorLoading meanwhile;
// another node points at the metadata primary.
func (h *Host) needTopic(id string) error {
	if err := h.d.Ready(); err != nil {
		return err
	}
	primary := h.d.MetaPrimary()
	switch {
	case primary <= 0:
		return service.Errorf(service.ErrCoordinatorNotAvailable, "no metadata primary is known to create %s for transactional id %q; retry shortly",
			metadata.TransactionsTopic, id)
	case primary != h.d.Self:
		e := service.Errorf(service.ErrNotCoordinator, "%s does not exist yet: node %d, the metadata primary, creates it and coordinates transactional id %q until then",
			metadata.TransactionsTopic, primary, id)
		e.Hint = &service.Hint{NodeID: primary, ClientAddr: h.d.AddrOf(primary)}
		return e
	}
	if !h.stopped.Load() && h.creating.CompareAndSwap(false, true) {
		h.data.CreateTxnsTopic(h.d.Partitions, func(err error) {
			if err != nil {
				h.d.Infof("transactions: creating the internal topic failed", "topic", metadata.TransactionsTopic, "error", err)
			}
			h.creating.Store(false)
			for _, ts := range h.shards {
				_ = ts.sh.Post(func() { h.refresh(ts) })
			}
		})
	}
	return service.Errorf(service.ErrCoordinatorLoading, "node %d is creating %s, which will hold transactional id %q; retry shortly",
		h.d.Self, metadata.TransactionsTopic, id)
}

// FindTxnCoordinator implements nodesvc.TxnCoordinators: the primary of
// the id's partition, or, until the topic exists, the metadata primary
// (which creates it at the first request). Any goroutine.
func (h *Host) FindTxnCoordinator(id string) (service.GroupCoordinator, error) {
	none := service.GroupCoordinator{NodeID: -1}
	if id == "" {
		return none, service.Errorf(service.ErrInvalidRequest, "an empty transactional id")
	}
	routes, err := h.data.TxnsRoutes()
	if err != nil {
		return none, err
	}
	if routes == nil && h.d.MetaPrimary() == h.d.Self {
		_ = h.needTopic(id) // starts the create; the answer names this node meanwhile
	}
	nodeID := h.d.MetaPrimary()
	where := "the metadata primary"
	if routes != nil {
		p := PartitionOf(id, len(routes))
		nodeID = routes[p].PrimaryID
		where = fmt.Sprintf("%s partition %d", metadata.TransactionsTopic, p)
	}
	if nodeID <= 0 {
		return none, service.Errorf(service.ErrCoordinatorNotAvailable, "%s, which coordinates transactional id %q, has no primary now; retry shortly", where, id)
	}
	return service.GroupCoordinator{NodeID: nodeID, ClientAddr: h.d.AddrOf(nodeID), KafkaAddr: h.d.KafkaAddrOf(nodeID)}, nil
}

// InitTxnProducer implements nodesvc.TxnCoordinators.
func (h *Host) InitTxnProducer(from *shard.Shard, req *service.InitTxnProducerRequest, done func(service.InitProducerResult, error)) {
	id := req.TransactionalID
	call(h, from, id, func(ts *txnsShard, pt *txnsPart, reply func(service.InitProducerResult, error)) {
		tr, err := pt.coord.InitProducerID(id, req.TimeoutMs, req.ProducerID, req.ProducerEpoch, h.nowMs())
		if err != nil {
			reply(service.InitProducerResult{ProducerID: -1, ProducerEpoch: -1}, txnErr(err))
			return
		}
		h.persist(ts, pt, tr, func(err error) {
			if err != nil {
				reply(service.InitProducerResult{ProducerID: -1, ProducerEpoch: -1}, err)
				return
			}
			reply(service.InitProducerResult{ProducerID: tr.Next.ProducerID, ProducerEpoch: tr.Next.Epoch}, nil)
		})
	}, done)
}

// addPartitions adds parts to the producer's transaction.
func (h *Host) addPartitions(from *shard.Shard, p service.TxnProducer, parts []txns.Partition, done func(error)) {
	call(h, from, p.TransactionalID, func(ts *txnsShard, pt *txnsPart, reply func(struct{}, error)) {
		tr, err := pt.coord.AddPartitions(p.TransactionalID, p.ProducerID, p.ProducerEpoch, parts, h.nowMs())
		if err != nil || tr == nil {
			reply(struct{}{}, txnErr(err))
			return
		}
		h.persist(ts, pt, tr, func(err error) { reply(struct{}{}, err) })
	}, func(_ struct{}, err error) { done(err) })
}

// AddPartitionsToTxn implements nodesvc.TxnCoordinators.
func (h *Host) AddPartitionsToTxn(from *shard.Shard, req *service.AddPartitionsToTxnRequest, done func(error)) {
	parts := make([]txns.Partition, len(req.Partitions))
	for i, tp := range req.Partitions {
		parts[i] = txns.Partition{Topic: tp.Topic, Partition: tp.Partition}
	}
	h.addPartitions(from, req.TxnProducer, parts, done)
}

// AddOffsetsToTxn implements nodesvc.TxnCoordinators: the group's
// partition of the groups' topic joins the transaction, so that its
// marker decides the offsets staged there.
func (h *Host) AddOffsetsToTxn(from *shard.Shard, req *service.AddOffsetsToTxnRequest, done func(error)) {
	p, err := h.d.GroupsPartition(req.Group)
	if err != nil {
		done(err)
		return
	}
	h.addPartitions(from, req.TxnProducer, []txns.Partition{{Topic: metadata.GroupsTopic, Partition: p}}, done)
}

// EndTxn implements nodesvc.TxnCoordinators: answered once the prepare
// is durable (Kafka's rule); the markers follow, and the id answers
// CONCURRENT_TRANSACTIONS until they are written.
func (h *Host) EndTxn(from *shard.Shard, req *service.EndTxnRequest, done func(error)) {
	p := req.TxnProducer
	call(h, from, p.TransactionalID, func(ts *txnsShard, pt *txnsPart, reply func(struct{}, error)) {
		tr, _, err := pt.coord.EndTxn(p.TransactionalID, p.ProducerID, p.ProducerEpoch, req.Commit, false, h.nowMs())
		if err != nil || tr == nil {
			reply(struct{}{}, txnErr(err))
			return
		}
		h.persist(ts, pt, tr, func(err error) { reply(struct{}{}, err) })
	}, func(_ struct{}, err error) { done(err) })
}

// DescribeTransactions implements nodesvc.TxnCoordinators.
func (h *Host) DescribeTransactions(from *shard.Shard, ids []string, done func([]service.TxnDescription)) {
	out := make([]service.TxnDescription, len(ids))
	if len(ids) == 0 {
		done(out)
		return
	}
	var left atomic.Int32
	left.Store(int32(len(ids)))
	for i, id := range ids {
		call(h, from, id, func(_ *txnsShard, pt *txnsPart, reply func(service.TxnDescription, error)) {
			t := pt.coord.Get(id)
			if t == nil {
				reply(service.TxnDescription{}, service.Errorf(service.ErrTransactionalIDNotFound, "no transactional id %q", id))
				return
			}
			d := service.TxnDescription{TransactionalID: id, State: t.State.String(), ProducerID: t.ProducerID, ProducerEpoch: t.Epoch,
				TimeoutMs: t.TimeoutMs, StartMs: -1}
			if t.State == txns.Ongoing || t.State.Prepared() {
				d.StartMs = t.StartMs
			}
			for _, p := range t.Partitions {
				d.Partitions = append(d.Partitions, service.TopicPartition{Topic: p.Topic, Partition: p.Partition})
			}
			reply(d, nil)
		}, func(d service.TxnDescription, err error) {
			d.TransactionalID, d.Err = id, err
			out[i] = d
			if left.Add(-1) == 0 {
				done(out)
			}
		})
	}
}

// ListTransactions implements nodesvc.TxnCoordinators: the ids of the
// coordinators this node runs, as a Kafka broker lists its own.
func (h *Host) ListTransactions(from *shard.Shard, req *service.ListTransactionsRequest, done func([]service.TxnSummary, error)) {
	per := make([][]service.TxnSummary, len(h.shards))
	var left atomic.Int32
	left.Store(int32(len(h.shards)))
	for i, ts := range h.shards {
		nodesvc.RunOn(from, ts.sh, nil, func(_ *shard.Shard, reply func([]service.TxnSummary, error)) {
			var out []service.TxnSummary
			for _, pt := range ts.sorted() {
				if !pt.loaded {
					continue
				}
				for _, id := range pt.coord.IDs() {
					t := pt.coord.Get(id)
					if len(req.States) > 0 && !slices.Contains(req.States, t.State.String()) {
						continue
					}
					if len(req.ProducerIDs) > 0 && !slices.Contains(req.ProducerIDs, t.ProducerID) {
						continue
					}
					out = append(out, service.TxnSummary{TransactionalID: id, ProducerID: t.ProducerID, State: t.State.String()})
				}
			}
			reply(out, nil)
		}, func(out []service.TxnSummary, _ error) {
			per[i] = out
			if left.Add(-1) == 0 {
				var all []service.TxnSummary
				for _, l := range per {
					all = append(all, l...)
				}
				sort.Slice(all, func(a, b int) bool { return all[a].TransactionalID < all[b].TransactionalID })
				done(all, nil)
			}
		})
	}
}
