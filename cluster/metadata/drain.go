package metadata

import (
	"errors"
	"fmt"
	"sort"
)

// Draining a node (issue 16): OpDrainNode marks a node draining. From then
// on placement and the balancer do not choose it, and the reassigner on
// the metadata primary moves every replica off it, a few at a time, with
// ordinary reassignments (reassign.go), its primaries first. The mark
// stays until an operator lifts it (OpUndrainNode), so a drained node
// holds nothing until it is undrained or leaves the roster.
//
// Replacing a node that is gone for good is a drain with a replacement:
// each of its replicas moves to the replacement, which takes its place in
// the replica list (the order kept, so a preferred primary's partitions
// prefer the replacement).

// The drain commands.
const (
	// OpDrainNode marks Node draining (Replacement: the node that takes
	// its place; 0: the reassigner chooses per partition). Roster is the
	// roster the command was checked against.
	OpDrainNode Op = "drain_node"
	// OpUndrainNode lifts Node's mark; moves already recorded run on.
	OpUndrainNode Op = "undrain_node"
)

// Errors of the drain commands.
var (
	// ErrInvalidDrain refuses a drain that breaks a rule: a node outside
	// the roster, a replacement that is the node itself, draining or
	// unknown, or a drain that leaves fewer nodes than a topic's factor.
	ErrInvalidDrain = errors.New("metadata: invalid drain")
	// ErrAlreadyDraining refuses draining a node twice.
	ErrAlreadyDraining = errors.New("metadata: node already draining")
	// ErrNotDraining refuses undraining a node that is not draining.
	ErrNotDraining = errors.New("metadata: node not draining")
)

// Drain is a node marked draining.
type Drain struct {
	Node NodeID `json:"node"`
	// Replacement takes Node's place in every replica list (0: the
	// reassigner chooses a node per partition).
	Replacement NodeID `json:"replacement,omitempty"`
	StartedMs   int64  `json:"started_ms"`
}

// Draining returns the drain of node id, or nil.
func (s *State) Draining(id NodeID) *Drain { return s.drains[id] }

// Drains lists the nodes marked draining, by node id.
func (s *State) Drains() []*Drain {
	out := make([]*Drain, 0, len(s.drains))
	for _, d := range s.drains {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// CheckDrain applies the rules of a new drain of node (replacement: 0 or
// the node taking its place) against roster. It is what Apply checks, and
// what the service refuses before proposing.
func (s *State) CheckDrain(node, replacement NodeID, roster []NodeID) error {
	known := map[NodeID]bool{}
	for _, n := range roster {
		known[n] = true
	}
	if !known[node] {
		return fmt.Errorf("%w: node %d is not in the roster %v", ErrInvalidDrain, node, roster)
	}
	if d := s.drains[node]; d != nil {
		return fmt.Errorf("%w: node %d has been draining since %d (undrain it first to change the replacement)", ErrAlreadyDraining, node, d.StartedMs)
	}
	if replacement != 0 {
		switch {
		case replacement == node:
			return fmt.Errorf("%w: node %d cannot replace itself", ErrInvalidDrain, node)
		case !known[replacement]:
			return fmt.Errorf("%w: replacement node %d is not in the roster %v", ErrInvalidDrain, replacement, roster)
		case s.drains[replacement] != nil:
			return fmt.Errorf("%w: replacement node %d is draining itself", ErrInvalidDrain, replacement)
		}
		return nil
	}
	left := 0
	for _, n := range roster {
		if n != node && s.drains[n] == nil {
			left++
		}
	}
	for _, t := range s.Topics() {
		if t.ReplicationFactor > left {
			return fmt.Errorf("%w: draining node %d leaves %d nodes not draining, and topic %s keeps %d copies on distinct nodes; undrain a node or grow the roster first",
				ErrInvalidDrain, node, left, t.Name, t.ReplicationFactor)
		}
	}
	return nil
}

func (s *State) applyDrain(c Command) (Result, error) {
	if c.Op == OpUndrainNode {
		if s.drains[c.Node] == nil {
			return Result{}, fmt.Errorf("%w: node %d", ErrNotDraining, c.Node)
		}
		delete(s.drains, c.Node)
		return Result{}, nil
	}
	if err := s.CheckDrain(c.Node, c.Replacement, c.Roster); err != nil {
		return Result{}, err
	}
	s.drains[c.Node] = &Drain{Node: c.Node, Replacement: c.Replacement, StartedMs: c.AtMs}
	return Result{}, nil
}

// DrainTarget is the replica list that moves partition replicas reps off
// drain.Node: the node's slot goes to drain.Replacement when set and not
// already in reps, else to the eligible node (not in reps, not draining:
// the caller's list) whose rack no kept replica uses, then with the
// fewest replicas in load, then the lowest id. The order is kept, so the
// new node takes the drained node's place as preferred primary too. ok is
// false when reps does not hold the node or no node fits. Pure.
func DrainTarget(reps []NodeID, drain Drain, eligible []NodeID, racks map[NodeID]string, load map[NodeID]int) ([]NodeID, bool) {
	slot := -1
	in := map[NodeID]bool{}
	usedRack := map[string]bool{}
	for i, n := range reps {
		in[n] = true
		if n == drain.Node {
			slot = i
		} else if r := racks[n]; r != "" {
			usedRack[r] = true
		}
	}
	if slot < 0 {
		return nil, false
	}
	choice := NodeID(0)
	if drain.Replacement != 0 && !in[drain.Replacement] {
		choice = drain.Replacement
	} else {
		better := func(a, b NodeID) bool { // a better than b
			ra, rb := usedRack[racks[a]] && racks[a] != "", usedRack[racks[b]] && racks[b] != ""
			if ra != rb {
				return !ra
			}
			if load[a] != load[b] {
				return load[a] < load[b]
			}
			return a < b
		}
		for _, n := range eligible {
			if in[n] || n == drain.Node {
				continue
			}
			if choice == 0 || better(n, choice) {
				choice = n
			}
		}
	}
	if choice == 0 {
		return nil, false
	}
	out := append([]NodeID(nil), reps...)
	out[slot] = choice
	return out, true
}
