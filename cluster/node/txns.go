package node

import (
	"errors"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/node/txnshost"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/txns"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// newTxns is the node's host of transaction coordinators
// (cluster/node/txnshost), to start once the service it calls exists.
// The internal topic takes as many partitions as the groups' one
// (cluster.groups_partitions). REQUIRES: the shards are started and
// the groups host built.
func (n *Node) newTxns() *txnshost.Host {
	parts := n.cfg.Cluster.GroupsPartitions
	if parts <= 0 {
		parts = config.GroupsPartitionsDefault
	}
	return txnshost.New(txnshost.Deps{Self: int32(n.self), Partitions: parts,
		Config:      txns.Config{NewProducerID: n.pids.allocate},
		MetaPrimary: func() int32 { id, _ := n.metaRoute(); return id }, Ready: n.metadataReady, AddrOf: n.addrOf, KafkaAddrOf: n.kafkaAddrOf,
		OwnerShard:      func(p int32) int { return n.ownerShard(metadata.TransactionsTopic, p) },
		GroupsPartition: n.groups.PartitionOf,
		WriteMarker:     n.writeTxnMarker,
		Infof:           n.log.Info, Clock: n.clock}, n.group)
}

// writeTxnMarker writes a transaction's marker to part at its primary:
// through this node's replica when it leads the partition (or no other
// leader is known: the replica answers NOT_PRIMARY, and the coordinator
// retries), else through a peer message to the node that leads it,
// which answers once the marker committed there.
func (n *Node) writeTxnMarker(from *shard.Shard, part txns.Partition, m batch.TxnMarker, done func(error)) {
	t := n.view.Load().Topics[part.Topic]
	if t == nil || part.Partition < 0 || int(part.Partition) >= t.Partitions() {
		done(service.Errorf(service.ErrUnknownTopicOrPartition, "%s/%d is not in this node's metadata", part.Topic, part.Partition))
		return
	}
	rt, ok := n.routes.Get(routes.Key(t.ID, part.Partition))
	if !ok || rt.Leader <= 0 || rt.Leader == int32(n.self) || n.peers == nil {
		n.writeTxnMarkerLocal(from, part, m, done)
		return
	}
	req := peerwire.TxnMarker{From: int32(n.self), TopicID: t.ID, Partition: part.Partition, ProducerID: m.ProducerID,
		ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	to := rt.Leader
	err := n.group.Shard(metaShard).Post(func() {
		mc := &n.markers
		if mc.pending == nil {
			mc.pending = map[uint64]markerCall{}
		}
		if len(mc.pending) >= markerCallsMax {
			answerMarker(markerCall{from: from, done: done}, errMarkersBusy)
			return
		}
		mc.next++
		req.ID = mc.next
		mc.pending[req.ID] = markerCall{from: from, done: done}
		n.peers.SendTxnMarker(to, req)
		id := req.ID
		n.group.Shard(metaShard).AfterFunc(markerAnswerWait, func() {
			if c, ok := mc.pending[id]; ok {
				delete(mc.pending, id)
				answerMarker(c, service.Errorf(service.ErrNodeNotAvailable, "node %d did not answer the marker of %s/%d within %v",
					to, part.Topic, part.Partition, markerAnswerWait))
			}
		})
	})
	if err != nil {
		done(service.Errorf(service.ErrNodeNotAvailable, "the node is stopping: %v", err))
	}
}

// Bounds of the markers sent to other nodes.
const (
	// markerAnswerWait is how long a marker sent to another node waits
	// for its answer before the coordinator retries it.
	markerAnswerWait = 10 * time.Second
	// markerCallsMax bounds the markers awaiting an answer.
	markerCallsMax = 1 << 14
)

var errMarkersBusy = service.Errorf(partition.ErrBusy, "too many transaction markers await other nodes' answers; retry")

// markerCalls are the markers sent to other nodes that await an answer,
// by request id. Touched on metaShard only.
type markerCalls struct {
	next    uint64
	pending map[uint64]markerCall
}

// markerCall is one marker's caller: done runs on from (nil: anywhere).
type markerCall struct {
	from *shard.Shard
	done func(error)
}

// answerMarker runs c's done on its shard.
func answerMarker(c markerCall, err error) {
	if c.from == nil {
		c.done(err)
		return
	}
	_ = c.from.Post(func() { c.done(err) }) // a stopping shard drops it: its coordinator is gone
}

// peerTxnMarkerAck hands a peer primary's answer to the marker's caller.
// Any goroutine.
func (n *Node) peerTxnMarkerAck(a peerwire.TxnMarkerAck) {
	_ = n.group.Shard(metaShard).Post(func() {
		c, ok := n.markers.pending[a.ID]
		if !ok {
			return // answered late: its wait ran out and the coordinator retried
		}
		delete(n.markers.pending, a.ID)
		var err error
		switch a.Answer {
		case peerwire.MarkerRetry:
			err = service.Errorf(partition.ErrNotPrimary, "the partition's primary did not write the marker; retry")
		case peerwire.MarkerFenced:
			err = service.Errorf(partition.ErrFencedProducerEpoch, "a newer epoch of the producer wrote there")
		}
		answerMarker(c, err)
	})
}

// peerTxnMarker writes the marker a peer's coordinator asked for, as
// this node's own coordinators do, and answers it. Any goroutine.
func (n *Node) peerTxnMarker(m peerwire.TxnMarker) {
	var topic string
	for name, t := range n.view.Load().Topics {
		if t.ID == m.TopicID {
			topic = name
			break
		}
	}
	answer := func(code byte) {
		_ = n.group.Shard(metaShard).Post(func() {
			if n.peers != nil {
				n.peers.AnswerTxnMarker(m.From, peerwire.TxnMarkerAck{ID: m.ID, Answer: code})
			}
		})
	}
	if topic == "" {
		answer(peerwire.MarkerRetry)
		return
	}
	n.writeTxnMarkerLocal(nil, txns.Partition{Topic: topic, Partition: m.Partition},
		batch.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch},
		func(err error) {
			switch {
			case err == nil:
				answer(peerwire.MarkerWritten)
			case errors.Is(err, partition.ErrFencedProducerEpoch):
				answer(peerwire.MarkerFenced)
			default:
				answer(peerwire.MarkerRetry)
			}
		})
}

// writeTxnMarkerLocal writes a transaction's marker to part on this
// node's replica, its primary; on a partition of the groups' topic the
// group coordinator there then decides the offsets the transaction
// staged. done runs on from (nil: on the partition's shard).
func (n *Node) writeTxnMarkerLocal(from *shard.Shard, part txns.Partition, m batch.TxnMarker, done func(error)) {
	ref := service.PartitionRef{Topic: part.Topic, Partition: part.Partition, Generation: service.GenerationUnknown}
	n.svc.WriteTxnMarker(from, ref, m, func(_ int64, err error) {
		if err != nil || part.Topic != metadata.GroupsTopic {
			done(err)
			return
		}
		i := n.ownerShard(metadata.GroupsTopic, part.Partition)
		if i < 0 {
			done(service.Errorf(service.ErrCoordinatorNotAvailable, "%s partition %d is not in this node's metadata", metadata.GroupsTopic, part.Partition))
			return
		}
		nodesvc.RunOn(from, n.group.Shard(i), nil, func(sh *shard.Shard, reply func(struct{}, error)) {
			n.groups.EndTxn(sh, part.Partition, m.ProducerID, m.Commit, func(err error) { reply(struct{}{}, err) })
		}, func(_ struct{}, err error) { done(err) })
	})
}
