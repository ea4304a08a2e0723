package metadata

import (
	"errors"
	"fmt"
)

// ErrInvalidAssignment is returned by the planners for a manual replica
// assignment that breaks a rule of checkAssignment other than its
// length (a length outside 1..ReplicationFactorMax is
// ErrInvalidReplication).
var ErrInvalidAssignment = errors.New("metadata: invalid replica assignment")

// checkAssignment checks a manual replica assignment of the partitions
// from index first on (assign[i] is partition first+i's replica set, the
// first replica its preferred primary): every set non-empty, of distinct
// nodes, all of one length rf (0: the first set's length) within
// 1..ReplicationFactorMax, every node an active member of the roster
// (the state's roster once seeded, else roster) and not draining. It
// returns the factor.
func (s *State) checkAssignment(topic string, assign [][]NodeID, first, rf int, roster []NodeID) (int, error) {
	if len(assign) == 0 {
		return 0, fmt.Errorf("%w: topic %s: the assignment lists no partition", ErrInvalidAssignment, topic)
	}
	if rf == 0 {
		rf = len(assign[0])
	}
	for i, r := range assign {
		p := first + i
		switch {
		case len(r) == 0:
			return 0, fmt.Errorf("%w: topic %s: partition %d has an empty replica list", ErrInvalidAssignment, topic, p)
		case len(r) > ReplicationFactorMax:
			return 0, fmt.Errorf("%w: topic %s: partition %d lists %d replicas; at most %d",
				ErrInvalidReplication, topic, p, len(r), ReplicationFactorMax)
		case len(r) != rf:
			return 0, fmt.Errorf("%w: topic %s: partition %d lists %d replicas, but the topic's replication factor is %d "+
				"(every partition has as many)", ErrInvalidAssignment, topic, p, len(r), rf)
		}
		for j, n := range r {
			for _, m := range r[:j] {
				if m == n {
					return 0, fmt.Errorf("%w: topic %s: partition %d lists node %d twice", ErrInvalidAssignment, topic, p, n)
				}
			}
			if state := s.memberState(n, roster); state != MemberActive {
				why := "not in the roster"
				if state != "" {
					why = "not active (" + string(state) + ")"
				}
				return 0, fmt.Errorf("%w: topic %s: partition %d names node %d, which is %s",
					ErrInvalidAssignment, topic, p, n, why)
			}
			if s.drains[n] != nil {
				// A drain moves every replica off the node at its next
				// check: one placed there would be moved at once.
				return 0, fmt.Errorf("%w: topic %s: partition %d names node %d, which is draining (its replicas are moving off it)",
					ErrInvalidAssignment, topic, p, n)
			}
		}
	}
	return rf, nil
}

// memberState is node n's roster state: from the state's roster once it
// is seeded, else active when roster lists n; "" when n is not a member.
func (s *State) memberState(n NodeID, roster []NodeID) MemberState {
	if len(s.roster) > 0 {
		if m := s.roster[n]; m != nil {
			return m.State
		}
		return ""
	}
	for _, m := range roster {
		if m == n {
			return MemberActive
		}
	}
	return ""
}
