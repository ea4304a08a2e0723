package metadata

import (
	"errors"
	"fmt"
	"sort"
)

// The roster (docs/design/membership.md): the cluster's nodes with their
// advertised addresses and racks, kept in the committed metadata so that
// a running cluster can grow and shrink. It is seeded once from
// cluster.nodes (OpRosterSeed); afterwards only these commands change it,
// one member at a time: a member is added joining, becomes active once
// the metadata group made it a voter, is marked leaving before the group
// removes it, and is dropped once the group no longer holds it. The
// metadata group's members are therefore always a subset of the roster.

// The roster commands.
const (
	// OpRosterSeed records Members, every one active, when no roster is
	// recorded yet (refused afterwards: two primaries racing to seed are
	// harmless).
	OpRosterSeed Op = "roster_seed"
	// OpNodeAdd records Member as joining.
	OpNodeAdd Op = "node_add"
	// OpNodeActive makes joining member Node active (the metadata group
	// made it a voter).
	OpNodeActive Op = "node_active"
	// OpNodeLeaving marks member Node leaving (it holds no replica).
	OpNodeLeaving Op = "node_leaving"
	// OpNodeRemove drops leaving member Node (the metadata group no
	// longer holds it).
	OpNodeRemove Op = "node_remove"
)

// RosterNodesMax bounds the roster: node ids are 1..RosterNodesMax, the
// slots of a consensus group's member bit set.
const RosterNodesMax = 32

// MemberState is where a roster member stands.
type MemberState string

// The member states.
const (
	// MemberJoining: recorded; being added to the metadata group as a
	// learner and promoted. Not used by placement yet.
	MemberJoining MemberState = "joining"
	// MemberActive: a voter of the metadata group; placement and the
	// balancer use it.
	MemberActive MemberState = "active"
	// MemberLeaving: being removed from the metadata group; holds no
	// replica and gets none.
	MemberLeaving MemberState = "leaving"
)

// Member is one roster node.
type Member struct {
	ID              NodeID      `json:"id"`
	ClientAddr      string      `json:"client_addr"`
	ReplicationAddr string      `json:"replication_addr"`
	HTTPAddr        string      `json:"http_addr,omitempty"`
	KafkaAddr       string      `json:"kafka_addr,omitempty"`
	Rack            string      `json:"rack,omitempty"`
	State           MemberState `json:"state"`
}

// Errors of the roster commands and planners.
var (
	// ErrRosterFull refuses an add to a roster of RosterNodesMax nodes.
	ErrRosterFull = errors.New("metadata: roster full")
	// ErrInvalidMember refuses a member with a bad id or address, an id
	// or address already in the roster, or an unknown node.
	ErrInvalidMember = errors.New("metadata: invalid roster member")
	// ErrRosterChangePending refuses a change while another member is
	// joining or leaving (one change at a time), and a step that does not
	// follow the member's state.
	ErrRosterChangePending = errors.New("metadata: roster change in progress")
	// ErrNodeNotEmpty refuses removing a node that holds a replica or is
	// the target of a move.
	ErrNodeNotEmpty = errors.New("metadata: node holds replicas")
	// ErrRosterQuorum refuses removing a node when the voters left could
	// not form a quorum of live nodes.
	ErrRosterQuorum = errors.New("metadata: removal would leave no quorum")
	// ErrRosterNotSeeded refuses a change before the roster is recorded
	// (the cluster's first metadata primary seeds it): retry.
	ErrRosterNotSeeded = errors.New("metadata: roster not recorded yet")
)

// Roster returns the recorded members by id (nil until seeded). The
// members must not be modified.
func (s *State) Roster() []*Member {
	if len(s.roster) == 0 {
		return nil
	}
	out := make([]*Member, 0, len(s.roster))
	for _, m := range s.roster {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Member returns member id, or nil.
func (s *State) Member(id NodeID) *Member { return s.roster[id] }

// RosterChange returns the member joining or leaving, or nil.
func (s *State) RosterChange() *Member {
	for _, m := range s.Roster() {
		if m.State != MemberActive {
			return m
		}
	}
	return nil
}

// ReplicasOn counts the replicas node id holds, with one of them (for an
// error message) and the moves that target it.
func (s *State) ReplicasOn(id NodeID) (replicas int, example string) {
	for _, t := range s.Topics() {
		for p, reps := range t.Replicas {
			for _, n := range reps {
				if n == id {
					if replicas == 0 {
						example = fmt.Sprintf("%s/%d", t.Name, p)
					}
					replicas++
				}
			}
		}
	}
	for _, r := range s.Reassignments() {
		for _, n := range r.Target {
			if n == id {
				if replicas == 0 {
					example = fmt.Sprintf("%s/%d (a move's target)", r.Topic, r.Partition)
				}
				replicas++
			}
		}
	}
	return replicas, example
}

// checkPlaceable refuses replicas on a node that is not an active member,
// once a roster is recorded: a placement planned from a roster read just
// before a node started leaving must not commit after it, or the node
// would be dropped while holding a replica.
func (s *State) checkPlaceable(reps [][]NodeID) error {
	if len(s.roster) == 0 {
		return nil
	}
	for p, r := range reps {
		for _, n := range r {
			if m := s.roster[n]; m == nil || m.State != MemberActive {
				state := "not in the roster"
				if m != nil {
					state = string(m.State)
				}
				return fmt.Errorf("%w: partition %d would have a replica on node %d, which is %s", ErrInvalidReplication, p, n, state)
			}
		}
	}
	return nil
}

// checkMember checks m's id and addresses against the members in roster
// (other than m's own id).
func checkMember(m *Member, roster map[NodeID]*Member) error {
	if m == nil {
		return fmt.Errorf("%w: no member", ErrInvalidMember)
	}
	if m.ID < 1 || m.ID > RosterNodesMax {
		return fmt.Errorf("%w: node id %d is outside 1..%d", ErrInvalidMember, m.ID, RosterNodesMax)
	}
	if m.ClientAddr == "" || m.ReplicationAddr == "" {
		return fmt.Errorf("%w: node %d needs a client and a replication address", ErrInvalidMember, m.ID)
	}
	for _, o := range roster {
		if o.ID == m.ID {
			continue
		}
		for _, a := range []string{m.ClientAddr, m.ReplicationAddr, m.HTTPAddr, m.KafkaAddr} {
			if a != "" && (a == o.ClientAddr || a == o.ReplicationAddr || a == o.HTTPAddr || a == o.KafkaAddr) {
				return fmt.Errorf("%w: node %d's address %s is node %d's", ErrInvalidMember, m.ID, a, o.ID)
			}
		}
	}
	return nil
}

// applyRoster applies the roster commands.
func (s *State) applyRoster(c Command) (Result, error) {
	if c.Op == OpRosterSeed {
		if len(s.roster) > 0 {
			return Result{}, fmt.Errorf("%w: the roster is already recorded", ErrRosterChangePending)
		}
		if len(c.Members) < 1 || len(c.Members) > RosterNodesMax {
			return Result{}, fmt.Errorf("%w: a roster of %d nodes, want 1..%d", ErrInvalidMember, len(c.Members), RosterNodesMax)
		}
		next := map[NodeID]*Member{}
		for _, m := range c.Members {
			if err := checkMember(&m, next); err != nil {
				return Result{}, err
			}
			if next[m.ID] != nil {
				return Result{}, fmt.Errorf("%w: node id %d twice", ErrInvalidMember, m.ID)
			}
			cp := m
			cp.State = MemberActive
			next[m.ID] = &cp
		}
		s.roster = next
		return Result{}, nil
	}
	if len(s.roster) == 0 {
		return Result{}, fmt.Errorf("%w: the first metadata primary records cluster.nodes; retry shortly", ErrRosterNotSeeded)
	}
	if c.Op == OpNodeAdd {
		m := c.Member
		if err := checkMember(m, s.roster); err != nil {
			return Result{}, err
		}
		if s.roster[m.ID] != nil {
			return Result{}, fmt.Errorf("%w: node id %d is already in the roster (%s)", ErrInvalidMember, m.ID, s.roster[m.ID].State)
		}
		if len(s.roster) >= RosterNodesMax {
			return Result{}, fmt.Errorf("%w: the roster already holds %d nodes, the most a cluster can have", ErrRosterFull, RosterNodesMax)
		}
		if p := s.RosterChange(); p != nil {
			return Result{}, fmt.Errorf("%w: node %d is %s; one roster change at a time", ErrRosterChangePending, p.ID, p.State)
		}
		cp := *m
		cp.State = MemberJoining
		s.roster[cp.ID] = &cp
		return Result{Member: &cp}, nil
	}
	m := s.roster[c.Node]
	if m == nil {
		return Result{}, fmt.Errorf("%w: node %d is not in the roster", ErrInvalidMember, c.Node)
	}
	cp := *m
	switch c.Op {
	case OpNodeActive:
		if m.State != MemberJoining {
			return Result{}, fmt.Errorf("%w: node %d is %s, not joining", ErrRosterChangePending, m.ID, m.State)
		}
		cp.State = MemberActive
	case OpNodeLeaving:
		if p := s.RosterChange(); p != nil && p.ID != m.ID {
			return Result{}, fmt.Errorf("%w: node %d is %s; one roster change at a time", ErrRosterChangePending, p.ID, p.State)
		}
		if n, ex := s.ReplicasOn(m.ID); n > 0 {
			return Result{}, fmt.Errorf("%w: node %d holds %d replicas (%s among them); drain it first", ErrNodeNotEmpty, m.ID, n, ex)
		}
		if m.State == MemberActive && s.activeCount() <= 1 {
			return Result{}, fmt.Errorf("%w: node %d is the last active node", ErrRosterQuorum, m.ID)
		}
		cp.State = MemberLeaving
	case OpNodeRemove:
		if m.State != MemberLeaving {
			return Result{}, fmt.Errorf("%w: node %d is %s, not leaving", ErrRosterChangePending, m.ID, m.State)
		}
		delete(s.roster, m.ID)
		return Result{Member: &cp}, nil
	default:
		return Result{}, fmt.Errorf("%w: unknown op %q", ErrInvalidCommand, c.Op)
	}
	s.roster[cp.ID] = &cp
	return Result{Member: &cp}, nil
}

func (s *State) activeCount() int {
	n := 0
	for _, m := range s.roster {
		if m.State == MemberActive {
			n++
		}
	}
	return n
}

// PlanRemoveNode checks the removal of node id against the state and
// the nodes alive now, and returns the command that starts it
// (OpNodeLeaving). Beside Apply's rules (no replica, no other change, not
// the last active node) it refuses a removal after which the live voters
// left would not be a majority of the voters left: the metadata group
// would have no quorum. A joining member (an add that never completed)
// may always be removed.
func (s *State) PlanRemoveNode(id NodeID, alive func(NodeID) bool) (Command, error) {
	m := s.roster[id]
	if m == nil {
		if len(s.roster) == 0 {
			return Command{}, fmt.Errorf("%w: the first metadata primary records cluster.nodes; retry shortly", ErrRosterNotSeeded)
		}
		return Command{}, fmt.Errorf("%w: node %d is not in the roster", ErrInvalidMember, id)
	}
	cmd := Command{Version: CommandVersion, Op: OpNodeLeaving, Node: id}
	if m.State == MemberJoining {
		return cmd, s.check(cmd)
	}
	left, live := 0, 0
	for _, o := range s.roster {
		if o.ID == id || o.State == MemberJoining {
			continue
		}
		left++
		if alive(o.ID) {
			live++
		}
	}
	if left > 0 && live < left/2+1 {
		return Command{}, fmt.Errorf("%w: without node %d the metadata group has %d voters, of which %d are alive, and a quorum needs %d; bring nodes back first",
			ErrRosterQuorum, id, left, live, left/2+1)
	}
	return cmd, s.check(cmd)
}

// check applies cmd to a copy of the roster part of the state, for a
// planner's verdict.
func (s *State) check(cmd Command) error {
	cp := *s
	cp.roster = make(map[NodeID]*Member, len(s.roster))
	for k, v := range s.roster {
		cp.roster[k] = v
	}
	_, err := cp.applyRoster(cmd)
	return err
}

// PlanAddNode checks the addition of m and returns its command.
func (s *State) PlanAddNode(m Member) (Command, error) {
	cmd := Command{Version: CommandVersion, Op: OpNodeAdd, Member: &m}
	return cmd, s.check(cmd)
}

// restoreRoster loads members from a snapshot, checking them as the
// commands would have.
func (s *State) restoreRoster(members []*Member) error {
	for _, m := range members {
		if err := checkMember(m, s.roster); err != nil {
			return err
		}
		if s.roster[m.ID] != nil || len(s.roster) >= RosterNodesMax {
			return fmt.Errorf("%w: snapshot roster lists node %d twice or more than %d nodes", ErrInvalidMember, m.ID, RosterNodesMax)
		}
		switch m.State {
		case MemberJoining, MemberActive, MemberLeaving:
		default:
			return fmt.Errorf("%w: snapshot roster node %d in state %q", ErrInvalidMember, m.ID, m.State)
		}
		cp := *m
		s.roster[m.ID] = &cp
	}
	return nil
}
