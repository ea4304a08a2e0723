package metadata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A manual assignment is used as given, the first replica of each set
// first; each broken rule is refused with its error, naming the
// partition and the node.
func TestPlanCreateTopicAssignment(t *testing.T) {
	s := New()
	assign := [][]NodeID{{3, 1}, {2, 3}, {1, 2}}
	c, err := s.PlanCreateTopic(CreateRequest{Name: "a", Assignment: assign}, roster3, roster3, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := apply(t, s, c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Topic.Replicas, assign) || r.Topic.ReplicationFactor != 2 {
		t.Fatalf("created %v factor %d; want %v factor 2", r.Topic.Replicas, r.Topic.ReplicationFactor, assign)
	}
	assign[0][0] = 2
	if r.Topic.Replicas[0][0] != 3 {
		t.Fatal("the plan kept the caller's slices")
	}

	for _, tc := range []struct {
		name string
		req  CreateRequest
		err  error
		msg  string
	}{
		{"empty set", CreateRequest{Assignment: [][]NodeID{{1}, {}}}, ErrInvalidAssignment, "partition 1 has an empty replica list"},
		{"uneven", CreateRequest{Assignment: [][]NodeID{{1, 2}, {3}}}, ErrInvalidAssignment, "partition 1 lists 1 replicas"},
		{"twice", CreateRequest{Assignment: [][]NodeID{{1, 2}, {3, 3}}}, ErrInvalidAssignment, "partition 1 lists node 3 twice"},
		{"unknown node", CreateRequest{Assignment: [][]NodeID{{1, 4}}}, ErrInvalidAssignment, "partition 0 names node 4, which is not in the roster"},
		{"too long", CreateRequest{Assignment: [][]NodeID{make([]NodeID, 33)}}, ErrInvalidReplication, "33 replicas; at most 32"},
		{"factor differs", CreateRequest{ReplicationFactor: 3, Assignment: [][]NodeID{{1, 2}}}, ErrInvalidAssignment, "replication factor is 3"},
		{"count differs", CreateRequest{Partitions: 2, Assignment: [][]NodeID{{1, 2}}}, ErrInvalidAssignment, "2 partitions asked"},
	} {
		tc.req.Name = "b"
		_, err := s.PlanCreateTopic(tc.req, roster3, roster3, 3, 0)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v; want %v with %q", tc.name, err, tc.err, tc.msg)
		}
	}

	// Added partitions: one set per new partition, of the topic's factor,
	// numbered from the current count.
	c, err = s.PlanAddPartitions("a", r.Topic.ID, 4, roster3, nil, [][]NodeID{{2, 1}})
	if err != nil {
		t.Fatal(err)
	}
	r, err = apply(t, s, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Topic.Replicas[3]; !reflect.DeepEqual(got, []NodeID{2, 1}) {
		t.Fatalf("partition 3 on %v; want [2 1]", got)
	}
	for _, tc := range []struct {
		name   string
		total  int
		assign [][]NodeID
		msg    string
	}{
		{"fewer sets", 6, [][]NodeID{{1, 2}}, "2 partitions added (4 to 6), but the assignment lists 1"},
		{"other factor", 5, [][]NodeID{{1, 2, 3}}, "partition 4 lists 3 replicas, but the topic's replication factor is 2"},
		{"unknown node", 5, [][]NodeID{{1, 9}}, "partition 4 names node 9"},
	} {
		_, err := s.PlanAddPartitions("a", r.Topic.ID, tc.total, roster3, nil, tc.assign)
		if !errors.Is(err, ErrInvalidAssignment) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.msg)
		}
	}
}

// A node being drained is refused in an assignment, for a new topic and
// for added partitions: the drain would move the replica off at once.
func TestAssignmentRefusesDrainingNode(t *testing.T) {
	s := New()
	r, err := apply(t, s, mustPlanCreate(t, s, "a", 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	roster4 := []NodeID{1, 2, 3, 4}
	if _, err := apply(t, s, drainCmd(OpDrainNode, 3, 0, roster4)); err != nil {
		t.Fatal(err)
	}
	_, err = s.PlanCreateTopic(CreateRequest{Name: "b", Assignment: [][]NodeID{{1, 2}, {3, 1}}}, roster4, roster4, 3, 0)
	if !errors.Is(err, ErrInvalidAssignment) || !strings.Contains(err.Error(), "partition 1 names node 3, which is draining") {
		t.Errorf("create on a draining node: %v", err)
	}
	_, err = s.PlanAddPartitions("a", r.Topic.ID, 2, roster4, nil, [][]NodeID{{4, 3}})
	if !errors.Is(err, ErrInvalidAssignment) || !strings.Contains(err.Error(), "partition 1 names node 3, which is draining") {
		t.Errorf("add on a draining node: %v", err)
	}
	if _, err := s.PlanCreateTopic(CreateRequest{Name: "b", Assignment: [][]NodeID{{1, 2}, {4, 1}}}, roster4, roster4, 3, 0); err != nil {
		t.Errorf("create off the draining node: %v", err)
	}
}
