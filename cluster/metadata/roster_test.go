package metadata

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func member(id NodeID) Member {
	return Member{ID: id, ClientAddr: fmt.Sprintf("h:%d", 1000+id), ReplicationAddr: fmt.Sprintf("h:%d", 2000+id), Rack: "r"}
}

// seeded returns a state whose roster holds nodes 1..n, all active.
func seeded(t *testing.T, n int) *State {
	t.Helper()
	s := New()
	cmd := Command{Version: CommandVersion, Op: OpRosterSeed}
	for id := NodeID(1); id <= NodeID(n); id++ {
		cmd.Members = append(cmd.Members, member(id))
	}
	if _, err := apply(t, s, cmd); err != nil {
		t.Fatal(err)
	}
	return s
}

func nodeCmd(op Op, id NodeID) Command { return Command{Version: CommandVersion, Op: op, Node: id} }

func states(s *State) string {
	var b strings.Builder
	for _, m := range s.Roster() {
		fmt.Fprintf(&b, "%d:%s ", m.ID, m.State)
	}
	return strings.TrimSpace(b.String())
}

// TestRosterGrowAndShrink walks a node through joining, active, leaving
// and removed, across a snapshot at each step.
func TestRosterGrowAndShrink(t *testing.T) {
	s := seeded(t, 3)
	steps := []struct {
		cmd  Command
		want string
	}{
		{Command{Version: CommandVersion, Op: OpNodeAdd, Member: ptr(member(4))}, "1:active 2:active 3:active 4:joining"},
		{nodeCmd(OpNodeActive, 4), "1:active 2:active 3:active 4:active"},
		{nodeCmd(OpNodeLeaving, 2), "1:active 2:leaving 3:active 4:active"},
		{nodeCmd(OpNodeRemove, 2), "1:active 3:active 4:active"},
	}
	for i, st := range steps {
		if _, err := apply(t, s, st.cmd); err != nil {
			t.Fatalf("step %d %s: %v", i, st.cmd.Op, err)
		}
		r, err := Restore(s.Snapshot())
		if err != nil {
			t.Fatalf("step %d: restore: %v", i, err)
		}
		if got := states(r); got != st.want || states(s) != st.want {
			t.Fatalf("step %d %s: roster %q, restored %q, want %q", i, st.cmd.Op, states(s), got, st.want)
		}
	}
	if !reflect.DeepEqual(*s.Member(4), func() Member { m := member(4); m.State = MemberActive; return m }()) {
		t.Fatalf("member 4 is %+v", *s.Member(4))
	}
}

func ptr[T any](v T) *T { return &v }

// TestRosterRefusals: every refused command leaves the roster as it was.
func TestRosterRefusals(t *testing.T) {
	full := seeded(t, RosterNodesMax)
	withReplicas := seeded(t, 3)
	if _, err := apply(t, withReplicas, mustPlanCreate(t, withReplicas, "orders", 1, 3)); err != nil {
		t.Fatal(err)
	}
	joining := seeded(t, 3)
	if _, err := apply(t, joining, Command{Version: CommandVersion, Op: OpNodeAdd, Member: ptr(member(4))}); err != nil {
		t.Fatal(err)
	}
	sameAddr := member(5)
	sameAddr.ReplicationAddr = member(2).ClientAddr
	cases := []struct {
		name string
		st   *State
		cmd  Command
		want error
		text string
	}{
		{"33rd node", full, Command{Version: CommandVersion, Op: OpNodeAdd, Member: ptr(member(33))}, ErrInvalidMember, "outside 1..32"},
		{"id in use", seeded(t, 3), Command{Version: CommandVersion, Op: OpNodeAdd, Member: ptr(member(2))}, ErrInvalidMember, "node id 2 is already in the roster"},
		{"address in use", seeded(t, 3), Command{Version: CommandVersion, Op: OpNodeAdd, Member: &sameAddr}, ErrInvalidMember, "is node 2's"},
		{"second change", joining, Command{Version: CommandVersion, Op: OpNodeAdd, Member: ptr(member(5))}, ErrRosterChangePending, "node 4 is joining"},
		{"remove while adding", joining, nodeCmd(OpNodeLeaving, 2), ErrRosterChangePending, "node 4 is joining"},
		{"holds replicas", withReplicas, nodeCmd(OpNodeLeaving, 2), ErrNodeNotEmpty, "holds 1 replicas (orders/0"},
		{"unknown node", seeded(t, 3), nodeCmd(OpNodeLeaving, 9), ErrInvalidMember, "node 9 is not in the roster"},
		{"last node", seeded(t, 1), nodeCmd(OpNodeLeaving, 1), ErrRosterQuorum, "last active node"},
		{"remove not leaving", seeded(t, 3), nodeCmd(OpNodeRemove, 2), ErrRosterChangePending, "is active, not leaving"},
		{"active not joining", seeded(t, 3), nodeCmd(OpNodeActive, 2), ErrRosterChangePending, "not joining"},
		{"seed twice", seeded(t, 3), Command{Version: CommandVersion, Op: OpRosterSeed, Members: []Member{member(1)}}, ErrRosterChangePending, "already recorded"},
		{"not seeded", New(), Command{Version: CommandVersion, Op: OpNodeAdd, Member: ptr(member(4))}, ErrRosterNotSeeded, "retry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := states(c.st)
			_, err := apply(t, c.st, c.cmd)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("err %v, want %v with %q", err, c.want, c.text)
			}
			if after := states(c.st); after != before {
				t.Fatalf("a refused command changed the roster from %q to %q", before, after)
			}
		})
	}
}

// TestRosterFull: an add to a roster of 32 members is refused by the
// bound itself (with ids 1..32 all taken, "id in use" would answer
// first, so one member is given an id past the bound, as a corrupt or
// future state could).
func TestRosterFull(t *testing.T) {
	s := seeded(t, RosterNodesMax)
	delete(s.roster, 7)
	s.roster[40] = &Member{ID: 40, ClientAddr: "y", ReplicationAddr: "z", State: MemberActive} // a 32nd by count
	_, err := apply(t, s, Command{Version: CommandVersion, Op: OpNodeAdd, Member: ptr(member(7))})
	if !errors.Is(err, ErrRosterFull) || !strings.Contains(err.Error(), "already holds 32 nodes") {
		t.Fatalf("err %v, want ErrRosterFull", err)
	}
}

// TestPlanRemoveNodeQuorum: a removal that leaves the live voters short
// of a quorum is refused; a joining node may always go.
func TestPlanRemoveNodeQuorum(t *testing.T) {
	s := seeded(t, 3)
	dead3 := func(id NodeID) bool { return id != 3 }
	if _, err := s.PlanRemoveNode(2, dead3); !errors.Is(err, ErrRosterQuorum) || !strings.Contains(err.Error(), "2 voters, of which 1 are alive, and a quorum needs 2") {
		t.Fatalf("removing node 2 with node 3 dead: %v", err)
	}
	if _, err := s.PlanRemoveNode(3, dead3); err != nil {
		t.Fatalf("removing the dead node 3 itself: %v", err)
	}
	all := func(NodeID) bool { return true }
	cmd, err := s.PlanRemoveNode(2, all)
	if err != nil || cmd.Op != OpNodeLeaving || cmd.Node != 2 {
		t.Fatalf("plan %+v, %v", cmd, err)
	}
	if _, err := apply(t, s, Command{Version: CommandVersion, Op: OpNodeAdd, Member: ptr(member(4))}); !errors.Is(err, nil) {
		t.Fatal(err)
	}
	none := func(NodeID) bool { return false }
	if _, err := s.PlanRemoveNode(4, none); err != nil {
		t.Fatalf("rolling back a joining node: %v", err)
	}
	if _, err := s.PlanAddNode(member(5)); !errors.Is(err, ErrRosterChangePending) {
		t.Fatalf("a second add while 4 joins: %v", err)
	}
	if states(s) != "1:active 2:active 3:active 4:joining" {
		t.Fatalf("planning changed the roster: %s", states(s))
	}
}

// TestNoReplicaOnANodeNotActive: a creation or a partition growth planned
// before a node started leaving (or placed on a joining or unknown node)
// is refused when applied.
func TestNoReplicaOnANodeNotActive(t *testing.T) {
	s := seeded(t, 3)
	create := mustPlanCreate(t, s, "orders", 3, 3) // placed on 1, 2, 3
	if _, err := apply(t, s, nodeCmd(OpNodeLeaving, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, s, create); !errors.Is(err, ErrInvalidReplication) || !strings.Contains(err.Error(), "node 3, which is leaving") {
		t.Fatalf("create onto a leaving node: %v", err)
	}
	if s.Topic("orders") != nil {
		t.Fatal("the topic was created")
	}
	other := seeded(t, 3)
	if _, err := apply(t, other, mustPlanCreate(t, other, "orders", 1, 3)); err != nil {
		t.Fatal(err)
	}
	tp := other.Topic("orders")
	grow := Command{Version: CommandVersion, Op: OpAddPartitions, Name: "orders", ID: tp.ID, NewReplicas: [][]NodeID{{1, 2, 7}}}
	if _, err := apply(t, other, grow); !errors.Is(err, ErrInvalidReplication) || !strings.Contains(err.Error(), "node 7, which is not in the roster") {
		t.Fatalf("add a partition on an unknown node: %v", err)
	}
}
