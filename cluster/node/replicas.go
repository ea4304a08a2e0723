package node

import (
	"errors"
	"log/slog"
	"time"

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
	// reconcile asks shard i for a reconciliation pass (a fenced
	// replica left its host; the pass records its refusal to open).
	reconcile func(i int)
}

// step steps a peer's message into its group on shard shardID. Runs on
// that shard.
func (rh *replicaHost) step(shardID int, m *raftlite.Message) {
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

// peerDown wakes every quiesced group with a replica on node id, and in
// the groups node id led, the first live replica in replica-set order
// (preferred first) campaigns at once instead of waiting for an election
// timeout (campaignsAfterDown): failover takes the liveness timeout plus
// one election round. REQUIRES: on shard metaShard.
func (rh *replicaHost) peerDown(id raftlite.NodeID) {
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
				if !campaignsAfterDown(r.Voters(), lead, id, rh.d.self, alive) {
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
