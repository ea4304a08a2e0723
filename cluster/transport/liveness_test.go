package transport

import (
	"slices"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/raftlite"
)

// The liveness detector reads only its clock: a peer is alive for the
// timeout after its last frame, and never before its first.
func TestLivenessOnItsClock(t *testing.T) {
	c := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	l := NewLiveness(c, time.Second)
	if l.Alive(2) {
		t.Fatal("a peer never heard from is alive")
	}
	l.Heard(2)
	c.Advance(999 * time.Millisecond)
	if !l.Alive(2) {
		t.Fatal("a peer heard 999 ms ago is down with a 1 s timeout")
	}
	c.Advance(time.Millisecond)
	if l.Alive(2) {
		t.Fatal("a peer heard 1 s ago is alive with a 1 s timeout")
	}
	l.Heard(0)
	l.Heard(int32(raftlite.NodeIDMax) + 1)
	if l.Alive(0) || l.Alive(int32(raftlite.NodeIDMax)+1) {
		t.Fatal("an id outside the roster range is alive")
	}
}

func TestDownWatch(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	every, timeout := 100*time.Millisecond, time.Second
	alive := map[int32]bool{2: true, 3: true}
	f := func(id int32) bool { return alive[id] }
	steps := []struct {
		at   time.Duration
		set  map[int32]bool
		down []int32
		up   []int32
	}{
		{at: 0, down: nil, up: []int32{2, 3}},
		{at: 100 * time.Millisecond, set: map[int32]bool{3: false}, down: []int32{3}},
		{at: 200 * time.Millisecond, down: nil}, // an edge, reported once
		{at: 300 * time.Millisecond, set: map[int32]bool{3: true}, down: nil, up: []int32{3}},
		// A late beat (this node stalled) reports nobody, and the next
		// beat compares with what the last on-time beat saw.
		{at: 2 * time.Second, set: map[int32]bool{2: false}, down: nil},
		{at: 2100 * time.Millisecond, down: []int32{2}},
	}
	w := NewDownWatch(every, timeout)
	for i, s := range steps {
		for id, a := range s.set {
			alive[id] = a
		}
		down, up := w.Beat(start.Add(s.at), []int32{2, 3}, f)
		if !slices.Equal(down, s.down) || !slices.Equal(up, s.up) {
			t.Fatalf("step %d (at %v): down %v up %v, want down %v up %v", i, s.at, down, up, s.down, s.up)
		}
	}
}

func TestCampaignsAfterDown(t *testing.T) {
	alive := func(up ...raftlite.NodeID) func(raftlite.NodeID) bool {
		return func(id raftlite.NodeID) bool { return slices.Contains(up, id) }
	}
	reps := []raftlite.NodeID{1, 2, 3}
	cases := []struct {
		name             string
		lead, dead, self raftlite.NodeID
		alive            func(raftlite.NodeID) bool
		want             bool
	}{
		{"the preferred replica takes over from the dead primary", 2, 2, 1, alive(3), true},
		{"a later replica waits for the preferred one", 2, 2, 3, alive(1), false},
		{"the next replica when the preferred one died", 1, 1, 2, alive(3), true},
		{"a replica skips a down one before it", 1, 1, 3, alive(), true},
		{"nobody campaigns while the primary lives", 3, 2, 1, alive(3), false},
		{"a leaderless group campaigns too", raftlite.None, 3, 1, alive(2), true},
	}
	for _, c := range cases {
		if got := CampaignsAfterDown(reps, c.lead, c.dead, c.self, c.alive); got != c.want {
			t.Errorf("%s: got %v", c.name, got)
		}
	}
}
