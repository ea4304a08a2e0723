package node

import (
	"errors"
	"github.com/corestream/corestream/cluster/transport"
	"log/slog"
	"time"

	ctl "github.com/corestream/corestream/cluster/controller"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// replicaHost is the glue between the parts that speak about replicas
// (the transport's upcalls, liveness's down edges, the balancer driver's
// transfers) and the shards' replicas themselves: it finds the replica a
// message or a transfer is for and acts on it on its shard, and applies
// the failover rule when a peer goes down. It is built from replicaDeps
// and holds no pointer to the Node.
type replicaHost struct {
	d replicaDeps
}

// replicaDeps is what replicaHost needs from the rest of the node.
type replicaDeps struct {
	self  raftlite.NodeID
	log   *slog.Logger
	group *shard.Group
	// hosts are the shards' partition hosts, by shard ID (filled by the
	// shards' start, before any call here).
	hosts   []*partition.Host
	shardOf func(topicID [16]byte, p int32) int
	// alive is liveness: whether a node is believed up.
	alive func(id int32) bool
	// heartbeat is cluster.heartbeat_interval_ms: a campaign after a
	// primary's death is asked again two beats later.
	heartbeat time.Duration
	// observeMeta shows the controller a message stepped into the
	// metadata group; called on shard metaShard.
	observeMeta func(r *partition.Replica, m *raftlite.Message)
	// transport is the peer transport (nil on a single node, and until
	// the composition root built it): transfers and a move's answers to
	// other nodes go through it.
	transport func() Transport
	// observed hands a move's answer from this node's own primary to the
	// local reassigner (cluster/controller).
	observed func(st peerwire.ReassignState)
	// reconcile asks shard i for a reconciliation pass (a fenced
	// replica left its host; the pass records its refusal to open).
	reconcile func(i int)
	// txnMarker and txnMarkerAck serve a peer coordinator's marker and
	// a peer primary's answer (txns.go); any goroutine.
	txnMarker    func(m peerwire.TxnMarker)
	txnMarkerAck func(a peerwire.TxnMarkerAck)
}

// replicaHost is the transport's Replicas port.
var _ transport.Replicas = (*replicaHost)(nil)

// Step steps a peer's message into its group on shard shardID. Runs on
// that shard.
func (rh *replicaHost) Step(shardID int, m *raftlite.Message) {
	h := rh.d.hosts[shardID]
	if h == nil {
		return
	}
	r := h.Group(m.Group)
	if r == nil {
		return
	}
	if err := r.Step(*m); errors.Is(err, partition.ErrFenced) {
		// Its group lost committed entries (fence.go in shard/partition):
		// the replica left its host; the pass opens it again, which
		// refuses, and the refusal stays in the open failures.
		rh.d.log.Error("partition fenced", "topic", r.Config().Topic, "partition", r.Config().Partition, "err", err)
		if rh.d.reconcile != nil {
			rh.d.reconcile(shardID)
		}
		return
	} else if err != nil && !errors.Is(err, partition.ErrClosed) {
		rh.d.log.Debug("replication: message refused", "group", m.Group, "type", m.Type, "err", err)
		return
	}
	if shardID == metaShard {
		rh.d.observeMeta(r, m)
	}
}

// transfer starts a leadership transfer on the local primary of
// partition p of topicID. Runs on any goroutine; the work runs on the
// partition's shard.
func (rh *replicaHost) transfer(topicID [16]byte, p int32, to int32) {
	key := shardKey(topicID, p)
	sh := rh.d.group.Shard(rh.d.shardOf(topicID, p))
	sh.Post(func() {
		r := rh.d.hosts[sh.ID()].Get(key)
		if r == nil {
			return
		}
		if err := r.TransferLeadership(raftlite.NodeID(to)); err != nil && !errors.Is(err, partition.ErrClosed) {
			rh.d.log.Warn("leadership transfer refused", "topic", r.Config().Topic, "partition", p, "to", to, "err", err)
		}
	})
}

// Transfer starts the leadership transfer a peer asked for (transfer).
func (rh *replicaHost) Transfer(t peerwire.Transfer) { rh.transfer(t.TopicID, t.Partition, t.Target) }

// TxnMarker implements transport.Replicas.
func (rh *replicaHost) TxnMarker(m peerwire.TxnMarker) { rh.d.txnMarker(m) }

// TxnMarkerAck implements transport.Replicas.
func (rh *replicaHost) TxnMarkerAck(a peerwire.TxnMarkerAck) { rh.d.txnMarkerAck(a) }

// Replica is group g's replica on shard shardID, or nil. Runs on that
// shard.
func (rh *replicaHost) Replica(shardID int, g raftlite.GroupID) *partition.Replica {
	if h := rh.d.hosts[shardID]; h != nil {
		return h.Group(g)
	}
	return nil
}

// PeerDown wakes every quiesced group with a replica on node id, and in
// the groups node id led, the first live replica in replica-set order
// (preferred first) campaigns at once instead of waiting for an election
// timeout (campaignsAfterDown): failover takes the liveness timeout plus
// one election round. REQUIRES: on shard metaShard.
func (rh *replicaHost) PeerDown(peer int32) {
	id := raftlite.NodeID(peer)
	alive := func(m raftlite.NodeID) bool { return rh.d.alive(int32(m)) }
	for i := 0; i < rh.d.group.Len(); i++ {
		sh := rh.d.group.Shard(i)
		h := rh.d.hosts[i]
		rh.postRetry(sh, func() {
			h.Each(func(r *partition.Replica) {
				if !r.HasMember(id) {
					return
				}
				r.Unquiesce()
				lead, _ := r.Route()
				if lead != id && lead != raftlite.None {
					return
				}
				// Every live replica stops honouring the dead primary's
				// lease, or it would ignore the campaign below.
				r.ForgetLeader()
				if !transport.CampaignsAfterDown(r.Voters(), lead, id, rh.d.self, alive) {
					return
				}
				r.Campaign()
				// A peer that notices the death up to a beat after this
				// node still honoured the lease and ignored that
				// pre-vote: ask again once it has forgotten.
				sh.AfterFunc(2*rh.d.heartbeat, func() {
					if lead, _ := r.Route(); lead == raftlite.None {
						r.Campaign()
					}
				})
			})
		})
	}
}

// postRetry posts fn to sh, retrying from shard metaShard while sh's inbox
// is full (fn must not be lost). REQUIRES: on shard metaShard.
func (rh *replicaHost) postRetry(sh *shard.Shard, fn func()) {
	if err := sh.Post(fn); errors.Is(err, shard.ErrInboxFull) {
		rh.d.group.Shard(metaShard).AfterFunc(5*time.Millisecond, func() { rh.postRetry(sh, fn) })
	}
}

// requestTransfer asks the primary of partition p (node from) to hand
// leadership to node to: locally, or through the transport.
// REQUIRES: on shard metaShard.
func (rh *replicaHost) requestTransfer(topicID [16]byte, p int32, from, to int32) {
	if from == int32(rh.d.self) {
		rh.transfer(topicID, p, to)
		return
	}
	if t := rh.d.transport(); t != nil {
		t.RequestTransfer(from, peerwire.Transfer{TopicID: topicID, Partition: p, Target: to})
	}
}

// Reassign takes the next step of the move m asked for on the local
// primary of its partition and answers node m.From. A replica that does
// not lead does nothing: the driver asks the primary the routes name
// next. Runs on any goroutine; the work runs on the partition's shard.
func (rh *replicaHost) Reassign(m peerwire.Reassign) {
	key := shardKey(m.TopicID, m.Partition)
	sh := rh.d.group.Shard(rh.d.shardOf(m.TopicID, m.Partition))
	sh.Post(func() {
		r := rh.d.hosts[sh.ID()].Get(key)
		if r == nil || !r.IsPrimary() {
			return
		}
		conf, committed := r.Membership(), r.ConfCommitted()
		if cc, ok := ctl.ReassignNext(conf, committed, m.Target, rh.d.self); ok {
			reply := func(res partition.ConfChangeResult) {
				if res.Err != nil && !errors.Is(res.Err, raftlite.ErrConfChangePending) {
					rh.d.log.Info("replica move step not taken", "topic", r.Config().Topic, "partition", m.Partition, "change", cc, "err", res.Err)
				}
			}
			if cc.Type == raftlite.ConfPromote {
				r.Promote(cc.Node, ctl.ReassignPromoteWait, reply)
			} else {
				r.ChangeMembership(cc, reply)
			}
			conf, committed = r.Membership(), r.ConfCommitted()
		}
		st := peerwire.ReassignState{TopicID: m.TopicID, Partition: m.Partition, Conf: conf, Committed: committed}
		if prs, err := r.MemberProgress(); err == nil {
			for _, p := range prs {
				if p.Learner {
					st.EntriesBehind, st.BytesBehind = p.EntriesBehind, p.BytesBehind
				}
			}
		}
		rh.d.group.Shard(metaShard).Post(func() {
			if m.From == int32(rh.d.self) {
				rh.d.observed(st)
			} else if t := rh.d.transport(); t != nil {
				t.AnswerReassign(m.From, st)
			}
		})
	})
}
