package routes

import (
	"sort"
	"sync"
	"time"

	"github.com/corestream/corestream/raftlite"
)

// The in-sync rule (docs/design/replication.md).
//
// A primary samples each follower of each partition it leads every
// inSyncEvery: its log end offset L_k at the sample time t_k and the
// follower's match M_k (raftlite's progress: the highest offset durable on
// the follower and matching). Adapted from Kafka's Replica.updateFetchState,
// where a fetch counts as caught up when it reaches the leader's log end
// either as it is now or as it was at the previous fetch:
//
//	M_k+1 >= L_k       the follower holds everything: caught up at t_k
//	M_k+1 >= L_{k-1}   it holds everything the primary had at the previous
//	                   sample: caught up at t_{k-1}
//
// A follower is in sync while now − lastCaughtUp ≤ the window
// (cluster.replica_lag_time_max_ms). Under a saturating produce a healthy
// follower is always at most a round trip behind, so it reaches L_{k-1}
// at every sample and never leaves the set; a stalled one leaves after the
// window. A catch-up counts only while the follower answers the group
// (raftlite's check-quorum activity; a quiesced group's followers count as
// answering), as Kafka records one only on a fetch: a follower that went
// silent leaves after the window even when there was nothing to catch up
// on. A follower whose node the failure detector reports dead is offline
// and never in sync, whatever its last catch-up; once back it is in sync
// only after a new catch-up (rejoining), so a node that has just
// restarted is not counted before its replica serves.

// followerLag is the in-sync state of one follower on its primary.
//
// Invariant: caughtUp is zero or not after prevAt's first value; prevAt is
// zero until a sample of a live follower.
type followerLag struct {
	id raftlite.NodeID
	// caughtUp is when the follower last caught up (zero: never seen to).
	caughtUp time.Time
	// prevEnd and prevAt are the primary's log end at the previous sample
	// of this follower and that sample's time (zero: none since it was
	// last seen dead, or since this node became primary).
	prevEnd int64
	prevAt  time.Time
	// rejoining says the follower's node was seen dead, and no catch-up
	// has been sampled since.
	rejoining bool
	// lagRecords is how many records it missed at the last sample.
	lagRecords int64
}

// followerSample is what a primary knows of one follower at one instant.
type followerSample struct {
	// end is the primary's log end offset; match the follower's matched
	// offset (-1: unknown).
	end, match int64
	// alive: the failure detector believes the follower's node is up.
	alive bool
	// active: the follower answered the group lately (raftlite's
	// check-quorum activity).
	active bool
}

// observe applies one sample taken at now.
func (f *followerLag) observe(now time.Time, s followerSample) {
	if !s.alive {
		f.rejoining, f.prevEnd, f.prevAt = true, 0, time.Time{}
		f.lagRecords = max(0, s.end-(s.match+1))
		return
	}
	reached := s.match + 1
	f.lagRecords = max(0, s.end-reached)
	// Like a Kafka fetch, a catch-up counts only from a follower that
	// answers: one that went silent with nothing to catch up on leaves
	// after the window too.
	if s.active {
		switch {
		case reached >= s.end:
			f.caughtUp, f.rejoining = now, false
		case !f.prevAt.IsZero() && reached >= f.prevEnd:
			if f.prevAt.After(f.caughtUp) {
				f.caughtUp = f.prevAt
			}
			f.rejoining = false
		}
	}
	f.prevEnd, f.prevAt = s.end, now
}

// inSync reports whether the follower is in sync at now with window.
func (f *followerLag) inSync(now time.Time, window time.Duration, alive bool) bool {
	return alive && !f.rejoining && !f.caughtUp.IsZero() && now.Sub(f.caughtUp) <= window
}

// partitionLag is the in-sync state of one partition on its primary, for
// one term: a new primary starts a new one.
type partitionLag struct {
	term int32
	// since is when this node became the primary (the lag in seconds of a
	// follower never seen caught up counts from there).
	since     time.Time
	followers []followerLag
	// at is the time of the last sample.
	at time.Time
}

// follower returns id's state, adding it (never caught up) when new.
func (p *partitionLag) follower(id raftlite.NodeID) *followerLag {
	for i := range p.followers {
		if p.followers[i].id == id {
			return &p.followers[i]
		}
	}
	p.followers = append(p.followers, followerLag{id: id})
	sort.Slice(p.followers, func(i, j int) bool { return p.followers[i].id < p.followers[j].id })
	return p.follower(id)
}

// LagTable holds the in-sync state of the partitions this node leads.
// Shards write their partitions' entries when they sample; metadata
// answers and the metrics read them.
//
// mu guards m and every *partitionLag in it.
type LagTable struct {
	mu sync.Mutex
	m  map[[20]byte]*partitionLag
}

// SampleInput is one sample of a partition on its primary.
type SampleInput struct {
	Self     raftlite.NodeID
	Term     int32
	Replicas []raftlite.NodeID
	// Seed lists the replicas the previous primary reported in sync (nil:
	// unknown); a new term starts them as caught up now, as Kafka keeps
	// the ISR across a leader change.
	Seed []int32
	End  int64
	// Follower reports a Follower's matched offset and activity.
	Follower func(raftlite.NodeID) (match int64, active bool, ok bool)
	Alive    func(raftlite.NodeID) bool
}

// Sample records one Sample of partition key at now and returns its
// in-sync replicas (the primary first) under window.
func (t *LagTable) Sample(key [20]byte, now time.Time, window time.Duration, in SampleInput) []int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[[20]byte]*partitionLag{}
	}
	p := t.m[key]
	if p == nil || p.term != in.Term {
		p = &partitionLag{term: in.Term, since: now}
		for _, id := range in.Seed {
			if raftlite.NodeID(id) != in.Self && in.Alive(raftlite.NodeID(id)) {
				p.follower(raftlite.NodeID(id)).caughtUp = now
			}
		}
		t.m[key] = p
	}
	p.at = now
	out := []int32{int32(in.Self)}
	for _, id := range in.Replicas {
		if id == in.Self {
			continue
		}
		f := p.follower(id)
		match, active, ok := in.Follower(id)
		if !ok {
			match = -1
		}
		alive := in.Alive(id)
		f.observe(now, followerSample{end: in.End, match: match, alive: alive, active: active})
		if f.inSync(now, window, alive) {
			out = append(out, int32(id))
		}
	}
	p.prune(in.Self, in.Replicas)
	return out
}

// prune forgets followers that are no longer replicas (a seed naming a
// node outside the set, or a replica set that shrank).
func (p *partitionLag) prune(self raftlite.NodeID, replicas []raftlite.NodeID) {
	keep := p.followers[:0]
	for _, f := range p.followers {
		for _, id := range replicas {
			if id == f.id && id != self {
				keep = append(keep, f)
				break
			}
		}
	}
	p.followers = keep
}

// CaughtUp returns when follower id of partition key last caught up, as
// Unix milliseconds (-1: never, or this node does not lead it).
func (t *LagTable) CaughtUp(key [20]byte, id raftlite.NodeID) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.m[key]
	if p == nil {
		return -1
	}
	for _, f := range p.followers {
		if f.id == id {
			if f.caughtUp.IsZero() {
				return -1
			}
			return f.caughtUp.UnixMilli()
		}
	}
	return -1
}

// Drop forgets partition key (this node no longer leads it).
func (t *LagTable) Drop(key [20]byte) {
	t.mu.Lock()
	delete(t.m, key)
	t.mu.Unlock()
}

// LagMax returns the largest follower lag over the partitions this node
// leads: in records at the last sample, and in time since the follower
// last caught up (since the node became primary when it never did).
func (t *LagTable) LagMax(now time.Time) (records int64, behind time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.m {
		for _, f := range p.followers {
			records = max(records, f.lagRecords)
			from := f.caughtUp
			if from.IsZero() {
				from = p.since
			}
			// A follower caught up at the last sample is not behind.
			if from.Before(p.at) {
				behind = max(behind, now.Sub(from))
			}
		}
	}
	return records, behind
}
