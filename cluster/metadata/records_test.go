package metadata

import (
	"errors"
	"testing"
)

// delete_records moves one partition's log start up (copy on write),
// never down, survives a snapshot, and is refused for an unknown or
// recreated topic, a partition it lacks and a negative offset.
func TestDeleteRecords(t *testing.T) {
	s := New()
	r, _ := apply(t, s, mustPlanCreate(t, s, "t", 2, 1))
	old := r.Topic
	c, err := s.PlanDeleteRecords("t", old.ID, 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, s, c); err != nil {
		t.Fatal(err)
	}
	if got := s.Topic("t"); got.LogStart(1) != 7 || got.LogStart(0) != 0 || old.LogStart(1) != 0 {
		t.Fatalf("log starts %v, the old topic's %v", got.LogStarts, old.LogStarts)
	}
	down, _ := s.PlanDeleteRecords("t", old.ID, 1, 3)
	if _, err := apply(t, s, down); err != nil || s.Topic("t").LogStart(1) != 7 {
		t.Fatalf("a lower start: %v, start %d", err, s.Topic("t").LogStart(1))
	}
	s2, err := Restore(s.Snapshot())
	if err != nil || s2.Topic("t").LogStart(1) != 7 {
		t.Fatalf("after a snapshot: %+v, %v", s2.Topic("t"), err)
	}
	for _, tc := range []struct {
		name string
		cmd  Command
		want error
	}{
		{"unknown topic", Command{Version: 1, Op: OpDeleteRecords, Name: "u", Offset: 1}, ErrUnknownTopic},
		{"another id", Command{Version: 1, Op: OpDeleteRecords, Name: "t", ID: TopicID{1}, Offset: 1}, ErrUnknownTopic},
		{"no such partition", Command{Version: 1, Op: OpDeleteRecords, Name: "t", Partition: 2, Offset: 1}, ErrUnknownTopic},
		{"negative offset", Command{Version: 1, Op: OpDeleteRecords, Name: "t", Offset: -1}, ErrInvalidCommand},
	} {
		if _, err := apply(t, s, tc.cmd); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
