package node

import (
	"log/slog"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// router is the part that writes this node's routes: each local
// replica's primary and generation go into the route table (setLocal,
// view.go), the partitions this node leads are sampled into the lag table
// (insync.go) for their in-sync sets, and the routes this node leads are
// announced through the transport. The route table and the lag table are
// shared with their readers (the service, the metrics); the router holds
// no pointer to the Node.
type router struct {
	self   raftlite.NodeID
	routes *routes
	lags   *lagTable
	clock  clock.Clock
	// window is cluster.replica_lag_time_max_ms.
	window time.Duration
	// alive is the liveness signal (this node included).
	alive func(id int32) bool
	// announce queues a route this node leads for the peers (nil on a
	// single node).
	announce func(peerwire.Route)
	log      *slog.Logger
	// stopped ends the in-sync loops.
	stopped func() bool
}

// changed records replica r's primary and generation (its OnRoute).
func (rt *router) changed(r *partition.Replica) { rt.set(r, nil) }

// set records r's route with the in-sync set just sampled (nil: sample it
// now when this node is the primary), and announces it when this node is
// the primary.
func (rt *router) set(r *partition.Replica, inSync []int32) {
	lead, term := r.Route()
	nr := route{leader: int32(lead), term: term}
	if lead == raftlite.None {
		nr.leader = -1
	}
	if lead == rt.self {
		if inSync == nil {
			inSync = rt.inSync(r)
		}
		nr.inSync = inSync
	} else {
		rt.lags.drop(r.Key())
	}
	old, had := rt.routes.get(r.Key())
	if !rt.routes.setLocal(r.Key(), nr) {
		return // a newer generation, learned from its primary, stands
	}
	if !had || old.leader != nr.leader || old.term != nr.term {
		cfg := r.Config()
		rt.log.Debug("primary changed", "topic", cfg.Topic, "partition", cfg.Partition, "primary", nr.leader, "generation", nr.term)
	}
	if rt.announce != nil && lead == rt.self {
		rt.announce(announcement(r.Key(), nr))
	}
}

// inSync samples r (a primary) and lists its in-sync replicas under the
// rule in insync.go: caught up to the primary's log end within
// cluster.replica_lag_time_max_ms, and on a node believed up.
// REQUIRES: running on r's shard.
func (rt *router) inSync(r *partition.Replica) []int32 {
	_, term := r.Route()
	var seed []int32
	if old, ok := rt.routes.get(r.Key()); ok && old.term < term {
		seed = old.inSync
	}
	rn := r.Raft()
	return rt.lags.sample(r.Key(), rt.clock.Now(), rt.window, sampleInput{
		self: rt.self, term: term, replicas: r.Voters(), seed: seed, end: r.Log().LogEndOffset(),
		follower: func(id raftlite.NodeID) (int64, bool, bool) {
			m, active, ok := rn.Follower(id)
			// A quiesced group exchanges no messages: every follower was
			// caught up when it went quiet, and a member's death wakes it.
			return m, active || rn.Quiesced(), ok
		},
		alive: func(id raftlite.NodeID) bool { return rt.alive(int32(id)) },
	})
}

// drop forgets a closed replica's route and lag state.
func (rt *router) drop(key [20]byte) {
	rt.routes.drop(key)
	rt.lags.drop(key)
}

// inSyncEvery is how often primaries refresh their in-sync replicas.
const inSyncEvery = 250 * time.Millisecond

// inSyncLoop refreshes, on shard sh, the in-sync sets of the partitions
// this node leads there (h's replicas), and announces those that changed.
func (rt *router) inSyncLoop(sh *shard.Shard, h func() *partition.Host) {
	if rt.stopped() {
		return
	}
	if host := h(); host != nil {
		host.Each(func(r *partition.Replica) {
			if !r.IsPrimary() {
				return
			}
			// Every sample counts, quiesced groups included: the time each
			// follower last caught up moves on only when sampled.
			old, _ := rt.routes.get(r.Key())
			if now := rt.inSync(r); !sameIDs(old.inSync, now) || old.leader != int32(rt.self) {
				rt.set(r, now)
			}
		})
	}
	sh.AfterFunc(inSyncEvery, func() { rt.inSyncLoop(sh, h) })
}

func sameIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
