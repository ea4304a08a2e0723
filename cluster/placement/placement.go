// Package placement decides where a new partition's replicas live and which
// of them is its preferred primary. It is a pure function of its inputs (no
// clocks, no randomness, no I/O), so every node that runs it on the same
// metadata gets the same answer and tests need no cluster.
//
// The rule: partitions are placed one at a time. The preferred primary is
// the eligible node leading the fewest partitions (ties: fewest replicas,
// then id order starting after the previous primary, so equal loads rotate).
// The followers are the eligible nodes holding the fewest replicas; among
// equals, nodes that already lead more partitions go first, because the
// nodes that lead fewer will be chosen as primaries soon and then need the
// replica room. On a fresh roster this keeps both counts within one of even
// for every roster size, factor and partition count (TestFreshIsExact
// checks all of them up to 32 nodes); counts include every existing
// partition, so a new topic evens out what older ones left.
//
// Racks (PlaceRacks): a partition's replicas are spread over racks before
// a rack repeats. Each follower is taken from the racks that hold the
// fewest of the partition's replicas chosen so far, and only among those by
// the load rule above; a node without a rack stands in a rack of its own.
// So with r racks a partition of factor rf spans min(rf, r) racks, and
// losing one rack loses at most ceil(rf/r) of its copies. Racks of unequal
// size load their nodes unequally: a lone node in a rack of its own holds a
// replica of nearly every partition once rf reaches the rack count, as in
// Kafka's rack-aware assignment.
package placement

import (
	"errors"
	"fmt"
	"sort"
)

// NodeID identifies a roster node.
type NodeID = int32

// ErrFactor is returned when the replication factor cannot be met.
var ErrFactor = errors.New("placement: replication factor")

// Load is how many replicas and preferred primaries a node already holds.
type Load struct {
	Replicas  int
	Preferred int
}

// Place returns the replica lists (first = preferred primary) for n new
// partitions of factor rf over the eligible nodes, given the current load
// of every node (nodes missing from load count as empty). load is not
// modified.
// REQUIRES: eligible has no duplicates.
func Place(eligible []NodeID, load map[NodeID]Load, n, rf int) ([][]NodeID, error) {
	return PlaceRacks(eligible, nil, load, n, rf)
}

// PlaceRacks is Place with each node's rack (racks[id]; missing or empty:
// a rack of its own), spreading every partition's replicas over racks
// before a rack repeats. racks is not modified.
// REQUIRES: eligible has no duplicates.
func PlaceRacks(eligible []NodeID, racks map[NodeID]string, load map[NodeID]Load, n, rf int) ([][]NodeID, error) {
	if rf < 1 || rf > len(eligible) {
		return nil, fmt.Errorf("%w: %d copies need %d eligible nodes, have %d", ErrFactor, rf, rf, len(eligible))
	}
	nodes := append([]NodeID(nil), eligible...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	cur := make(map[NodeID]Load, len(nodes))
	for _, id := range nodes {
		cur[id] = load[id]
	}
	primaryLess := func(a, b Load) bool {
		if a.Preferred != b.Preferred {
			return a.Preferred < b.Preferred
		}
		return a.Replicas < b.Replicas
	}
	followerLess := func(a, b Load) bool {
		if a.Replicas != b.Replicas {
			return a.Replicas < b.Replicas
		}
		return a.Preferred > b.Preferred
	}
	out := make([][]NodeID, 0, n)
	last := -1 // index in nodes of the previous preferred primary
	for p := 0; p < n; p++ {
		pi := pick(nodes, last, primaryLess, cur, nil)
		last = pi
		replicas := []NodeID{nodes[pi]}
		taken := map[NodeID]bool{nodes[pi]: true}
		for len(replicas) < rf {
			fi := pick(nodes, pi, followerLess, cur, crowded(nodes, racks, replicas, taken))
			replicas = append(replicas, nodes[fi])
			taken[nodes[fi]] = true
		}
		for i, id := range replicas {
			l := cur[id]
			l.Replicas++
			if i == 0 {
				l.Preferred++
			}
			cur[id] = l
		}
		out = append(out, replicas)
	}
	return out, nil
}

// crowded returns taken plus every node whose rack holds more of the
// chosen replicas than the least used rack among the free nodes, so that
// pick chooses only from the least used racks. With no racks it is taken.
func crowded(nodes []NodeID, racks map[NodeID]string, chosen []NodeID, taken map[NodeID]bool) map[NodeID]bool {
	if len(racks) == 0 {
		return taken
	}
	used := map[string]int{}
	for _, id := range chosen {
		if r := racks[id]; r != "" {
			used[r]++
		}
	}
	least := -1
	for _, id := range nodes {
		if taken[id] {
			continue
		}
		u := 0 // a node without a rack stands alone
		if r := racks[id]; r != "" {
			u = used[r]
		}
		if least < 0 || u < least {
			least = u
		}
	}
	out := make(map[NodeID]bool, len(nodes))
	for _, id := range nodes {
		if taken[id] || (racks[id] != "" && used[racks[id]] > least) {
			out[id] = true
		}
	}
	return out
}

// pick returns the index of the best node under less, scanning in id order
// starting after index from, skipping taken nodes; the first best wins, so
// ties rotate.
func pick(nodes []NodeID, from int, less func(a, b Load) bool, cur map[NodeID]Load, taken map[NodeID]bool) int {
	best := -1
	for k := 1; k <= len(nodes); k++ {
		i := (from + k) % len(nodes)
		if taken[nodes[i]] {
			continue
		}
		if best < 0 || less(cur[nodes[i]], cur[nodes[best]]) {
			best = i
		}
	}
	return best
}
