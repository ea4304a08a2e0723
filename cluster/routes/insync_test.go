package routes

import (
	"fmt"
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
)

// fakeGroup is a primary (node 1) with followers 2 and 3, driven by hand.
type fakeGroup struct {
	t      *testing.T
	now    time.Time
	end    int64
	match  map[raftlite.NodeID]int64
	active map[raftlite.NodeID]bool
	dead   map[raftlite.NodeID]bool
	term   int32
	seed   []int32
	lags   LagTable
}

func newFakeGroup(t *testing.T) *fakeGroup {
	return &fakeGroup{t: t, now: time.UnixMilli(1_700_000_000_000), term: 1,
		match:  map[raftlite.NodeID]int64{2: -1, 3: -1},
		active: map[raftlite.NodeID]bool{2: true, 3: true}, dead: map[raftlite.NodeID]bool{}}
}

var fakeKey = [20]byte{1}

// sample advances the clock by d and samples the group.
func (g *fakeGroup) sample(d time.Duration) string {
	g.now = g.now.Add(d)
	out := g.lags.Sample(fakeKey, g.now, time.Second, SampleInput{
		Self: 1, Term: g.term, Replicas: []raftlite.NodeID{1, 2, 3}, Seed: g.seed, End: g.end,
		Follower: func(id raftlite.NodeID) (int64, bool, bool) { return g.match[id], g.active[id], true },
		Alive:    func(id raftlite.NodeID) bool { return !g.dead[id] },
	})
	return fmt.Sprint(out)
}

func (g *fakeGroup) want(d time.Duration, want string) {
	g.t.Helper()
	if got := g.sample(d); got != want {
		g.t.Fatalf("at +%v: in sync %s, want %s", g.now.Sub(time.UnixMilli(1_700_000_000_000)), got, want)
	}
}

// A follower always a little behind a primary that never stops writing
// stays in sync: at each sample it holds what the primary had at the
// previous one. (The old rule, "holds everything committed at the
// instant of the check", dropped it at every sample.)
func TestInSyncUnderSaturatingWrites(t *testing.T) {
	g := newFakeGroup(t)
	g.end = 1000
	g.want(0, "[1]") // a new primary knows nothing of its followers yet
	for i := 0; i < 100; i++ {
		prev := g.end
		g.end += 1000
		// Follower 2 holds the previous sample's end and a bit; 3 trails
		// half a sample further behind, so it never reaches that end.
		g.match[2] = prev + 300 - 1
		g.match[3] = prev - 500 - 1
		g.want(250*time.Millisecond, "[1 2]")
	}
	if got := g.lags.CaughtUp(fakeKey, 2); got != g.now.Add(-250*time.Millisecond).UnixMilli() {
		t.Fatalf("follower 2 last caught up at %d, want the previous sample %d", got, g.now.Add(-250*time.Millisecond).UnixMilli())
	}
	recs, behind := g.lags.LagMax(g.now)
	if recs != 1500 || behind < time.Second {
		t.Fatalf("lag max %d records, %v; want 1500 and over the window", recs, behind)
	}
}

// A follower that stops catching up leaves the set once the window has
// passed since it last caught up, not before; catching up brings it back.
func TestInSyncWindow(t *testing.T) {
	g := newFakeGroup(t)
	g.end, g.match[2], g.match[3] = 10, 9, 9
	g.want(0, "[1 2 3]")
	caught := g.now
	g.end = 20 // 3 stalls at 9
	g.match[2] = 19
	g.want(500*time.Millisecond, "[1 2 3]")
	g.want(500*time.Millisecond, "[1 2 3]") // exactly the window
	g.want(time.Millisecond, "[1 2]")
	if got := g.lags.CaughtUp(fakeKey, 3); got != caught.UnixMilli() {
		t.Fatalf("follower 3 last caught up at %d, want %d", got, caught.UnixMilli())
	}
	g.match[3] = 19
	g.want(10*time.Millisecond, "[1 2 3]")
}

// A follower on a node reported dead is out at once, whatever its last
// catch-up; back, it is in only after a catch-up while it answers.
func TestInSyncDeadNode(t *testing.T) {
	g := newFakeGroup(t)
	g.end, g.match[2], g.match[3] = 10, 9, 9
	g.want(0, "[1 2 3]")
	g.dead[3] = true
	g.want(10*time.Millisecond, "[1 2]")
	g.dead[3] = false
	g.active[3] = false // its node is up, its replica silent
	g.want(10*time.Millisecond, "[1 2]")
	g.active[3] = true
	g.want(10*time.Millisecond, "[1 2 3]")
}

// A new term starts the followers the previous primary reported in sync
// as caught up now (Kafka keeps the ISR across a leader change); others
// wait for a catch-up.
func TestInSyncNewTermSeed(t *testing.T) {
	g := newFakeGroup(t)
	g.end = 50
	g.term, g.seed = 2, []int32{1, 2, 3}
	g.dead[3] = true
	g.want(0, "[1 2]")
	g.dead[3] = false
	g.want(10*time.Millisecond, "[1 2]") // 3 was seen dead: must catch up
	g.term, g.seed = 3, []int32{2, 7}    // 7 is no replica: forgotten
	g.want(10*time.Millisecond, "[1 2]")
	if got := g.lags.CaughtUp(fakeKey, 7); got != -1 {
		t.Fatalf("node 7, no replica, kept a catch-up time %d", got)
	}
	g.match[3] = 49
	g.want(10*time.Millisecond, "[1 2 3]")
}

// A follower whose node is up but which stopped answering the group
// leaves after the window even when nothing was written: a catch-up
// counts only from a follower that answers.
func TestInSyncSilentFollower(t *testing.T) {
	g := newFakeGroup(t)
	g.end, g.match[2], g.match[3] = 10, 9, 9
	g.want(0, "[1 2 3]")
	g.active[3] = false
	g.want(time.Second, "[1 2 3]")
	g.want(time.Millisecond, "[1 2]")
	g.active[3] = true
	g.want(time.Millisecond, "[1 2 3]")
}
