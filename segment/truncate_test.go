package segment

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/segment/vfs"
)

// fill appends n batches of 2 records each (epoch from epochOf), flushes,
// and returns their bytes by base offset.
func fill(t *testing.T, l *Log, n int, epochOf func(i int) int32, tsOf func(i int) int64) map[int64][]byte {
	t.Helper()
	rng := newRNG(uint64(l.LogEndOffset()) + 99)
	out := map[int64][]byte{}
	for i := 0; i < n; i++ {
		b := makeBatch(rng, 2, 300, tsOf(i))
		base, _, err := l.AppendLeader(b, epochOf(i))
		if err != nil {
			t.Fatal(err)
		}
		out[base] = stamped(b, base, epochOf(i))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return out
}

func constEpoch(e int32) func(int) int32 { return func(int) int32 { return e } }
func constTs(ts int64) func(int) int64   { return func(int) int64 { return ts } }

func TestTruncateTo(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 700}
		l := openLog(t, fsys, dir, cfg, newEngine())
		want := fill(t, l, 60, func(i int) int32 { return int32(i / 20) }, constTs(1))
		segsBefore := l.SegmentCount()
		if err := l.TruncateTo(61); !errors.Is(err, ErrNotBatchBoundary) {
			t.Fatalf("inside a batch: %v", err)
		}
		if err := l.TruncateTo(121); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("past the end: %v", err)
		}
		// Cut into an earlier segment: later segments go, epochs follow.
		if err := l.TruncateTo(50); err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != 50 || l.WrittenOffset() != 49 || l.DurableOffset() != 49 {
			t.Fatalf("after truncate: LEO %d written %d durable %d", l.LogEndOffset(), l.WrittenOffset(), l.DurableOffset())
		}
		if l.SegmentCount() >= segsBefore {
			t.Fatalf("segments %d, were %d", l.SegmentCount(), segsBefore)
		}
		if got := l.Epochs(); len(got) != 2 || got[1] != (EpochEntry{1, 40}) {
			t.Fatalf("epochs after truncate: %v", got)
		}
		// Append again with a new epoch, reopen unclean-style: consistent.
		more := fill(t, l, 10, constEpoch(7), constTs(2))
		for k, v := range more {
			want[k] = v
		}
		for k := range want {
			if k >= 70 {
				delete(want, k)
			}
		}
		mustHave(t, l, want)
		if e, _ := l.TermAt(55); e != 7 {
			t.Fatalf("TermAt(55) = %d", e)
		}
		l.Close()
		l = openLog(t, fsys, dir, cfg, newEngine())
		defer l.Close()
		if l.LogEndOffset() != 70 || len(readAll(t, l)) != len(want) {
			t.Fatalf("reopened: LEO %d", l.LogEndOffset())
		}
		if got := l.Epochs(); len(got) != 3 || got[2] != (EpochEntry{7, 50}) {
			t.Fatalf("epochs after reopen: %v", got)
		}
		// Truncate everything.
		if err := l.TruncateTo(0); err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != 0 || l.SegmentCount() != 1 || l.LastEpoch() != -1 {
			t.Fatalf("empty: LEO %d, %d segments, epoch %d", l.LogEndOffset(), l.SegmentCount(), l.LastEpoch())
		}
	})
}

func TestReset(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	fill(t, l, 40, constEpoch(1), constTs(1))
	if err := l.Reset(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.DurableOffset() != 999 || l.SegmentCount() != 1 {
		t.Fatalf("after reset: start %d end %d durable %d segs %d", l.LogStartOffset(), l.LogEndOffset(), l.DurableOffset(), l.SegmentCount())
	}
	if _, err := l.Read(5, 100, 1<<40); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	rng := newRNG(1)
	b := stamped(makeBatch(rng, 1, 10, 1), 1000, 3)
	if err := l.AppendFollower(b); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1001 {
		t.Fatalf("reopened: [%d, %d)", l.LogStartOffset(), l.LogEndOffset())
	}
}

// On the OS's file system with io_uring the dropped segments' files are
// removed by the IO's background worker; the second run checks they are
// gone once the log is closed.
func TestRetention(t *testing.T) {
	t.Run("mem/pwrite", func(t *testing.T) { testRetention(t, vfs.NewMem(), "/d", NewPwriteEngine) })
	t.Run("os/default", func(t *testing.T) {
		newEngine := func() Engine { e, _ := osEngine(); return e }
		testRetention(t, vfs.OS(), t.TempDir()+"/d", newEngine)
	})
}

func testRetention(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
	now := int64(10_000)
	cfg := Config{SegmentBytes: 4096, RetentionBytes: 10_000, RetentionMs: -1, NowMs: func() int64 { return now }}
	l := openLog(t, fsys, dir, cfg, newEngine())
	fill(t, l, 100, constEpoch(1), func(i int) int64 { return int64(i) })
	size, segs := l.Size(), l.SegmentCount()
	// A span into the first segment must survive its deletion.
	spans, err := l.Read(0, 100, 1<<40)
	if err != nil || len(spans) != 1 {
		t.Fatal(err)
	}
	firstBytes, _ := spans[0].AppendTo(nil)

	// The limit holds retention back.
	res, err := l.ApplyRetention(-1)
	if err != nil || res.Segments != 0 {
		t.Fatalf("limit -1 deleted %+v, %v", res, err)
	}
	res, err = l.ApplyRetention(1 << 40)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments == 0 || l.Size() > 10_000+4096 || l.Size() != size-res.Bytes || l.SegmentCount() != segs-res.Segments {
		t.Fatalf("retention by size: %+v, size %d of %d", res, l.Size(), size)
	}
	if l.LogStartOffset() != res.LogStartOffset || l.LogStartOffset() == 0 {
		t.Fatalf("log start %d, result %+v", l.LogStartOffset(), res)
	}
	if _, err := l.Read(0, 100, 1<<40); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	again, err := spans[0].AppendTo(nil)
	if err != nil || !bytes.Equal(again, firstBytes) {
		t.Fatalf("span over a deleted segment: %v", err)
	}
	ReleaseSpans(spans)
	if e := l.Epochs(); len(e) != 1 || e[0].StartOffset != l.LogStartOffset() {
		t.Fatalf("epochs after retention: %v", e)
	}

	// By age: segments whose newest timestamp is old enough go.
	l.cfg.RetentionBytes, l.cfg.RetentionMs = -1, now-150
	res, err = l.ApplyRetention(1 << 40)
	if err != nil || res.Segments == 0 {
		t.Fatalf("retention by age: %+v, %v", res, err)
	}
	start := l.LogStartOffset()
	l.Close()
	names, _ := fsys.List(dir)
	for _, n := range names {
		if b, ok := parseSegName(n, logSuffix); ok && b < start {
			t.Fatalf("segment file %s below the log start %d is still there after close", n, start)
		}
	}
	l = openLog(t, fsys, dir, cfg, newEngine())
	defer l.Close()
	if l.LogStartOffset() != start {
		t.Fatalf("log start %d after reopen, want %d", l.LogStartOffset(), start)
	}
}

func TestEpochQueries(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/d", Config{}, NewPwriteEngine())
	defer l.Close()
	// Epochs 2 at [0,20), 5 at [20,40), 9 at [40,60).
	fill(t, l, 30, func(i int) int32 { return []int32{2, 5, 9}[i/10] }, constTs(1))
	for _, tc := range []struct {
		off  int64
		want int32
	}{{0, 2}, {19, 2}, {20, 5}, {39, 5}, {40, 9}, {59, 9}} {
		if got, err := l.TermAt(tc.off); err != nil || got != tc.want {
			t.Errorf("TermAt(%d) = %d, %v; want %d", tc.off, got, err, tc.want)
		}
	}
	if _, err := l.TermAt(60); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("TermAt(LEO): %v", err)
	}
	for _, tc := range []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{9, 9, 60}, // latest: the log end
		{5, 5, 40},
		{6, 5, 40}, // between: the floor epoch, where the next starts
		{3, 2, 20},
		{1, 1, 0}, // below every epoch
		{10, -1, -1},
		{-1, -1, -1},
	} {
		e, end := l.EndOffsetForEpoch(tc.epoch)
		if e != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tc.epoch, e, end, tc.wantEpoch, tc.wantEnd)
		}
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 500}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	// Timestamps rise by 10 per batch with a dip every 7th batch.
	ts := func(i int) int64 {
		if i%7 == 6 {
			return int64(i*10 - 100)
		}
		return int64(i * 10)
	}
	fill(t, l, 80, constEpoch(1), ts)
	check := func() {
		t.Helper()
		for _, tc := range []struct {
			ts   int64
			want int64
		}{{-1000, 0}, {0, 0}, {5, 2}, {10, 2}, {11, 4}, {500, 100}, {790, 158}} {
			got, err := l.OffsetForTimestamp(tc.ts)
			if err != nil || got != tc.want {
				t.Errorf("OffsetForTimestamp(%d) = %d, %v; want %d", tc.ts, got, err, tc.want)
			}
		}
		if _, err := l.OffsetForTimestamp(791); !errors.Is(err, ErrNotFound) {
			t.Errorf("after the newest timestamp: %v", err)
		}
	}
	check()
	l.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	check()
}

// TestEpochBeforeStart: after a Reset and after retention, the epoch of
// the offset just before the log start survives a reopen (consensus log
// matching needs it once the batch itself is gone).
func TestEpochBeforeStart(t *testing.T) {
	fs := vfs.NewMem()
	cfg := Config{SegmentBytes: 1 << 20, RetentionBytes: -1, RetentionMs: -1}
	l, err := OpenLog(fs, "p", cfg, NewIO(NewPwriteEngine()))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.EpochBeforeStart(); got != 0 {
		t.Fatalf("fresh log: %d", got)
	}
	if err := l.ResetWithEpoch(100, 7); err != nil {
		t.Fatal(err)
	}
	if got := l.EpochBeforeStart(); got != 7 {
		t.Fatalf("after reset: %d, want 7", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = OpenLog(fs, "p", cfg, NewIO(NewPwriteEngine()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, start := l.EpochBeforeStart(), l.LogStartOffset(); got != 7 || start != 100 {
		t.Fatalf("after reopen: epoch %d start %d, want 7 and 100", got, start)
	}
}

func TestEpochBeforeStartAfterRetention(t *testing.T) {
	fs := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096, RetentionBytes: 5000, RetentionMs: -1}
	l, err := OpenLog(fs, "p", cfg, NewIO(NewPwriteEngine()))
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 60, func(i int) int32 { return int32(1 + i/10) }, constTs(1))
	if _, err := l.ApplyRetention(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	start := l.LogStartOffset()
	if start == 0 {
		t.Fatal("retention deleted nothing")
	}
	// Batches are 2 records: batch i covers offsets 2i, 2i+1, epoch 1+i/10.
	want := int32(1 + (start-1)/2/10)
	if got := l.EpochBeforeStart(); got != want {
		t.Fatalf("epoch before start %d = %d, want %d", start, got, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = OpenLog(fs, "p", cfg, NewIO(NewPwriteEngine()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.EpochBeforeStart(); got != want || l.LogStartOffset() != start {
		t.Fatalf("after reopen: %d at start %d, want %d at %d", got, l.LogStartOffset(), want, start)
	}
}

// TestPreallocationGrowsWithTheSegment: one small append reserves one
// small step, not PreallocateBytes (10,000 idle partitions must not hold
// 10,000 × 8 MiB of disk).
func TestPreallocationGrowsWithTheSegment(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(vfs.OS(), dir, Config{Preallocate: PreallocKeepSize}, NewIO(NewPwriteEngine()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fill(t, l, 1, constEpoch(1), constTs(1))
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, fmt.Sprintf("%020d.log", 0)), &st); err != nil {
		t.Fatal(err)
	}
	if reserved := st.Blocks * 512; reserved > 2*preallocMinBytes {
		t.Fatalf("one small append reserved %d bytes", reserved)
	}
}

// TestWritebackSyncsInTheBackground: under never, WritebackBytes makes
// the durable offset advance without anyone asking for a sync; without it
// the durable offset stays where it was.
func TestWritebackSyncsInTheBackground(t *testing.T) {
	for _, wb := range []int64{0, 64 << 10} {
		l, err := OpenLog(vfs.NewMem(), "p", Config{Fsync: FsyncNever, WritebackBytes: wb, WriteBufferBytes: 16 << 10}, NewIO(NewPwriteEngine()))
		if err != nil {
			t.Fatal(err)
		}
		rng := newRNG(7)
		for i := 0; i < 100; i++ {
			if _, _, err := l.AppendLeader(makeBatch(rng, 2, 1000, 1), 1); err != nil {
				t.Fatal(err)
			}
			if err := l.io.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		l.io.Poll()
		if got := l.DurableOffset(); (wb > 0) != (got >= 0) {
			t.Errorf("WritebackBytes %d: durable offset %d after 100 appends", wb, got)
		}
		l.Close()
	}
}

// TestRetentionBelow: with unlimited bounds, ApplyRetentionBelow deletes
// the whole segments below the offset and keeps the one holding it, and
// the limit still holds it back.
func TestRetentionBelow(t *testing.T) {
	cfg := Config{SegmentBytes: 4096, RetentionBytes: -1, RetentionMs: -1, NowMs: func() int64 { return 10_000 }}
	l := openLog(t, vfs.NewMem(), "/d", cfg, NewPwriteEngine())
	fill(t, l, 100, constEpoch(1), func(i int) int64 { return int64(i) })
	if res, err := l.ApplyRetention(1 << 40); err != nil || res.Segments != 0 {
		t.Fatalf("unlimited bounds deleted %+v, %v", res, err)
	}
	segs := l.SegmentCount()
	if segs < 4 {
		t.Fatalf("%d segments, the test needs at least 4", segs)
	}
	below := int64(60)
	if res, err := l.ApplyRetentionBelow(10, below); err != nil || l.LogStartOffset() > 10 {
		t.Fatalf("the limit did not hold: %+v, %v, start %d", res, err, l.LogStartOffset())
	}
	res, err := l.ApplyRetentionBelow(1<<40, below)
	if err != nil || res.Segments == 0 {
		t.Fatalf("below %d: %+v, %v", below, res, err)
	}
	if start := l.LogStartOffset(); start > below || start == 0 {
		t.Fatalf("log start %d after deleting below %d", start, below)
	}
	// A second pass at the same offset deletes nothing more.
	if res, err := l.ApplyRetentionBelow(1<<40, below); err != nil || res.Segments != 0 {
		t.Fatalf("second pass deleted %+v, %v", res, err)
	}
	spans, err := l.Read(below, 1<<20, 1<<40)
	if err != nil || len(spans) == 0 {
		t.Fatalf("read at %d: %v", below, err)
	}
	ReleaseSpans(spans)
}
