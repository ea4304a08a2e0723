package routes

import (
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// Router is the part that writes this node's routes: each local
// replica's primary and generation go into the route table (setLocal,
// view.go), the partitions this node leads are sampled into the lag table
// (insync.go) for their in-sync sets, and the routes this node leads are
// announced through the transport. The route table and the lag table are
// shared with their readers (the service, the metrics); the Router holds
// no pointer to the Node.
type Router struct {
	Self   raftlite.NodeID
	Routes *Table
	Lags   *LagTable
	Clock  clock.Clock
	// Window is cluster.replica_lag_time_max_ms.
	Window time.Duration
	// Live is the liveness signal (this node included).
	Live Liveness
	// Peers queues the routes this node leads for the peers (nil on a
	// single node).
	Peers Announcer
	Log   *slog.Logger
	// Stopped ends the in-sync loops.
	Stopped *atomic.Bool
}

// Liveness is the liveness signal the router reads: whether node id is
// believed up (this node included). Safe on any goroutine.
type Liveness interface {
	Alive(id int32) bool
}

// Announcer queues the route of a partition this node leads for its
// peers; the peer transport is one.
type Announcer interface {
	Announce(r peerwire.Route)
}

// Changed records replica r's primary and generation (its OnRoute).
func (rt *Router) Changed(r *partition.Replica) { rt.set(r, nil) }

// set records r's route with the in-sync set just sampled (nil: sample it
// now when this node is the primary), and announces it when this node is
// the primary.
func (rt *Router) set(r *partition.Replica, inSync []int32) {
	lead, term := r.Route()
	nr := Route{Leader: int32(lead), Term: term}
	if lead == raftlite.None {
		nr.Leader = -1
	}
	if lead == rt.Self {
		if inSync == nil {
			inSync = rt.inSync(r)
		}
		nr.InSync = inSync
	} else {
		rt.Lags.Drop(r.Key())
	}
	old, had := rt.Routes.Get(r.Key())
	if !rt.Routes.SetLocal(r.Key(), nr) {
		return // a newer generation, learned from its primary, stands
	}
	if !had || old.Leader != nr.Leader || old.Term != nr.Term {
		cfg := r.Config()
		rt.Log.Debug("primary changed", "topic", cfg.Topic, "partition", cfg.Partition, "primary", nr.Leader, "generation", nr.Term)
	}
	if rt.Peers != nil && lead == rt.Self {
		rt.Peers.Announce(Announcement(r.Key(), nr))
	}
}

// inSync samples r (a primary) and lists its in-sync replicas under the
// rule in insync.go: caught up to the primary's log end within
// cluster.replica_lag_time_max_ms, and on a node believed up.
// REQUIRES: running on r's shard.
func (rt *Router) inSync(r *partition.Replica) []int32 {
	_, term := r.Route()
	var seed []int32
	if old, ok := rt.Routes.Get(r.Key()); ok && old.Term < term {
		seed = old.InSync
	}
	rn := r.Raft()
	return rt.Lags.Sample(r.Key(), rt.Clock.Now(), rt.Window, SampleInput{
		Self: rt.Self, Term: term, Replicas: r.Voters(), Seed: seed, End: r.Log().LogEndOffset(),
		Follower: func(id raftlite.NodeID) (int64, bool, bool) {
			m, active, ok := rn.Follower(id)
			// A quiesced group exchanges no messages: every follower was
			// caught up when it went quiet, and a member's death wakes it.
			return m, active || rn.Quiesced(), ok
		},
		Alive: func(id raftlite.NodeID) bool { return rt.Live.Alive(int32(id)) },
	})
}

// Drop forgets a closed replica's route and lag state.
func (rt *Router) Drop(key [20]byte) {
	rt.Routes.Drop(key)
	rt.Lags.Drop(key)
}

// InSyncEvery is how often primaries refresh their in-sync replicas.
const InSyncEvery = 250 * time.Millisecond

// InSyncLoop refreshes, on shard sh, the in-sync sets of the partitions
// this node leads there (h's replicas), and announces those that changed.
func (rt *Router) InSyncLoop(sh *shard.Shard, h func() *partition.Host) {
	if rt.Stopped.Load() {
		return
	}
	if host := h(); host != nil {
		host.Each(func(r *partition.Replica) {
			if !r.IsPrimary() {
				return
			}
			// Every sample counts, quiesced groups included: the time each
			// follower last caught up moves on only when sampled.
			old, _ := rt.Routes.Get(r.Key())
			if now := rt.inSync(r); !slices.Equal(old.InSync, now) || old.Leader != int32(rt.Self) {
				rt.set(r, now)
			}
		})
	}
	sh.AfterFunc(InSyncEvery, func() { rt.InSyncLoop(sh, h) })
}
