package partition

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
)

// TestLostCommittedFencesReplica: under storage.fsync = "never" a power
// loss on two of three nodes takes entries the group committed; the two
// elect a primary whose log lacks them and write new entries at their
// offsets. The third replica, which kept running and knows them
// committed, used to fail raftlite's assertion (a panic of the whole
// node). Now it fences itself: it keeps its log, answers STORAGE_ERROR
// naming the partition, the policy and what to do, refuses to open again
// until its directory is removed, and then copies the partition from its
// peers. The group keeps serving throughout.
func TestLostCommittedFencesReplica(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		if lostCommittedRun(t, seed) {
			return
		}
	}
	t.Fatal("no seed of 1..20 lost committed entries on both crashed nodes")
}

// lostCommittedRun runs the story with the power loss drawn by seed; it
// reports false when the crashed nodes kept every committed entry (the
// story cannot happen), true when it ran.
func lostCommittedRun(t *testing.T, seed uint64) bool {
	tg := newTestGroup(t)
	mems := map[raftlite.NodeID]*vfs.MemFS{1: vfs.NewMem(), 2: vfs.NewMem(), 3: vfs.NewMem()}
	tg.fsOf = map[raftlite.NodeID]vfs.FS{}
	for id, m := range mems {
		tg.fsOf[id] = m
	}
	all := []raftlite.NodeID{1, 2, 3}
	for _, id := range all {
		tg.start(id, all, nil)
	}
	p := tg.primary()
	for i := 0; i < 30; i++ {
		if res := produceAt(t, p, fmt.Sprintf("a%d", i)); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	end := int64(0)
	p.do(t, func() { end = p.r.log.LogEndOffset() })
	for _, id := range all {
		tg.waitFor(tg.member(id), "every entry committed", func(r *Replica) bool {
			return r.CommitEnd() == end && r.log.LogEndOffset() == end
		})
	}
	// The survivor is a follower; the primary and the other follower lose
	// power (every file operation fails from then on), then their file
	// systems keep what the seed draws of what was not synced.
	var h raftlite.NodeID
	var crashed []raftlite.NodeID
	for _, id := range all {
		if id != p.id && h == 0 {
			h = id
		} else {
			crashed = append(crashed, id)
		}
	}
	tg.setDrop(func(from raftlite.NodeID, m raftlite.Message) bool { return from == h || m.To == h })
	for _, id := range crashed {
		mems[id].SetInjector(func(vfs.Op, string) error { return errPoweredOff })
		m := tg.member(id)
		tg.mu.Lock()
		delete(tg.members, id)
		tg.mu.Unlock()
		_ = m.sh.Do(func(*shard.Shard) { _ = m.host.Close(nil) })
		_ = m.g.Stop()
		mems[id].Crash(seed)
	}
	kept := int64(0)
	for _, id := range crashed {
		m := tg.start(id, all, nil)
		m.do(t, func() { kept = max(kept, m.r.log.LogEndOffset()) })
	}
	if kept >= end {
		t.Logf("seed %d: the crashed nodes kept offsets up to %d of %d: nothing committed lost", seed, kept, end)
		for _, id := range all {
			tg.stop(id)
		}
		return false
	}
	// The crashed pair elects a primary and writes at the lost offsets.
	np := tg.primary()
	if np.id == h {
		t.Fatalf("the isolated survivor %d leads", h)
	}
	for i := 0; i < 3; i++ {
		if res := produceAt(t, np, fmt.Sprintf("b%d", i)); res.Err != nil {
			t.Fatalf("produce b%d: %v", i, res.Err)
		}
	}
	t.Logf("seed %d: the crashed nodes kept offsets below %d of %d; node %d leads them", seed, kept, end, np.id)

	// Heal: the survivor gets appends that would replace committed offsets.
	hm := tg.member(h)
	tg.setDrop(nil)
	// The host closes a fenced replica in a task of its own, after the
	// round that fenced it: wait for both.
	tg.waitFor(hm, "fenced and closed", func(r *Replica) bool {
		return errors.Is(r.failure, ErrFenced) && hm.host.Get(hm.r.key) == nil
	})
	hm.do(t, func() {
		if got := hm.r.log.LogEndOffset(); got != end {
			t.Errorf("the fenced replica's log ends at %d, want %d (untouched)", got, end)
		}
		if hm.host.Get(hm.r.key) != nil {
			t.Error("the fenced replica is still on its host")
		}
	})
	var fenced error
	hm.do(t, func() { fenced = hm.r.failure })
	dir := tg.dir(h)
	for _, want := range []string{"partition t/0 on node", `storage.fsync = "never"`, "remove", dir, "would replace committed offset"} {
		if !strings.Contains(fenced.Error(), want) {
			t.Errorf("the fence says %q; want it to say %q", fenced, want)
		}
	}
	// The group keeps serving with the other two.
	if res := produceAt(t, np, "c"); res.Err != nil {
		t.Fatalf("produce after the fence: %v", res.Err)
	}

	// Restarted, the survivor refuses to open, saying the same.
	tg.stop(h)
	g, err := shard.NewGroup(shard.Config{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	sh := g.Shard(0)
	var openErr error
	_ = sh.Do(func(*shard.Shard) {
		host, err := NewHost(sh, testEngine(mems[h]), groupTickEvery, 0)
		if err != nil {
			openErr = err
			return
		}
		_, openErr = host.Open(Config{DenseOffsets: true, FS: mems[h], Dir: dir, Log: tg.logCfg, Topic: "t", TopicID: [16]byte{1},
			Self: h, Replicas: all, Send: tg.send})
		host.Close(nil)
	})
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(openErr, ErrFenced) || !strings.Contains(openErr.Error(), `storage.fsync = "never"`) {
		t.Fatalf("reopening the fenced replica: %v, want ErrFenced naming the policy", openErr)
	}
	t.Logf("refused: %v", openErr)

	// Its directory removed, it copies the partition from its peers.
	removeTree(t, mems[h], dir)
	hm = tg.start(h, all, nil)
	var want int64
	np.do(t, func() { want = np.r.HighWatermark() })
	tg.waitFor(hm, "caught up", func(r *Replica) bool { return r.HighWatermark() >= want })
	if got, exp := tg.committed(hm), tg.committed(np); fmt.Sprint(got) != fmt.Sprint(exp) {
		t.Errorf("the copied replica holds %v, the primary %v", got, exp)
	}
	return true
}

// produceAt produces one record v on member m and waits for the answer.
func produceAt(t *testing.T, m *testMember, v string) ProduceResult {
	t.Helper()
	out := make(chan ProduceResult, 1)
	b := mkBatchValue(t, v)
	m.do(t, func() {
		m.r.Produce(&ProduceArgs{Generation: GenerationUnknown, Records: b, Timeout: 10 * time.Second},
			func(res ProduceResult) { out <- res })
	})
	select {
	case res := <-out:
		return res
	case <-time.After(15 * time.Second):
		t.Fatal("produce not answered within 15 s")
	}
	return ProduceResult{}
}

// removeTree removes dir and everything under it from fsys.
func removeTree(t *testing.T, fsys vfs.FS, dir string) {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if sub, err := fsys.List(p); err == nil && sub != nil {
			removeTree(t, fsys, p)
			continue
		}
		if err := fsys.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	_ = fsys.Remove(dir)
}

// The fence's message names every path the operator must remove: the
// replica's directory, and state derived from its log kept elsewhere
// (the metadata group's snapshot).
func TestFenceMessageNamesWhatToRemove(t *testing.T) {
	cause := errors.New("would replace committed offset 7")
	for _, tc := range []struct {
		also []string
		want []string
	}{
		{nil, []string{"remove (or move away, to keep the lost entries) the replica's directory /d/t-0;"}},
		{[]string{"/d/metadata-snapshot.checkpoint"},
			[]string{"the replica's directory /d/t-0 and /d/metadata-snapshot.checkpoint;"}},
	} {
		cfg := &Config{Dir: "/d/t-0", FenceAlsoRemove: tc.also, Topic: "t", Self: 2, Log: segment.Config{Fsync: segment.FsyncNever}}
		msg := fenceMessage(cfg, cause)
		for _, w := range append(tc.want, "partition t/0 on node 2", `storage.fsync = "never"`, cause.Error()) {
			if !strings.Contains(msg, w) {
				t.Errorf("also %v: the message lacks %q: %s", tc.also, w, msg)
			}
		}
	}
}
