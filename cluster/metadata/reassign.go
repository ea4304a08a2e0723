package metadata

import (
	"errors"
	"fmt"
	"sort"
)

// Replica reassignment (issue 16): a move of one partition's replicas to a
// new list of the same length is recorded here, beside the current list,
// so that whichever node is the metadata primary drives it, and a new
// metadata primary resumes it where the log says it stands. The partition
// group changes its members one at a time (shard/partition's learner,
// promote and remove); the metadata records each step only as progress
// for the operator, and the current list changes once, when the move
// completes, so that every node reads one list until the group's own
// configuration no longer names the old members.

// The reassignment commands.
const (
	// OpReassignStart records a move of partition Partition of topic
	// (Name, ID) to Target.
	OpReassignStart Op = "reassign_start"
	// OpReassignStep records a step of a move (Step, Node, AtMs).
	OpReassignStep Op = "reassign_step"
	// OpReassignComplete replaces the partition's replicas with the
	// move's target (Target must match it) and ends the move.
	OpReassignComplete Op = "reassign_complete"
	// OpReassignCancel turns a move back: its target becomes the
	// replicas it started from, which the group returns to before the
	// move ends (with OpReassignComplete, the list unchanged).
	OpReassignCancel Op = "reassign_cancel"
)

// Steps of a move, recorded by OpReassignStep.
const (
	StepLearnerAdded = "learner_added"
	StepPromoted     = "promoted"
	StepRemoved      = "removed"
)

// ReassignmentsMax bounds the moves recorded at once (in progress or
// turned back), so a plan cannot grow the state without limit.
const ReassignmentsMax = 4096

// Errors of reassignment commands.
var (
	// ErrInvalidReassignment refuses a move that breaks a rule: a target
	// of another length than the topic's factor, a node twice, a node
	// outside the roster, a target equal to the current replicas.
	ErrInvalidReassignment = errors.New("metadata: invalid reassignment")
	// ErrReassignmentInProgress refuses a second move of a partition.
	ErrReassignmentInProgress = errors.New("metadata: reassignment in progress")
	// ErrNoReassignment refuses a step, completion or cancel of a
	// partition that is not moving.
	ErrNoReassignment = errors.New("metadata: no reassignment in progress")
)

// ReassignStep is one recorded step of a move.
type ReassignStep struct {
	Step string `json:"step"`
	Node NodeID `json:"node"`
	AtMs int64  `json:"at_ms"`
}

// Reassignment is a move in progress.
type Reassignment struct {
	Topic     string  `json:"topic"`
	TopicID   TopicID `json:"topic_id"`
	Partition int32   `json:"partition"`
	// From is the replica list the move started from; Target the list it
	// goes to (From again once cancelled).
	From      []NodeID `json:"from"`
	Target    []NodeID `json:"target"`
	Cancelled bool     `json:"cancelled,omitempty"`
	StartedMs int64    `json:"started_ms"`
	// ThrottleBytesPerSecond is the catch-up throttle the move asked for
	// (0: the nodes' own setting).
	ThrottleBytesPerSecond int64 `json:"throttle_bps,omitempty"`
	// Steps holds the recorded steps, oldest first (bounded: at most
	// three per node of From and Target, since a step is recorded once
	// per node and kind; see applyReassignStep).
	Steps []ReassignStep `json:"steps,omitempty"`
}

// Reassignment returns the move of partition p of topic, or nil.
func (s *State) Reassignment(topic string, p int32) *Reassignment {
	return s.reassign[OffsetKey{topic, p}]
}

// Reassignments returns every move in progress, by topic and partition.
func (s *State) Reassignments() []*Reassignment {
	out := make([]*Reassignment, 0, len(s.reassign))
	for _, r := range s.reassign {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out
}

// CheckReassignment applies the rules of a new move of partition p of t
// to target, against roster (the node ids of the cluster). It is what
// Apply checks, and what a dry run reports.
func CheckReassignment(t *Topic, p int32, target []NodeID, roster []NodeID) error {
	if p < 0 || int(p) >= len(t.Replicas) {
		return fmt.Errorf("%w: %s has no partition %d (it has %d)", ErrUnknownTopic, t.Name, p, len(t.Replicas))
	}
	if len(target) != t.ReplicationFactor {
		return fmt.Errorf("%w: %s/%d: %d replicas given, the topic's replication factor is %d (a move cannot change it)",
			ErrInvalidReassignment, t.Name, p, len(target), t.ReplicationFactor)
	}
	known := map[NodeID]bool{}
	for _, n := range roster {
		known[n] = true
	}
	seen := map[NodeID]bool{}
	for _, n := range target {
		if !known[n] {
			return fmt.Errorf("%w: %s/%d: node %d is not in the roster %v", ErrInvalidReassignment, t.Name, p, n, roster)
		}
		if seen[n] {
			return fmt.Errorf("%w: %s/%d: node %d is listed twice in %v", ErrInvalidReassignment, t.Name, p, n, target)
		}
		seen[n] = true
	}
	if sameList(target, t.Replicas[p]) {
		return fmt.Errorf("%w: %s/%d already has replicas %v", ErrInvalidReassignment, t.Name, p, target)
	}
	return nil
}

func sameList(a, b []NodeID) bool {
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

func (s *State) applyReassign(c Command) (Result, error) {
	t, err := s.lookup(c.Name, c.ID)
	if err != nil {
		return Result{}, err
	}
	if c.Partition < 0 || int(c.Partition) >= len(t.Replicas) {
		return Result{}, fmt.Errorf("%w: %s has no partition %d", ErrUnknownTopic, c.Name, c.Partition)
	}
	key := OffsetKey{t.Name, c.Partition}
	cur := s.reassign[key]
	if c.Op == OpReassignStart {
		if cur != nil {
			return Result{}, fmt.Errorf("%w: %s/%d is moving from %v to %v", ErrReassignmentInProgress, t.Name, c.Partition, cur.From, cur.Target)
		}
		if len(s.reassign) >= ReassignmentsMax {
			return Result{}, fmt.Errorf("%w: %d moves are recorded already", ErrInvalidReassignment, ReassignmentsMax)
		}
		if err := CheckReassignment(t, c.Partition, c.Target, c.Roster); err != nil {
			return Result{}, err
		}
		if c.ThrottleBytesPerSecond < 0 {
			return Result{}, fmt.Errorf("%w: throttle %d bytes/s is negative", ErrInvalidReassignment, c.ThrottleBytesPerSecond)
		}
		s.reassign[key] = &Reassignment{Topic: t.Name, TopicID: t.ID, Partition: c.Partition,
			From: append([]NodeID(nil), t.Replicas[c.Partition]...), Target: append([]NodeID(nil), c.Target...), StartedMs: c.AtMs,
			ThrottleBytesPerSecond: c.ThrottleBytesPerSecond}
		return Result{Topic: t}, nil
	}
	if cur == nil {
		return Result{}, fmt.Errorf("%w: %s/%d", ErrNoReassignment, t.Name, c.Partition)
	}
	// Copy on write: readers may hold the old *Reassignment.
	next := *cur
	switch c.Op {
	case OpReassignStep:
		switch c.Step {
		case StepLearnerAdded, StepPromoted, StepRemoved:
		default:
			return Result{}, fmt.Errorf("%w: unknown step %q", ErrInvalidCommand, c.Step)
		}
		for _, st := range cur.Steps {
			if st.Step == c.Step && st.Node == c.Node {
				return Result{Topic: t}, nil // a driver repeating itself after a failover
			}
		}
		if len(cur.Steps) >= 3*(len(cur.From)+len(cur.Target)) {
			return Result{}, fmt.Errorf("%w: %s/%d records %d steps already", ErrInvalidCommand, t.Name, c.Partition, len(cur.Steps))
		}
		next.Steps = append(append([]ReassignStep(nil), cur.Steps...), ReassignStep{Step: c.Step, Node: c.Node, AtMs: c.AtMs})
	case OpReassignCancel:
		if cur.Cancelled {
			return Result{Topic: t}, nil
		}
		next.Cancelled, next.Target = true, append([]NodeID(nil), cur.From...)
	case OpReassignComplete:
		if !sameList(c.Target, cur.Target) {
			return Result{}, fmt.Errorf("%w: %s/%d completes to %v but moves to %v", ErrInvalidCommand, t.Name, c.Partition, c.Target, cur.Target)
		}
		delete(s.reassign, key)
		cp := *t
		cp.Replicas = cloneReplicas(t.Replicas)
		cp.Replicas[c.Partition] = append([]NodeID(nil), cur.Target...)
		s.topics[cp.Name] = &cp
		s.byID[cp.ID] = &cp
		return Result{Topic: &cp}, nil
	}
	s.reassign[key] = &next
	return Result{Topic: t}, nil
}
