// Package transport is the peer transport: the TCP links between nodes
// (TCP: K links to every peer, coalesced frames, appends and whole
// segments sent from the segment files, the handshake of peerauth, TLS
// through tlsbridge), the Transport port every transport offers the
// node, and the ports it calls back (Replicas, Routes, Metadata, in
// Deps). Beside it, the liveness detector that every frame from a peer
// feeds, the down-watch that turns its signal into peer-down edges, and
// the failover rule those edges drive. They read time only through a
// clock, so the simulators run them unchanged.
//
// It is a part of the control plane: it imports the leaves, the routes,
// the replicas and the runtime below it, and no front end, no other
// part and not the node (the layering test holds that).
package transport

import (
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/raftlite"
)

// Liveness is the node's failure detector: a peer is alive while a frame
// from it arrived within an election timeout. The transport feeds it
// (heard, on every frame); every other part reads it through a Liveness
// signal (alive) and never sees the transport. It reads time only
// through its clock, so the simulator runs the same detector.
type Liveness struct {
	clock   clock.Clock
	timeout time.Duration
	// lastSeen[id] is when a frame last came from node id (unix ns, 0:
	// never).
	lastSeen [raftlite.NodeIDMax + 1]atomic.Int64
}

// NewLiveness is a detector on clock c with the given timeout.
func NewLiveness(c clock.Clock, timeout time.Duration) *Liveness {
	return &Liveness{clock: c, timeout: timeout}
}

// Timeout is how long a peer stays alive after its last frame.
func (l *Liveness) Timeout() time.Duration { return l.timeout }

// Heard notes a frame from node id. Safe on any goroutine.
func (l *Liveness) Heard(id int32) {
	if id > 0 && id <= int32(raftlite.NodeIDMax) {
		l.lastSeen[id].Store(l.clock.Now().UnixNano())
	}
}

// Alive reports whether a frame came from node id within the timeout.
// Safe on any goroutine.
func (l *Liveness) Alive(id int32) bool {
	if id <= 0 || id > int32(raftlite.NodeIDMax) {
		return false
	}
	last := l.lastSeen[id].Load()
	return last != 0 && l.clock.Now().Sub(time.Unix(0, last)) < l.timeout
}

// DownWatch turns the liveness signal into "peer down" edges, one beat
// at a time (pure: the caller gives the time and the signal).
type DownWatch struct {
	every   time.Duration // the beat interval
	timeout time.Duration // the liveness timeout
	// lastBeat is when beat last ran (zero: never).
	lastBeat time.Time
	wasAlive map[int32]bool
}

// NewDownWatch is a watch beating every every, for liveness timeout.
func NewDownWatch(every, timeout time.Duration) *DownWatch {
	return &DownWatch{every: every, timeout: timeout, wasAlive: map[int32]bool{}}
}

// Beat returns the peers that were alive at the previous Beat and are
// not now (down), and those that were not and are now (up; at the first
// Beat, every peer alive). A Beat that comes late means this node was the one stalled:
// the peers' frames may be waiting unread in its sockets, so their
// silence proves nothing this time and Beat reports nobody.
func (w *DownWatch) Beat(now time.Time, peers []int32, alive func(int32) bool) (down, up []int32) {
	stalled := !w.lastBeat.IsZero() && now.Sub(w.lastBeat) > w.every+w.timeout/2
	w.lastBeat = now
	if stalled {
		return nil, nil
	}
	for _, id := range peers {
		a := alive(id)
		if w.wasAlive[id] && !a {
			down = append(down, id)
		}
		if !w.wasAlive[id] && a {
			up = append(up, id)
		}
		w.wasAlive[id] = a
	}
	return down, up
}

// CampaignsAfterDown is the failover rule for one group when node dead
// stops answering: in a group that dead led (or that has no leader), the
// first replica in replica-set order (preferred first) that is alive
// campaigns at once instead of waiting for an election timeout. It
// reports whether that replica is self.
func CampaignsAfterDown(replicas []raftlite.NodeID, lead, dead, self raftlite.NodeID, alive func(raftlite.NodeID) bool) bool {
	if lead != dead && lead != raftlite.None {
		return false
	}
	for _, m := range replicas {
		if m == dead || !(m == self || alive(m)) {
			continue
		}
		return m == self
	}
	return false
}
