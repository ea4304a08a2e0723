package segment

import (
	"testing"
	"time"

	"github.com/corestream/corestream/segment/vfs"
)

// A sync lands in the first bucket whose bound it does not exceed; the
// snapshot's buckets are cumulative and the last bound's count misses
// only the syncs slower than every bound.
func TestSyncStatsBuckets(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want int // first cumulative bucket counting it (len: none)
	}{
		{0, 0},
		{50 * time.Microsecond, 0},
		{51 * time.Microsecond, 1},
		{time.Millisecond, 3},
		{3276800 * time.Microsecond, len(SyncBucketBounds) - 1},
		{10 * time.Second, len(SyncBucketBounds)},
	}
	for _, c := range cases {
		var s SyncStats
		s.observe(c.d)
		snap := s.Snapshot()
		if snap.Count != 1 || snap.Sum != c.d {
			t.Errorf("%v: count %d sum %v", c.d, snap.Count, snap.Sum)
		}
		for i, n := range snap.Cumulative {
			if want := uint64(0); i >= c.want {
				want = 1
				if n != want {
					t.Errorf("%v: bucket ≤%v counts %d, want 1", c.d, SyncBucketBounds[i], n)
				}
			} else if n != want {
				t.Errorf("%v: bucket ≤%v counts %d, want 0", c.d, SyncBucketBounds[i], n)
			}
		}
	}
	var a, b SyncStats
	a.observe(time.Millisecond)
	b.observe(time.Minute)
	sum := a.Snapshot()
	sum.Add(b.Snapshot())
	if sum.Count != 2 || sum.Cumulative[len(SyncBucketBounds)-1] != 1 || sum.Sum != time.Minute+time.Millisecond {
		t.Errorf("added snapshots: %+v", sum)
	}
}

// The IO times the syncs its engine runs and nothing else: appends under
// FsyncNever are not timed, Sync is, and under FsyncAlways every write
// the log submits carries a timed sync.
func TestSyncStatsCountsSyncs(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		rng := newRNG(7)
		never := openLog(t, fsys, dir+"-never", Config{Fsync: FsyncNever, Preallocate: PreallocKeepSize}, newEngine())
		defer never.Close()
		for range 5 {
			if _, _, err := never.AppendLeader(makeBatch(rng, 1, 100, 1), 0); err != nil {
				t.Fatal(err)
			}
			mustFlush(t, never)
		}
		if got := never.IO().SyncStats().Snapshot().Count; got != 0 {
			t.Fatalf("FsyncNever: %d syncs timed after appends alone", got)
		}
		if err := never.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := never.IO().SyncStats().Snapshot().Count; got == 0 {
			t.Fatal("FsyncNever: Sync was not timed")
		}

		always := openLog(t, fsys, dir+"-always", Config{Fsync: FsyncAlways, Preallocate: PreallocKeepSize}, newEngine())
		defer always.Close()
		for range 5 {
			if _, _, err := always.AppendLeader(makeBatch(rng, 1, 100, 1), 0); err != nil {
				t.Fatal(err)
			}
			mustFlush(t, always)
		}
		snap := always.IO().SyncStats().Snapshot()
		if snap.Count < 5 || snap.Sum <= 0 || snap.Cumulative[len(SyncBucketBounds)-1] > snap.Count {
			t.Fatalf("FsyncAlways, 5 flushed appends: %+v", snap)
		}
	})
}

// A sealed segment's sync on the background worker is timed into
// BackgroundSyncStats, apart from the engine's: under FsyncNever with
// the io_uring engine (whose completions wake the worker's owner) a roll
// seals in the background, and the appends alone time no engine sync.
func TestSyncStatsBackgroundSeal(t *testing.T) {
	for _, ef := range testEngines {
		if ef.name != "io_uring" {
			continue
		}
		dir := t.TempDir() + "/topic-0"
		l := openLog(t, vfs.OS(), dir, Config{Fsync: FsyncNever, SegmentBytes: 4096, Preallocate: PreallocKeepSize}, ef.new(t))
		defer l.Close()
		if l.io.bg == nil {
			t.Skip("the engine completes inside Submit: no background worker")
		}
		rng := newRNG(3)
		for l.SegmentCount() < 3 {
			if _, _, err := l.AppendLeader(makeBatch(rng, 1, 1000, 1), 0); err != nil {
				t.Fatal(err)
			}
			mustFlush(t, l)
		}
		if err := l.drain(); err != nil {
			t.Fatal(err)
		}
		bg := l.IO().BackgroundSyncStats().Snapshot()
		if bg.Count < 2 || bg.Sum <= 0 {
			t.Fatalf("two sealed segments: %d background syncs timed (%v)", bg.Count, bg.Sum)
		}
		if got := l.IO().SyncStats().Snapshot().Count; got != 0 {
			t.Fatalf("the engine's stats counted %d syncs; the seals ran on the worker", got)
		}
	}
}
