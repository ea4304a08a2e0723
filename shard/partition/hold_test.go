package partition

import (
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
)

// A replica that is not its group's preferred primary holds its election
// clock for 3 election timeouts after it opens, so that the preferred
// replica wins the group's first election. The hold ends once the replica
// knows a primary: if that primary then falls silent, the replica
// campaigns after an ordinary election timeout. (Kept on, the hold froze
// the election clock and the leader lease with it, so a primary lost in
// the first seconds of a partition's life, or of a node's restart, was
// replaced only when the hold ran out.)
func TestHoldEndsOnceAPrimaryIsKnown(t *testing.T) {
	lim := raftlite.DefaultLimits()
	for _, known := range []bool{false, true} {
		g, err := shard.NewGroup(shard.Config{Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		sh := g.Shard(0)
		do := func(fn func()) {
			t.Helper()
			if err := sh.Do(func(*shard.Shard) { fn() }); err != nil {
				t.Fatal(err)
			}
		}
		var h *Host
		var r *Replica
		var preVotes int // touched on the shard only
		do(func() {
			eng := testEngine(vfs.OS())
			// Ticks come from this test only.
			if h, err = NewHost(sh, eng, time.Hour, 0); err != nil {
				t.Fatal(err)
			}
			r, err = h.Open(Config{DenseOffsets: true, FS: vfs.OS(), Dir: t.TempDir(), Log: segment.Config{BatchBytesMax: 1 << 20},
				Topic: "t", TopicID: [16]byte{1}, Partition: 0, Self: 2, Replicas: []raftlite.NodeID{1, 2, 3}, Limits: lim,
				Send: func(_ *Replica, msgs []raftlite.Message) {
					for _, m := range msgs {
						if m.Type == raftlite.MsgPreVote {
							preVotes++
						}
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			if known {
				if err := r.Step(raftlite.Message{Type: raftlite.MsgHeartbeat, Group: GroupID(r.Key()), From: 1, To: 2, Term: 1, Commit: -1}); err != nil {
					t.Fatal(err)
				}
				if lead, _ := r.Route(); lead != 1 {
					t.Fatalf("primary %d after its heartbeat, want 1", lead)
				}
			}
			// Two election timeouts of silence: past any randomised
			// timeout, short of the hold.
			for i := int32(0); i < 2*lim.ElectionTicks; i++ {
				r.Tick()
			}
		})
		switch {
		case known && preVotes == 0:
			t.Errorf("a replica that knew its primary did not campaign after %d silent ticks", 2*lim.ElectionTicks)
		case !known && preVotes != 0:
			t.Errorf("a new non-preferred replica campaigned during its hold")
		}
		do(func() { h.Close(nil) })
		if err := g.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// A member of a group of two that opens after a restart (it voted before)
// campaigns after a tick, like the preferred replica, instead of holding:
// the group needs it for every election, and the other member's next
// election timeout could be two timeouts away. A new member of a group of
// two, and a returning member of a larger group, still wait.
func TestReturningMemberOfTwoCampaignsAtOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		term     int32
		replicas []raftlite.NodeID
		want     bool
	}{
		{"returning member of two", 3, []raftlite.NodeID{1, 2}, true},
		{"new member of two", 0, []raftlite.NodeID{1, 2}, false},
		{"returning member of three", 3, []raftlite.NodeID{1, 2, 3}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := shard.NewGroup(shard.Config{Count: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Start(); err != nil {
				t.Fatal(err)
			}
			defer g.Stop()
			sh := g.Shard(0)
			preVotes := 0 // touched on the shard only
			if err := sh.Do(func(*shard.Shard) {
				h, err := NewHost(sh, testEngine(vfs.OS()), time.Hour, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close(nil)
				dir := t.TempDir()
				key := shard.PartitionKey([16]byte{1}, 0)
				if err := h.UseJournal(vfs.OS(), dir, map[raftlite.GroupID]raftlite.HardState{GroupID(key): {Term: c.term}}); err != nil {
					t.Fatal(err)
				}
				r, err := h.Open(Config{DenseOffsets: true, FS: vfs.OS(), Dir: dir + "/p0", Log: segment.Config{BatchBytesMax: 1 << 20},
					Topic: "t", TopicID: [16]byte{1}, Partition: 0, Self: 2, Replicas: c.replicas,
					Send: func(_ *Replica, msgs []raftlite.Message) {
						for _, m := range msgs {
							if m.Type == raftlite.MsgPreVote {
								preVotes++
							}
						}
					}})
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 2; i++ {
					r.Tick()
				}
			}); err != nil {
				t.Fatal(err)
			}
			if got := preVotes > 0; got != c.want {
				t.Fatalf("campaigned within two ticks: %v, want %v", got, c.want)
			}
		})
	}
}
