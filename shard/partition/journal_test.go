package partition

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
)

func TestJournalKeepsTheNewestState(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(vfs.OS(), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	j.put(1, raftlite.HardState{Term: 3})
	j.put(1, raftlite.HardState{Term: 3, Vote: 2})
	j.put(2, raftlite.HardState{Term: 7, Vote: 1})
	j.sync(func(raftlite.GroupID) bool { return true })
	j.close()
	// Another shard's journal (a replica that moved) with an older and a
	// newer state.
	k, err := openJournal(vfs.OS(), dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	k.put(1, raftlite.HardState{Term: 2, Vote: 3})
	k.put(2, raftlite.HardState{Term: 8})
	k.sync(func(raftlite.GroupID) bool { return true })
	k.close()
	states, err := LoadHardStates(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if states[1] != (raftlite.HardState{Term: 3, Vote: 2}) || states[2] != (raftlite.HardState{Term: 8}) {
		t.Fatalf("states %v", states)
	}
}

func TestJournalTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	j, _ := openJournal(vfs.OS(), dir, 0)
	j.put(9, raftlite.HardState{Term: 5, Vote: 1})
	j.sync(func(raftlite.GroupID) bool { return true })
	j.close()
	path := filepath.Join(dir, JournalName(0))
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{1, 2, 3, 4, 5, 6, 7}) // a record torn by a crash
	f.Close()
	j, err := openJournal(vfs.OS(), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.live[9] != (raftlite.HardState{Term: 5, Vote: 1}) || j.size != journalHeaderBytes+journalRecordBytes {
		t.Fatalf("after a torn tail: %v, size %d", j.live, j.size)
	}
	j.put(9, raftlite.HardState{Term: 6})
	j.sync(func(raftlite.GroupID) bool { return true })
	j.close()
	states, _ := LoadHardStates(vfs.OS(), dir)
	if states[9] != (raftlite.HardState{Term: 6}) {
		t.Fatalf("a record after the cut tail was lost: %v", states)
	}
}

func TestJournalCompactionKeepsOpenGroups(t *testing.T) {
	old := journalCompactBytes
	journalCompactBytes = 4 << 10
	t.Cleanup(func() { journalCompactBytes = old })
	dir := t.TempDir()
	j, _ := openJournal(vfs.OS(), dir, 0)
	compacted := false
	for term := int32(1); !compacted; term++ {
		if term > 1000 {
			t.Fatalf("never compacted: %d bytes", j.size)
		}
		before := j.size
		j.put(1, raftlite.HardState{Term: term})
		j.put(2, raftlite.HardState{Term: term, Vote: 1})
		j.sync(func(g raftlite.GroupID) bool { return g == 1 })
		compacted = j.size < before
	}
	if j.size != journalRecordBytes+journalHeaderBytes {
		t.Fatalf("compacted to %d bytes, want one record", j.size)
	}
	want := j.live[1]
	j.close()
	states, _ := LoadHardStates(vfs.OS(), dir)
	if states[1] != want || states[2] != (raftlite.HardState{}) {
		t.Fatalf("after compaction: %v (want group 1 at %v, group 2 gone)", states, want)
	}
}

// A replica keeps its term across a restart through the shard journal.
func TestReplicaTermSurvivesRestartWithJournal(t *testing.T) {
	dir := t.TempDir()
	var term int32
	for round := 0; round < 2; round++ {
		e := newEnv(t, vfs.OS(), dir)
		e.do(func() {
			states, err := LoadHardStates(vfs.OS(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.host.UseJournal(vfs.OS(), dir, states); err != nil {
				t.Fatal(err)
			}
		})
		r := e.open(0)
		var now int32
		e.do(func() { _, now = r.Route() })
		if now <= term {
			t.Fatalf("round %d: term %d, not above the previous %d", round, now, term)
		}
		term = now
		e.stop()
	}
	if _, err := os.Stat(filepath.Join(dir, "p0", hardStateFile)); !os.IsNotExist(err) {
		t.Fatalf("a per-replica state file was written beside the journal: %v", err)
	}
}

// A failed journal fsync must keep the vote's consequences in: the
// replica announces no leadership (no route, no message) while its term
// cannot be made durable, and leads once the journal can be written again
// (rewritten whole, since a file whose fsync failed is in an unknown
// state).
func TestJournalSyncFailureHoldsLeadership(t *testing.T) {
	mem := vfs.NewMem()
	var failing atomic.Bool
	mem.SetInjector(func(op vfs.Op, path string) error {
		if failing.Load() && op == vfs.OpSync && strings.Contains(path, "hardstate-") {
			return syscall.EIO
		}
		return nil
	})
	dir := "/data"
	e := newEnv(t, mem, dir)
	e.do(func() {
		if err := e.host.UseJournal(mem, dir, map[raftlite.GroupID]raftlite.HardState{}); err != nil {
			t.Error(err)
		}
	})
	failing.Store(true)
	var r *Replica
	e.do(func() {
		var err error
		r, err = e.host.Open(Config{DenseOffsets: true, FS: mem, Dir: dir + "/p0", Log: segment.Config{Fsync: segment.FsyncAlways, BatchBytesMax: 1 << 20},
			Topic: "t", TopicID: [16]byte{1}, Partition: 0, Self: 1, Replicas: []raftlite.NodeID{1}})
		if err != nil {
			t.Fatal(err)
		}
	})
	// Many election timeouts (10 ms ticks) pass with every sync failing.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		var lead raftlite.NodeID
		e.do(func() { lead, _ = r.Route() })
		if lead != raftlite.None {
			t.Fatal("the replica leads a term its journal could not make durable")
		}
		time.Sleep(5 * time.Millisecond)
	}
	failing.Store(false)
	e.waitPrimary(r)
	var term int32
	e.do(func() { _, term = r.Route() })
	e.stop()
	states, err := LoadHardStates(mem, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := states[GroupID(shard.PartitionKey([16]byte{1}, 0))]; got.Term < term || got.Vote != 1 {
		t.Fatalf("journal after recovery holds %+v, want term >= %d voted for 1", got, term)
	}
}
