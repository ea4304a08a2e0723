// Package balance decides the next primary move that brings a cluster's
// primaries back toward balance. It is a pure function of a View: it reads
// no clock (the caller passes NowMs), starts nothing and does no I/O, so
// the metadata primary can run it on every interval and tests can pin its
// decisions with golden scenarios.
//
// Goal: every live node leads a number of partitions within the configured
// imbalance of the ideal (partitions with a primary divided by live nodes
// that can lead). A move is one leadership transfer of one partition to
// another of its replicas. Rules:
//
//   - one move at a time: while a move is in flight, Next returns none;
//   - never to a dead node, and never to a replica that is not in sync
//     (a lagging replica would stall the partition while it catches up);
//   - never a partition moved within the mute period;
//   - among moves that reduce the imbalance, prefer moving a partition back
//     to its preferred primary, then from the most loaded node to the
//     least loaded, then the lowest partition key (deterministic).
//
// Preferred primaries (Kafka's preferred leader election): with
// View.PreferredCheck, a node that leads fewer of the partitions it is the
// preferred primary of (the first of their replica list) than it should
// gets them back first. Its share of those partitions led by another node
// (led elsewhere, or by none) is its preferred imbalance; when that share
// exceeds PreferredImbalancePercent (Kafka's
// leader.imbalance.per.broker.percentage), Next moves one of them back to
// it, provided it is alive and in sync, the current primary is alive, and
// the partition is not muted. The node with the largest share goes first,
// then the lowest key. Only when no such move is due does Next even out
// counts as above, and with the check on it never takes a partition away
// from its preferred primary to do so (the two rules would undo each
// other's moves). While preferred replicas are down, their partitions
// are led elsewhere and the counts are evened among the living as before.
//
// A metadata-primary change needs no hand-off: the View is built from the
// partitions' current primaries, so a move finished under the old
// metadata primary is simply seen as done, and the mute period (carried in
// the partitions' LastMovedMs from metadata) keeps it from being undone.
package balance

import (
	"fmt"
	"math"
	"sort"
)

// NodeID identifies a roster node; 0 means none.
type NodeID = int32

// Node is one roster member as the metadata primary sees it.
type Node struct {
	ID    NodeID
	Alive bool
}

// Partition is one partition's leadership state.
type Partition struct {
	// Key identifies the partition (for example "orders/3"); ties between
	// otherwise equal moves are broken by the lowest key.
	Key string
	// Replicas is the replica set; Replicas[0] is the preferred primary.
	Replicas []NodeID
	// Primary is the current primary, 0 when the partition has none.
	Primary NodeID
	// InSync lists the replicas caught up with the primary.
	InSync []NodeID
	// LastMovedMs is when the balancer last moved this partition (0: never).
	LastMovedMs int64
}

// View is everything Next looks at.
type View struct {
	Nodes      []Node
	Partitions []Partition
	// MoveInFlight is true while an earlier move has not finished.
	MoveInFlight bool
	// NowMs is the caller's clock.
	NowMs int64
	// ImbalancePercent is the tolerated deviation from the ideal count.
	ImbalancePercent int
	// MuteMs is how long a moved partition is left alone.
	MuteMs int64
	// PreferredCheck turns on the preferred-primary rule (see the package
	// doc) with PreferredImbalancePercent, 0..100, as the share of a
	// node's preferred partitions that may be led elsewhere.
	PreferredCheck            bool
	PreferredImbalancePercent int
	// PreferredOnly makes Next return only moves back to preferred
	// primaries, muted partitions included (`cluster rebalance
	// --preferred`: an operator's explicit request, as Kafka's preferred
	// leader election on demand).
	PreferredOnly bool
}

// Move is one leadership transfer.
type Move struct {
	Key      string
	From, To NodeID
	// Why says, for the log, what the move fixes.
	Why string
}

// Bounds returns the lowest and highest primary counts a live node may have
// before the cluster counts as imbalanced, and the ideal.
func Bounds(v *View) (lo, hi int, ideal float64) {
	live := 0
	for _, n := range v.Nodes {
		if n.Alive {
			live++
		}
	}
	led := 0
	for _, p := range v.Partitions {
		if p.Primary != 0 {
			led++
		}
	}
	if live == 0 {
		return 0, 0, 0
	}
	ideal = float64(led) / float64(live)
	slack := ideal * float64(v.ImbalancePercent) / 100
	// Counts are integers: floor(ideal) and ceil(ideal) are always allowed,
	// so a perfectly spread 5 partitions over 3 nodes (2/2/1) is balanced.
	hi = max(int(math.Ceil(ideal)), int(math.Floor(ideal+slack)))
	lo = min(int(math.Floor(ideal)), int(math.Ceil(ideal-slack)))
	return lo, hi, ideal
}

// Counts returns the primary count of every live node.
func Counts(v *View) map[NodeID]int {
	c := map[NodeID]int{}
	for _, n := range v.Nodes {
		if n.Alive {
			c[n.ID] = 0
		}
	}
	for _, p := range v.Partitions {
		if _, live := c[p.Primary]; live {
			c[p.Primary]++
		}
	}
	return c
}

// Balanced reports whether every live node's count is within Bounds.
func Balanced(v *View) bool {
	lo, hi, _ := Bounds(v)
	for _, n := range Counts(v) {
		if n < lo || n > hi {
			return false
		}
	}
	return true
}

// PreferredShare is one node's preferred imbalance: of the Preferred
// partitions it is the preferred primary of, Away are led by another node
// or by none.
type PreferredShare struct {
	Preferred, Away int
}

// Percent is Away as a share of Preferred (0 when it prefers none).
func (s PreferredShare) Percent() float64 {
	if s.Preferred == 0 {
		return 0
	}
	return 100 * float64(s.Away) / float64(s.Preferred)
}

// PreferredShares returns every live node's preferred imbalance.
func PreferredShares(v *View) map[NodeID]PreferredShare {
	out := map[NodeID]PreferredShare{}
	for _, n := range v.Nodes {
		if n.Alive {
			out[n.ID] = PreferredShare{}
		}
	}
	for _, p := range v.Partitions {
		if len(p.Replicas) == 0 {
			continue
		}
		pref := p.Replicas[0]
		s, live := out[pref]
		if !live {
			continue
		}
		s.Preferred++
		if p.Primary != pref {
			s.Away++
		}
		out[pref] = s
	}
	return out
}

// nextPreferred is the move the preferred-primary rule asks for, if any.
func nextPreferred(v *View) (Move, bool) {
	shares := PreferredShares(v)
	live := Counts(v) // its keys are the live nodes
	var best *Partition
	var bestShare PreferredShare
	for i := range v.Partitions {
		p := &v.Partitions[i]
		if len(p.Replicas) == 0 {
			continue
		}
		pref := p.Replicas[0]
		sh, prefLive := shares[pref]
		_, fromLive := live[p.Primary]
		if !prefLive || p.Primary == pref || p.Primary == 0 || !fromLive || !contains(p.InSync, pref) {
			continue
		}
		if sh.Percent() <= float64(v.PreferredImbalancePercent) {
			continue
		}
		if !v.PreferredOnly && p.LastMovedMs != 0 && v.NowMs-p.LastMovedMs < v.MuteMs {
			continue // on demand, the operator's word overrides the mute
		}
		if best == nil || sh.Percent() > bestShare.Percent() ||
			sh.Percent() == bestShare.Percent() && (pref < best.Replicas[0] || pref == best.Replicas[0] && p.Key < best.Key) {
			best, bestShare = p, sh
		}
	}
	if best == nil {
		return Move{}, false
	}
	pref := best.Replicas[0]
	return Move{Key: best.Key, From: best.Primary, To: pref,
		Why: fmt.Sprintf("node %d is the preferred primary of %d partitions and leads %d (%.0f%% away, allowed %d%%); back to its preferred primary",
			pref, bestShare.Preferred, bestShare.Preferred-bestShare.Away, bestShare.Percent(), v.PreferredImbalancePercent)}, true
}

// Next returns the next move, or ok=false when none is needed or possible.
func Next(v *View) (m Move, ok bool) {
	if v.MoveInFlight {
		return Move{}, false
	}
	if v.PreferredCheck || v.PreferredOnly {
		if m, ok := nextPreferred(v); ok || v.PreferredOnly {
			return m, ok
		}
	}
	if Balanced(v) {
		return Move{}, false
	}
	lo, hi, ideal := Bounds(v)
	counts := Counts(v)
	type cand struct {
		Move
		preferred  bool
		fromCount  int
		toCount    int
		fixesRange bool
	}
	var cands []cand
	for i := range v.Partitions {
		p := &v.Partitions[i]
		from := p.Primary
		fc, live := counts[from]
		if from == 0 || !live {
			continue
		}
		if p.LastMovedMs != 0 && v.NowMs-p.LastMovedMs < v.MuteMs {
			continue
		}
		if v.PreferredCheck && len(p.Replicas) > 0 && from == p.Replicas[0] {
			continue // the preferred-primary rule would move it back
		}
		if v.PreferredCheck && len(p.Replicas) > 0 && isLive(counts, p.Replicas[0]) && !contains(p.InSync, p.Replicas[0]) {
			// Its preferred replica is back but still catching up: the
			// preferred rule takes it there once it is in sync, and a move
			// elsewhere now would be muted and hold that up for MuteMs.
			continue
		}
		for _, to := range p.Replicas {
			tc, toLive := counts[to]
			if to == from || !toLive || !contains(p.InSync, to) {
				continue
			}
			// The move must shrink the spread: the source ends above the
			// target, or the move pulls an out-of-range node into range.
			if fc-1 < tc+1 {
				continue
			}
			c := cand{Move: Move{Key: p.Key, From: from, To: to}, preferred: to == p.Replicas[0],
				fromCount: fc, toCount: tc, fixesRange: fc > hi || tc < lo}
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return Move{}, false
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.fixesRange != b.fixesRange {
			return a.fixesRange
		}
		if a.preferred != b.preferred {
			return a.preferred
		}
		if a.fromCount != b.fromCount {
			return a.fromCount > b.fromCount
		}
		if a.toCount != b.toCount {
			return a.toCount < b.toCount
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.To < b.To
	})
	best := cands[0]
	why := fmt.Sprintf("node %d leads %d, node %d leads %d; ideal %.2f, allowed %d..%d", best.From, best.fromCount, best.To, best.toCount, ideal, lo, hi)
	if best.preferred {
		why += "; back to its preferred primary"
	}
	best.Why = why
	return best.Move, true
}

// Plan simulates Next repeatedly, assuming every move succeeds at once, and
// returns the whole sequence (bounded by movesMax). It is what
// `cluster rebalance --dry-run` shows.
func Plan(v View, movesMax int) []Move {
	var out []Move
	parts := make([]Partition, len(v.Partitions))
	copy(parts, v.Partitions)
	v.Partitions = parts
	v.MoveInFlight = false
	for len(out) < movesMax {
		m, ok := Next(&v)
		if !ok {
			break
		}
		for i := range v.Partitions {
			if v.Partitions[i].Key == m.Key {
				v.Partitions[i].Primary = m.To
				v.Partitions[i].LastMovedMs = max(v.NowMs, 1)
			}
		}
		out = append(out, m)
	}
	return out
}

func isLive(counts map[NodeID]int, n NodeID) bool {
	_, ok := counts[n]
	return ok
}

func contains(s []NodeID, n NodeID) bool {
	for _, x := range s {
		if x == n {
			return true
		}
	}
	return false
}
