package metadata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func drainCmd(op Op, node, repl NodeID, roster []NodeID) Command {
	return Command{Version: CommandVersion, Op: op, Node: node, Replacement: repl, Roster: roster, AtMs: 7}
}

func TestDrainRefusals(t *testing.T) {
	s := New()
	if _, err := apply(t, s, mustPlanCreate(t, s, "orders", 2, 3)); err != nil {
		t.Fatal(err)
	}
	roster4 := []NodeID{1, 2, 3, 4}
	if _, err := apply(t, s, drainCmd(OpDrainNode, 4, 0, roster4)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		node, repl NodeID
		roster     []NodeID
		want       error
		text       string
	}{
		{"unknown node", 9, 0, roster4, ErrInvalidDrain, "node 9 is not in the roster"},
		{"twice", 4, 0, roster4, ErrAlreadyDraining, "node 4 has been draining"},
		{"below the largest factor", 1, 0, roster4, ErrInvalidDrain, "leaves 2 nodes not draining, and topic orders keeps 3 copies"},
		{"replace by itself", 1, 1, roster4, ErrInvalidDrain, "cannot replace itself"},
		{"unknown replacement", 1, 8, roster4, ErrInvalidDrain, "replacement node 8 is not in the roster"},
		{"draining replacement", 1, 4, roster4, ErrInvalidDrain, "replacement node 4 is draining"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := apply(t, s, drainCmd(OpDrainNode, c.node, c.repl, c.roster))
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("err %v, want %v with %q", err, c.want, c.text)
			}
		})
	}
	if got := len(s.Drains()); got != 1 {
		t.Fatalf("%d drains recorded, want 1", got)
	}
	// A replace may use every node: its replacement keeps the count.
	if _, err := apply(t, s, drainCmd(OpDrainNode, 1, 2, roster4)); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, s, drainCmd(OpUndrainNode, 3, 0, nil)); !errors.Is(err, ErrNotDraining) {
		t.Fatalf("undrain of a node not draining: %v", err)
	}
	// Drains and the cluster id survive a snapshot.
	id := NewClusterID()
	if _, err := apply(t, s, Command{Version: CommandVersion, Op: OpSetClusterID, Cluster: id}); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if r.ClusterID() != id || !reflect.DeepEqual(r.Drains(), s.Drains()) {
		t.Fatalf("restored id %s drains %+v, want %s %+v", r.ClusterID(), r.Drains(), id, s.Drains())
	}
	if _, err := apply(t, r, drainCmd(OpUndrainNode, 4, 0, nil)); err != nil || r.Draining(4) != nil {
		t.Fatalf("undrain: %v, still %+v", err, r.Draining(4))
	}
}

func TestClusterIDIsSetOnce(t *testing.T) {
	s := New()
	a, b := NewClusterID(), NewClusterID()
	set := func(id ClusterID) error {
		_, err := apply(t, s, Command{Version: CommandVersion, Op: OpSetClusterID, Cluster: id})
		return err
	}
	if err := set(ClusterID{}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("zero id: %v", err)
	}
	if err := set(a); err != nil || s.ClusterID() != a {
		t.Fatalf("first id: %v, state %s", err, s.ClusterID())
	}
	if err := set(a); err != nil {
		t.Fatalf("the same id again: %v", err)
	}
	if err := set(b); !errors.Is(err, ErrClusterIDSet) || !strings.Contains(err.Error(), a.String()) || s.ClusterID() != a {
		t.Fatalf("another id: %v, state %s", err, s.ClusterID())
	}
}

func TestDrainTarget(t *testing.T) {
	racks := map[NodeID]string{1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
	cases := []struct {
		name     string
		reps     []NodeID
		drain    Drain
		eligible []NodeID
		racks    map[NodeID]string
		load     map[NodeID]int
		want     []NodeID
	}{
		{"not a replica", []NodeID{1, 2, 3}, Drain{Node: 4}, []NodeID{5, 6}, nil, nil, nil},
		{"least loaded, slot kept", []NodeID{1, 2, 3}, Drain{Node: 1}, []NodeID{2, 3, 4, 5}, nil, map[NodeID]int{4: 3, 5: 1}, []NodeID{5, 2, 3}},
		{"lowest id on a tie", []NodeID{2, 1, 3}, Drain{Node: 1}, []NodeID{5, 4}, nil, nil, []NodeID{2, 4, 3}},
		{"rack first", []NodeID{1, 2, 3}, Drain{Node: 3}, []NodeID{4, 5, 6}, racks, map[NodeID]int{6: 9}, []NodeID{1, 2, 6}},
		{"replacement in place", []NodeID{1, 2, 3}, Drain{Node: 1, Replacement: 6}, []NodeID{4, 5, 6}, nil, nil, []NodeID{6, 2, 3}},
		{"replacement already a replica", []NodeID{1, 6, 3}, Drain{Node: 1, Replacement: 6}, []NodeID{4}, nil, nil, []NodeID{4, 6, 3}},
		{"no node fits", []NodeID{1, 2, 3}, Drain{Node: 1}, []NodeID{2, 3}, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := DrainTarget(c.reps, c.drain, c.eligible, c.racks, c.load)
			if ok != (c.want != nil) || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v %v, want %v", got, ok, c.want)
			}
		})
	}
}
