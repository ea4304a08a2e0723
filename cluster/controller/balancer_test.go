package controller

import (
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// fakeTimers runs the driver's timers by hand, in the order they are due.
type fakeTimers struct {
	clock *clock.Manual
	due   []fakeTimer
}

type fakeTimer struct {
	at time.Time
	fn func()
}

func (f *fakeTimers) after(d time.Duration, fn func()) {
	f.due = append(f.due, fakeTimer{f.clock.Now().Add(d), fn})
}

// runFor advances the clock by d, firing every timer due on the way.
func (f *fakeTimers) runFor(d time.Duration) {
	end := f.clock.Now().Add(d)
	for {
		sort.SliceStable(f.due, func(i, j int) bool { return f.due[i].at.Before(f.due[j].at) })
		if len(f.due) == 0 || f.due[0].at.After(end) {
			break
		}
		t := f.due[0]
		f.due = f.due[1:]
		f.clock.Set(t.at)
		t.fn()
	}
	f.clock.Set(end)
}

// The balancer driver runs with nothing of a node behind its ports: an
// operator's move asks the partition's primary for the transfer, answers
// once the routes show the target leading and records the move; a move
// whose target never leads fails at its deadline with a timeout.
func TestBalancerMovePrimaryThroughItsPorts(t *testing.T) {
	st := metadata.New()
	roster := []metadata.NodeID{1, 2, 3}
	cmd, err := st.PlanCreateTopic(metadata.CreateRequest{Name: "orders", Partitions: 1, ReplicationFactor: 3}, roster, roster, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(cmd); err != nil {
		t.Fatal(err)
	}
	view := routes.NewView(st, 0)
	topic := view.Topics["orders"]
	key := routes.Key(topic.ID, 0)
	for _, c := range []struct {
		name     string
		moves    bool
		wantKind error
	}{
		{"the target takes over", true, nil},
		{"the target never leads", false, partition.ErrTimedOut},
	} {
		t.Run(c.name, func(t *testing.T) {
			timers := &fakeTimers{clock: clock.NewManual(time.Unix(1000, 0))}
			var table routes.Table
			table.Set(key, routes.Route{Leader: 1, Term: 4, InSync: []int32{1, 2, 3}})
			var transfers [][4]int32
			var proposed []metadata.Command
			var stats BalanceStats
			var rebalancing atomic.Bool
			b := NewBalancer(BalancerDeps{
				Clock: timers.clock, After: timers.after, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Roster: func() []int32 { return []int32{1, 2, 3} }, Alive: func(int32) bool { return true },
				View: func() *routes.View { return view }, Routes: &table,
				LastMovedMs: func(string, int32) int64 { return 0 }, IsPrimary: func() bool { return true },
				Transfer: func(id [16]byte, p int32, from, to int32) {
					if id != [16]byte(topic.ID) {
						t.Errorf("transfer of topic %x, want %x", id, topic.ID)
					}
					transfers = append(transfers, [4]int32{p, from, to})
				},
				Propose: func(cmd metadata.Command) { proposed = append(proposed, cmd) },
				Stats:   &stats, Rebalancing: &rebalancing,
				Every: time.Hour, MoveTimeout: 3 * time.Second,
			}, func() bool { return false })
			var answer any
			b.MovePrimary(&wire.MovePrimaryRequest{Topic: "orders", Partition: 0, TargetNodeID: 2}, func(v any) { answer = v })
			if len(transfers) != 1 || transfers[0] != [4]int32{0, 1, 2} {
				t.Fatalf("transfers %v, want one of partition 0 from node 1 to node 2", transfers)
			}
			if m, ok := b.InFlight(); !ok || m.To != 2 {
				t.Fatalf("in flight %v, %v; want the move to node 2", m, ok)
			}
			if c.moves {
				timers.runFor(time.Second)
				table.Set(key, routes.Route{Leader: 2, Term: 5, InSync: []int32{1, 2, 3}})
			}
			timers.runFor(5 * time.Second)
			if _, ok := b.InFlight(); ok {
				t.Fatal("the move is still in flight")
			}
			if c.wantKind == nil {
				resp, ok := answer.(*wire.MovePrimaryResponse)
				if !ok || resp.PrimaryID != 2 || resp.Generation != 5 {
					t.Fatalf("answer %#v, want node 2 leading generation 5", answer)
				}
				if len(proposed) != 1 || proposed[0].Op != metadata.OpPrimaryMoved || proposed[0].Name != "orders" {
					t.Fatalf("proposed %v, want one OpPrimaryMoved of orders", proposed)
				}
				if stats.Finished.Load() != 1 || stats.Failed.Load() != 0 {
					t.Fatalf("stats finished %d failed %d", stats.Finished.Load(), stats.Failed.Load())
				}
				return
			}
			err, _ := answer.(error)
			if !errors.Is(err, c.wantKind) {
				t.Fatalf("answer %v, want a %v", answer, c.wantKind)
			}
			if len(proposed) != 0 || stats.Failed.Load() != 1 {
				t.Fatalf("proposed %v, failed %d; want nothing recorded and one failure", proposed, stats.Failed.Load())
			}
		})
	}
}
