package metadata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var roster3 = []NodeID{1, 2, 3}

func mustPlanCreate(t *testing.T, s *State, name string, parts, rf int) Command {
	t.Helper()
	c, err := s.PlanCreateTopic(CreateRequest{Name: name, Partitions: parts, ReplicationFactor: rf}, roster3, roster3, 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// apply runs c through its encoding, as the log would.
func apply(t *testing.T, s *State, c Command) (Result, error) {
	t.Helper()
	d, err := DecodeCommand(c.Encode())
	if err != nil {
		t.Fatal(err)
	}
	return s.Apply(d)
}

func TestCreateTwelvePartitionsFactorThree(t *testing.T) {
	s := New()
	r, err := apply(t, s, mustPlanCreate(t, s, "orders", 12, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Topic.ReplicationFactor != 3 || r.Topic.Partitions() != 12 {
		t.Fatalf("topic %+v", r.Topic)
	}
	prim := map[NodeID]int{}
	for _, reps := range r.Topic.Replicas {
		prim[reps[0]]++
	}
	if !reflect.DeepEqual(prim, map[NodeID]int{1: 4, 2: 4, 3: 4}) {
		t.Fatalf("preferred primaries %v, want 4 each", prim)
	}
	if s.TopicByID(r.Topic.ID) != s.Topic("orders") {
		t.Fatal("id index out of step")
	}
}

func TestPlanErrors(t *testing.T) {
	s := New()
	if _, err := apply(t, s, mustPlanCreate(t, s, "a", 1, 1)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		req  CreateRequest
		want error
		text string
	}{
		{CreateRequest{Name: "a", Partitions: 1}, ErrTopicExists, "a"},
		{CreateRequest{Name: "b", Partitions: 0}, ErrInvalidPartitions, "0 is outside"},
		{CreateRequest{Name: "b", Partitions: 1, ReplicationFactor: 33}, ErrInvalidReplication, "33 is outside 1..32"},
		{CreateRequest{Name: "b", Partitions: 1, ReplicationFactor: 4}, ErrInvalidReplication, "4 exceeds the 3 nodes"},
		{CreateRequest{Name: "b c", Partitions: 1}, ErrInvalidTopicName, "allowed: a-z"},
		{CreateRequest{Name: "..", Partitions: 1}, ErrInvalidTopicName, ""},
		{CreateRequest{Name: strings.Repeat("x", 250), Partitions: 1}, ErrInvalidTopicName, "maximum is 249"},
		{CreateRequest{Name: MetaTopic, Partitions: 1}, ErrInvalidTopicName, "reserved for the broker's internal topics"},
		{CreateRequest{Name: "__consumer_offsets", Partitions: 1}, ErrInvalidTopicName, `starts with "__"`},
		{CreateRequest{Name: "b", Partitions: 1, Config: TopicConfig{RetentionMs: -5}}, ErrInvalidConfig, ""},
	}
	for _, tc := range cases {
		_, err := s.PlanCreateTopic(tc.req, roster3, roster3, 3, 0)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%+v: err = %v, want %v containing %q", tc.req.Name, err, tc.want, tc.text)
		}
	}
	// Factor 3 with only two live nodes cannot be placed.
	if _, err := s.PlanCreateTopic(CreateRequest{Name: "z", Partitions: 1, ReplicationFactor: 3}, roster3, []NodeID{1, 2}, 3, 0); !errors.Is(err, ErrInvalidReplication) {
		t.Fatalf("err = %v", err)
	}
}

// The reserved prefix is a rule for new topics only: applying a committed
// command never gets stricter, or a replay would drop a topic.
func TestReservedNamesOnlyForNewTopics(t *testing.T) {
	s := New()
	for _, name := range []string{"_single", "a__b", "x.__"} {
		if err := ValidateNewTopicName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	c := mustPlanCreate(t, s, "internal-later", 1, 3)
	c.Topic.Name = "__old"
	if _, err := apply(t, s, c); err != nil {
		t.Fatalf("applying a committed create of %q: %v", c.Topic.Name, err)
	}
}

func TestDeleteAndRecreateChangesID(t *testing.T) {
	s := New()
	r1, _ := apply(t, s, mustPlanCreate(t, s, "t", 2, 3))
	del, err := s.PlanDeleteTopic("t", r1.Topic.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, s, del); err != nil {
		t.Fatal(err)
	}
	r2, _ := apply(t, s, mustPlanCreate(t, s, "t", 2, 3))
	if r1.Topic.ID == r2.Topic.ID {
		t.Fatal("recreated topic kept its id")
	}
	// A command carrying the old id must not act on the new topic.
	if _, err := apply(t, s, del); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("delete with stale id: %v", err)
	}
	if s.TopicByID(r1.Topic.ID) != nil {
		t.Fatal("old id still resolves")
	}
}

func TestAddPartitionsKeepsFactor(t *testing.T) {
	s := New()
	r, _ := apply(t, s, mustPlanCreate(t, s, "t", 3, 2))
	c, err := s.PlanAddPartitions("t", r.Topic.ID, 7, roster3, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := apply(t, s, c)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Topic.Partitions() != 7 || r2.Topic.ReplicationFactor != 2 {
		t.Fatalf("%+v", r2.Topic)
	}
	for _, reps := range r2.Topic.Replicas {
		if len(reps) != 2 {
			t.Fatalf("replicas %v", reps)
		}
	}
	if r.Topic.Partitions() != 3 {
		t.Fatal("the old topic value was modified in place")
	}
	if _, err := s.PlanAddPartitions("t", r.Topic.ID, 7, roster3, nil, nil); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("shrink/same accepted: %v", err)
	}
}

func TestProducerIDsAndSnapshot(t *testing.T) {
	s := New()
	apply(t, s, mustPlanCreate(t, s, "a", 4, 3))
	apply(t, s, mustPlanCreate(t, s, "b", 2, 1))
	r, err := apply(t, s, Command{Version: 1, Op: OpAllocateProducers, Count: 10})
	if err != nil || r.FirstProducerID != 0 {
		t.Fatal(r, err)
	}
	r, _ = apply(t, s, Command{Version: 1, Op: OpAllocateProducers, Count: 5})
	if r.FirstProducerID != 10 {
		t.Fatal(r)
	}
	s2, err := Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s2.Topics(), s.Topics()) || s2.NextProducerID() != 15 {
		t.Fatalf("restore differs")
	}
	if _, err := Restore([]byte(`{"v":99}`)); err == nil {
		t.Fatal("future snapshot accepted")
	}
}

func TestApplyRefusesBadCommands(t *testing.T) {
	s := New()
	bad := []Command{
		{Version: 1, Op: "nope"},
		{Version: 1, Op: OpCreateTopic},
		{Version: 1, Op: OpCreateTopic, Topic: &Topic{Name: "x", ID: TopicID{1}, ReplicationFactor: 2, Replicas: [][]NodeID{{1, 1}}}},
		{Version: 1, Op: OpCreateTopic, Topic: &Topic{Name: "x", ReplicationFactor: 1, Replicas: [][]NodeID{{1}}}},
		{Version: 1, Op: OpAllocateProducers, Count: 0},
	}
	for _, c := range bad {
		if _, err := s.Apply(c); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
	if _, err := DecodeCommand([]byte(`{"v":2,"op":"create_topic"}`)); err == nil {
		t.Fatal("future command version accepted")
	}
	if len(s.Topics()) != 0 {
		t.Fatal("a refused command changed the state")
	}
}

func TestCommitOffsets(t *testing.T) {
	s := New()
	r, _ := apply(t, s, mustPlanCreate(t, s, "t", 2, 1))
	id := r.Topic.ID
	c := Command{Version: 1, Op: OpCommitOffsets, Consumer: "c1", Offsets: []OffsetEntry{
		{OffsetKey{"t", 0}, Committed{TopicID: id, Offset: 42, Metadata: "m"}},
		{OffsetKey{"t", 5}, Committed{Offset: 1}},
		{OffsetKey{"nope", 0}, Committed{Offset: 1}},
		{OffsetKey{"t", 1}, Committed{TopicID: TopicID{9}, Offset: 1}},
		{OffsetKey{"t", 1}, Committed{Offset: 7}},
	}}
	res, err := apply(t, s, c)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, false, false, true} {
		if (res.Errors[i] == nil) != want {
			t.Errorf("entry %d: err = %v", i, res.Errors[i])
		}
	}
	got, ok := s.Committed("c1", OffsetKey{"t", 0})
	if !ok || got.Offset != 42 || got.Metadata != "m" || got.TopicID != id {
		t.Fatalf("got %+v", got)
	}
	if got, _ := s.Committed("c1", OffsetKey{"t", 1}); got.TopicID != id {
		t.Fatal("a commit without an id must store the topic's id")
	}
	s2, err := Restore(s.Snapshot())
	if err != nil || !reflect.DeepEqual(s2.CommittedAll("c1"), s.CommittedAll("c1")) {
		t.Fatalf("restore: %v", err)
	}
	if got := s.Consumers(); !reflect.DeepEqual(got, []string{"c1"}) {
		t.Fatalf("Consumers = %v, want [c1]", got)
	}
	del, _ := s.PlanDeleteTopic("t", id)
	apply(t, s, del)
	if len(s.CommittedAll("c1")) != 0 {
		t.Fatal("offsets outlived their topic")
	}
	if got := s.Consumers(); len(got) != 0 {
		t.Fatalf("Consumers = %v after their only topic was deleted", got)
	}
}

func TestPrimaryMovedIsRemembered(t *testing.T) {
	s := New()
	r, _ := apply(t, s, mustPlanCreate(t, s, "t", 2, 3))
	if _, err := apply(t, s, Command{Version: 1, Op: OpPrimaryMoved, Name: "t", ID: r.Topic.ID, Partition: 1, AtMs: 777}); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpPrimaryMoved, Name: "t", ID: r.Topic.ID, Partition: 9, AtMs: 1}); err == nil {
		t.Fatal("move of a missing partition accepted")
	}
	s2, err := Restore(s.Snapshot())
	if err != nil || s2.LastMovedMs("t", 1) != 777 || s2.LastMovedMs("t", 0) != 0 {
		t.Fatalf("restore: %v %d", err, s2.LastMovedMs("t", 1))
	}
}

// Only the node's internal request creates an internal topic, and only
// the ones the broker knows.
func TestInternalTopicCreate(t *testing.T) {
	s := New()
	for _, tc := range []struct {
		name     string
		internal bool
		ok       bool
	}{
		{GroupsTopic, true, true},
		{GroupsTopic, false, false},
		{MetaTopic, true, false},
		{"__other", true, false},
		{"plain", true, false},
	} {
		_, err := s.PlanCreateTopic(CreateRequest{Name: tc.name, Partitions: 4, Internal: tc.internal}, roster3, roster3, 3, 0)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalidTopicName) {
			t.Errorf("%q internal=%v: %v, want ok=%v", tc.name, tc.internal, err, tc.ok)
		}
	}
	if !IsInternalTopic(GroupsTopic) || IsInternalTopic("_x") {
		t.Fatal("IsInternalTopic")
	}
}
