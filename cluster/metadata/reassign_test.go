package metadata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var roster6 = []NodeID{1, 2, 3, 4, 5, 6}

func reassignCmd(op Op, top *Topic, p int32) Command {
	return Command{Version: CommandVersion, Op: op, Name: top.Name, ID: top.ID, Partition: p, AtMs: 5}
}

func TestReassignStartRefusesBadPlans(t *testing.T) {
	s := New()
	res, err := apply(t, s, mustPlanCreate(t, s, "orders", 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	top := res.Topic
	cur := top.Replicas[0]
	other := New() // a state where "orders" was deleted
	cases := []struct {
		name   string
		st     *State
		p      int32
		target []NodeID
		want   error
		text   string
	}{
		{"unknown node", s, 0, []NodeID{1, 2, 7}, ErrInvalidReassignment, "node 7 is not in the roster"},
		{"factor change", s, 0, []NodeID{4, 5}, ErrInvalidReassignment, "replication factor is 3"},
		{"factor grow", s, 0, []NodeID{1, 2, 3, 4}, ErrInvalidReassignment, "4 replicas given"},
		{"node twice", s, 0, []NodeID{4, 4, 5}, ErrInvalidReassignment, "node 4 is listed twice"},
		{"no change", s, 0, cur, ErrInvalidReassignment, "already has replicas"},
		{"no partition", s, 2, []NodeID{4, 5, 6}, ErrUnknownTopic, "no partition 2"},
		{"deleted topic", other, 0, []NodeID{4, 5, 6}, ErrUnknownTopic, "orders"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := reassignCmd(OpReassignStart, top, c.p)
			cmd.Target, cmd.Roster = c.target, roster6
			_, err := apply(t, c.st, cmd)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("err %v, want %v with %q", err, c.want, c.text)
			}
			if c.st.Reassignment("orders", c.p) != nil {
				t.Fatal("a refused move was recorded")
			}
		})
	}
}

// TestReassignLifecycle walks a move through its commands, across a
// snapshot (what a new metadata primary starts from), to completion.
func TestReassignLifecycle(t *testing.T) {
	s := New()
	res, err := apply(t, s, mustPlanCreate(t, s, "orders", 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	top := res.Topic
	from := append([]NodeID(nil), top.Replicas[1]...)
	target := []NodeID{4, 5, 6}
	start := reassignCmd(OpReassignStart, top, 1)
	start.Target, start.Roster = target, roster6
	if _, err := apply(t, s, start); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, s, start); !errors.Is(err, ErrReassignmentInProgress) {
		t.Fatalf("second start: %v", err)
	}
	step := func(st *State, name string, n NodeID) {
		c := reassignCmd(OpReassignStep, top, 1)
		c.Step, c.Node = name, n
		if _, err := apply(t, st, c); err != nil {
			t.Fatal(err)
		}
	}
	step(s, StepLearnerAdded, 4)
	step(s, StepLearnerAdded, 4) // repeated after a failover: recorded once
	step(s, StepPromoted, 4)
	bad := reassignCmd(OpReassignStep, top, 1)
	bad.Step = "teleported"
	if _, err := apply(t, s, bad); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("unknown step: %v", err)
	}
	if _, err := apply(t, s, reassignCmd(OpReassignStep, top, 0)); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("step of a partition not moving: %v", err)
	}

	// A new metadata primary restores the state and resumes.
	s2, err := Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	r := s2.Reassignment("orders", 1)
	if r == nil || !reflect.DeepEqual(r.From, from) || !reflect.DeepEqual(r.Target, target) || len(r.Steps) != 2 {
		t.Fatalf("restored move %+v", r)
	}
	if !reflect.DeepEqual(s2.Topic("orders").Replicas[1], from) {
		t.Fatal("the replicas changed before the move completed")
	}
	done := reassignCmd(OpReassignComplete, top, 1)
	done.Target = []NodeID{4, 6, 5}
	if _, err := apply(t, s2, done); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("completion to another list: %v", err)
	}
	done.Target = target
	if _, err := apply(t, s2, done); err != nil {
		t.Fatal(err)
	}
	if got := s2.Topic("orders").Replicas[1]; !reflect.DeepEqual(got, target) {
		t.Fatalf("replicas %v after completion, want %v", got, target)
	}
	if s2.Reassignment("orders", 1) != nil || len(s2.Reassignments()) != 0 {
		t.Fatal("the move is still recorded")
	}
	if got := s.Topic("orders").Replicas[1]; !reflect.DeepEqual(got, from) {
		t.Fatalf("the first state changed: %v", got)
	}
}

func TestReassignCancelAndDelete(t *testing.T) {
	s := New()
	res, err := apply(t, s, mustPlanCreate(t, s, "orders", 1, 3))
	if err != nil {
		t.Fatal(err)
	}
	top := res.Topic
	from := append([]NodeID(nil), top.Replicas[0]...)
	if _, err := apply(t, s, reassignCmd(OpReassignCancel, top, 0)); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel of nothing: %v", err)
	}
	start := reassignCmd(OpReassignStart, top, 0)
	start.Target, start.Roster = []NodeID{2, 3, 4}, roster6
	if _, err := apply(t, s, start); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second cancel changes nothing
		if _, err := apply(t, s, reassignCmd(OpReassignCancel, top, 0)); err != nil {
			t.Fatal(err)
		}
	}
	r := s.Reassignment("orders", 0)
	if !r.Cancelled || !reflect.DeepEqual(r.Target, from) {
		t.Fatalf("cancelled move %+v, want target %v", r, from)
	}
	done := reassignCmd(OpReassignComplete, top, 0)
	done.Target = from
	if _, err := apply(t, s, done); err != nil {
		t.Fatal(err)
	}
	if got := s.Topic("orders").Replicas[0]; !reflect.DeepEqual(got, from) {
		t.Fatalf("replicas %v after a cancelled move, want %v", got, from)
	}

	// Deleting a topic drops its moves.
	if _, err := apply(t, s, start); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, s, Command{Version: CommandVersion, Op: OpDeleteTopic, Name: top.Name, ID: top.ID}); err != nil {
		t.Fatal(err)
	}
	if len(s.Reassignments()) != 0 {
		t.Fatal("a deleted topic's move is still recorded")
	}
}
