package segment

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

func TestAppendReadRoundTrip(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		rng := newRNG(1)
		l := openLog(t, fsys, dir, Config{SegmentBytes: 64 << 10, IndexIntervalBytes: 512}, newEngine())
		want := map[int64][]byte{}
		for i := 0; i < 300; i++ {
			records := 1 + rng.IntN(5)
			b := makeBatch(rng, records, rng.IntN(2000), int64(1000+i))
			leo := l.LogEndOffset()
			base, last, err := l.AppendLeader(b, 3)
			if err != nil {
				t.Fatal(err)
			}
			if base != leo || last-base != int64(records-1) || l.LogEndOffset() != last+1 {
				t.Fatalf("append at LEO %d got [%d, %d] for %d records", leo, base, last, records)
			}
			want[base] = stamped(b, base, 3)
			if i%7 == 0 {
				mustFlush(t, l)
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if l.SegmentCount() < 3 {
			t.Fatalf("expected several segments, got %d", l.SegmentCount())
		}
		if l.DurableOffset() != l.LogEndOffset()-1 || l.WrittenOffset() != l.LogEndOffset()-1 {
			t.Fatalf("watermarks %d/%d, LEO %d", l.WrittenOffset(), l.DurableOffset(), l.LogEndOffset())
		}
		mustHave(t, l, want)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Clean reopen: nothing scanned, same contents.
		l = openLog(t, fsys, dir, Config{SegmentBytes: 64 << 10, IndexIntervalBytes: 512}, newEngine())
		if r := l.Recovery(); !r.Clean || r.ScannedBytes != 0 {
			t.Fatalf("clean reopen scanned: %v", r)
		}
		mustHave(t, l, want)
		l.Close()
	})
}

func TestReadBounds(t *testing.T) {
	rng := newRNG(2)
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "/d", Config{SegmentBytes: 8 << 10, IndexIntervalBytes: 256}, NewPwriteEngine())
	defer l.Close()
	var bases []int64
	var sizes []int
	for i := 0; i < 100; i++ {
		b := makeBatch(rng, 3, 200, 5)
		base, _, err := l.AppendLeader(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, base)
		sizes = append(sizes, len(b))
	}
	// Nothing is readable before the write completes (rolls have written
	// the sealed segments, not the active one's buffer).
	if l.WrittenOffset() >= l.LogEndOffset()-1 {
		t.Fatalf("written %d before any flush, LEO %d", l.WrittenOffset(), l.LogEndOffset())
	}
	spans, err := l.Read(0, 1<<30, 1<<40)
	if err != nil || len(spans) == 0 || spans[len(spans)-1].LastOffset != l.WrittenOffset() {
		t.Fatalf("read before flush: %+v, %v; written %d", spans, err, l.WrittenOffset())
	}
	ReleaseSpans(spans)
	mustFlush(t, l)
	total := func(spans []Span) (n int64) {
		for _, s := range spans {
			n += s.Len
		}
		return n
	}
	for _, tc := range []struct {
		name            string
		off             int64
		maxBytes        int
		upTo            int64
		wantFirst       int64
		wantLast        int64
		wantBytesAtMost int64
	}{
		{"from start, small budget returns one batch", 0, 1, 1 << 40, 0, 2, int64(sizes[0])},
		{"middle of a batch starts at its base", 4, 1 << 20, 1 << 40, 3, 299, 1 << 20},
		{"upTo inside a batch excludes it", 0, 1 << 20, 10, 0, 8, 1 << 20},
		{"upTo below the batch returns nothing", 4, 1 << 20, 2, -1, -1, 0},
		{"budget of three batches", 30, 3 * sizes[0], 1 << 40, 30, 38, int64(3 * sizes[0])},
		{"at the end", 300, 100, 1 << 40, -1, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans, err := l.Read(tc.off, tc.maxBytes, tc.upTo)
			if err != nil {
				t.Fatal(err)
			}
			defer ReleaseSpans(spans)
			if tc.wantFirst < 0 {
				if len(spans) != 0 {
					t.Fatalf("got %d spans, want none", len(spans))
				}
				return
			}
			if len(spans) == 0 {
				t.Fatal("no spans")
			}
			if spans[0].FirstOffset != tc.wantFirst || spans[len(spans)-1].LastOffset != tc.wantLast {
				t.Fatalf("offsets %d..%d, want %d..%d", spans[0].FirstOffset, spans[len(spans)-1].LastOffset, tc.wantFirst, tc.wantLast)
			}
			if n := total(spans); n > tc.wantBytesAtMost {
				t.Fatalf("%d bytes, want at most %d", n, tc.wantBytesAtMost)
			}
			for i := 1; i < len(spans); i++ {
				if spans[i].FirstOffset != spans[i-1].LastOffset+1 {
					t.Fatalf("spans not contiguous: %+v", spans)
				}
			}
		})
	}
	for _, off := range []int64{-1, 301} {
		if _, err := l.Read(off, 100, 1<<40); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read(%d): %v, want ErrOffsetOutOfRange", off, err)
		}
	}
	_ = bases
}

func TestWatermarksByPolicy(t *testing.T) {
	now := int64(1_000_000)
	clock := func() int64 { return now }
	for _, tc := range []struct {
		cfg Config
		// durable after the appends and one Flush
		wantDurable func(leo int64) int64
	}{
		{Config{Fsync: FsyncAlways}, func(leo int64) int64 { return leo - 1 }},
		{Config{Fsync: FsyncNever}, func(int64) int64 { return -1 }},
		{Config{Fsync: FsyncMessages, FsyncMessages: 1000}, func(int64) int64 { return -1 }},
		{Config{Fsync: FsyncMessages, FsyncMessages: 5}, func(leo int64) int64 { return leo - 1 }},
		{Config{Fsync: FsyncInterval, FsyncIntervalMs: 100}, func(int64) int64 { return -1 }},
	} {
		t.Run(tc.cfg.Fsync.String(), func(t *testing.T) {
			forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
				rng := newRNG(3)
				cfg := tc.cfg
				cfg.NowMs = clock
				l := openLog(t, fsys, dir, cfg, newEngine())
				defer l.Close()
				for i := 0; i < 3; i++ {
					if _, _, err := l.AppendLeader(makeBatch(rng, 2, 100, 1), 1); err != nil {
						t.Fatal(err)
					}
				}
				if l.WrittenOffset() != -1 || l.DurableOffset() != -1 {
					t.Fatalf("before flush: written %d durable %d", l.WrittenOffset(), l.DurableOffset())
				}
				mustFlush(t, l)
				if l.WrittenOffset() != l.LogEndOffset()-1 {
					t.Fatalf("written %d, LEO %d", l.WrittenOffset(), l.LogEndOffset())
				}
				if got, want := l.DurableOffset(), tc.wantDurable(l.LogEndOffset()); got != want {
					t.Fatalf("durable %d, want %d", got, want)
				}
				if cfg.Fsync == FsyncInterval {
					now += 100
					mustFlush(t, l)
					if l.DurableOffset() != l.LogEndOffset()-1 {
						t.Fatalf("interval elapsed, durable %d, LEO %d", l.DurableOffset(), l.LogEndOffset())
					}
				}
				if err := l.Sync(); err != nil || l.DurableOffset() != l.LogEndOffset()-1 {
					t.Fatalf("Sync: %v, durable %d", err, l.DurableOffset())
				}
			})
		})
	}
}

func TestNotifyAndGroupCommit(t *testing.T) {
	e := &countingEngine{Engine: NewPwriteEngine()}
	d := NewIO(e)
	var notified []int64
	d.SetNotify(func(l *Log) { notified = append(notified, l.DurableOffset()) })
	l, err := OpenLog(vfs.NewMem(), "/d", Config{PreallocateBytes: -1}, d)
	if err != nil {
		t.Fatal(err)
	}
	rng := newRNG(4)
	for i := 0; i < 10; i++ {
		if _, _, err := l.AppendLeader(makeBatch(rng, 1, 1000, 1), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if e.writes != 1 || e.syncs != 1 {
		t.Fatalf("ten appends, one flush: %d writes with %d syncs, want 1 and 1", e.writes, e.syncs)
	}
	if len(notified) != 1 || notified[0] != 9 {
		t.Fatalf("notified %v, want [9]", notified)
	}
	l.Close()
	d.Close()
}

type countingEngine struct {
	Engine
	writes, syncs int
}

func (e *countingEngine) Write(f vfs.File, buf []byte, off int64, sync bool, token uint64) error {
	e.writes++
	if sync {
		e.syncs++
	}
	return e.Engine.Write(f, buf, off, sync, token)
}

func TestFollowerAppend(t *testing.T) {
	rng := newRNG(5)
	l := openLog(t, vfs.NewMem(), "/d", Config{}, NewPwriteEngine())
	defer l.Close()
	b0 := stamped(makeBatch(rng, 3, 50, 1), 0, 2)
	b1 := stamped(makeBatch(rng, 2, 50, 1), 3, 2)
	b2 := stamped(makeBatch(rng, 1, 50, 1), 5, 4)
	if err := l.AppendFollower(append(append(bytes.Clone(b0), b1...), b2...)); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 6 || l.LastEpoch() != 4 {
		t.Fatalf("LEO %d, last epoch %d", l.LogEndOffset(), l.LastEpoch())
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"gap", stamped(makeBatch(rng, 1, 10, 1), 7, 4), ErrNotContiguous},
		{"overlap", stamped(makeBatch(rng, 1, 10, 1), 5, 4), ErrNotContiguous},
		{"stale epoch", stamped(makeBatch(rng, 1, 10, 1), 6, 3), ErrStaleEpoch},
		{"second batch not contiguous", append(stamped(makeBatch(rng, 1, 10, 1), 6, 4), stamped(makeBatch(rng, 1, 10, 1), 9, 4)...), ErrNotContiguous},
		{"trailing garbage", append(stamped(makeBatch(rng, 1, 10, 1), 6, 4), 1, 2, 3), ErrInvalidBatch},
	} {
		if err := l.AppendFollower(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if l.LogEndOffset() != 6 {
			t.Fatalf("%s: a refused append moved the LEO to %d", tc.name, l.LogEndOffset())
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, l)
	if !bytes.Equal(got[0], b0) || !bytes.Equal(got[3], b1) || !bytes.Equal(got[5], b2) {
		t.Fatal("follower batches not stored unchanged")
	}
}

func TestRefusesBadBatches(t *testing.T) {
	rng := newRNG(6)
	l := openLog(t, vfs.NewMem(), "/d", Config{BatchBytesMax: 4096}, NewPwriteEngine())
	defer l.Close()
	good := makeBatch(rng, 2, 100, 1)
	flip := bytes.Clone(good)
	flip[len(flip)-1] ^= 1
	badMagic := bytes.Clone(good)
	badMagic[16] = 1
	for _, tc := range []struct {
		name  string
		b     []byte
		epoch int32
		want  error
	}{
		{"checksum", flip, 1, batch.ErrChecksum},
		{"magic", badMagic, 1, batch.ErrCorrupt},
		{"short", good[:40], 1, batch.ErrShort},
		{"empty", nil, 1, batch.ErrShort},
		{"too large", makeBatch(rng, 1, 5000, 1), 1, ErrBatchTooLarge},
		{"negative epoch", good, -1, ErrStaleEpoch},
	} {
		_, _, err := l.AppendLeader(tc.b, tc.epoch)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if tc.want != ErrBatchTooLarge && tc.want != ErrStaleEpoch && !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("%s: %v does not wrap ErrInvalidBatch", tc.name, err)
		}
	}
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatal("a refused batch reached the log")
	}
	if _, _, err := l.AppendLeader(good, 5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.AppendLeader(good, 4); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("epoch going back: %v", err)
	}
}

// TestRollSealsInBackground: under never, with an engine that signals
// completions, a roll hands the seal (trim, fdatasync, directory sync,
// index files) to the IO's worker. Once reaped, every sealed segment's
// file is trimmed to its data and its index files load; a reopened log
// reads everything back.
func TestRollSealsInBackground(t *testing.T) {
	e, err := osEngine()
	if err != nil {
		t.Skipf("no io_uring here (%v): rolls seal on the owner's thread", err)
	}
	dir := t.TempDir() + "/topic-0"
	cfg := Config{Fsync: FsyncNever, SegmentBytes: 1 << 20}
	l := openLog(t, vfs.OS(), dir, cfg, e)
	if l.io.bg == nil {
		t.Fatal("an engine with a completion descriptor must get a background worker")
	}
	rng := newRNG(7)
	want := map[int64][]byte{}
	for i := 0; i < 400; i++ {
		b := makeBatch(rng, 4, 16<<10, int64(1000+i))
		base, _, err := l.AppendLeader(b, 1)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		want[base] = stamped(b, base, 1)
		if i%8 == 0 {
			mustFlush(t, l)
		}
	}
	mustFlush(t, l)
	if len(l.segs) < 4 {
		t.Fatalf("%d segments: the test meant to roll several times", len(l.segs))
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		fi, err := os.Stat(l.path(segName(s.base, logSuffix)))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != s.size {
			t.Fatalf("sealed segment %d is %d bytes on disk, holds %d: the preallocated tail was not trimmed", s.base, fi.Size(), s.size)
		}
		ib, err1 := readWhole(vfs.OS(), l.path(segName(s.base, indexSuffix)))
		tb, err2 := readWhole(vfs.OS(), l.path(segName(s.base, timeIndexSuffix)))
		x := newSegIndex()
		if err1 == nil && err2 == nil {
			err1 = decodeIndex(ib, s.base, s.size, s.last, x)
			err2 = decodeTimeIndex(tb, s.base, s.size, s.last, x)
		}
		if err1 != nil || err2 != nil {
			t.Fatalf("sealed segment %d: index files: %v, %v", s.base, err1, err2)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	e2, _ := osEngine()
	l2 := openLog(t, vfs.OS(), dir, cfg, e2)
	defer l2.Close()
	mustHave(t, l2, want)
}

// TestAppendLeaderCheckedSkipsOnlyTheCRC: AppendLeaderChecked stores a
// batch as AppendLeader does and refuses what AppendLeader refuses, except
// a wrong CRC (the caller checked it; a second check costs a tenth of the
// produce path's CPU per message).
func TestAppendLeaderCheckedSkipsOnlyTheCRC(t *testing.T) {
	rng := newRNG(7)
	l := openLog(t, vfs.NewMem(), "/d", Config{BatchBytesMax: 4096}, NewPwriteEngine())
	defer l.Close()
	good := makeBatch(rng, 2, 100, 1)
	badMagic := bytes.Clone(good)
	badMagic[16] = 1
	for _, tc := range []struct {
		name  string
		b     []byte
		epoch int32
		want  error
	}{
		{"magic", badMagic, 1, batch.ErrCorrupt},
		{"short", good[:40], 1, batch.ErrShort},
		{"too large", makeBatch(rng, 1, 5000, 1), 1, ErrBatchTooLarge},
		{"negative epoch", good, -1, ErrStaleEpoch},
	} {
		if _, _, err := l.AppendLeaderChecked(tc.b, tc.epoch); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	base, last, err := l.AppendLeaderChecked(good, 1)
	if err != nil || base != 0 || last != 1 {
		t.Fatalf("AppendLeaderChecked = %d, %d, %v", base, last, err)
	}
	flip := bytes.Clone(good)
	flip[len(flip)-1] ^= 1
	if _, _, err := l.AppendLeaderChecked(flip, 1); err != nil {
		t.Fatalf("a wrong CRC is the caller's to check: %v", err)
	}
	mustFlush(t, l)
	got := readAllUnchecked(t, l)
	if !bytes.Equal(got, append(stamped(good, 0, 1), stamped(flip, 2, 1)...)) {
		t.Fatal("the log does not hold the two batches as appended")
	}
}

// readAllUnchecked returns the log's bytes from its start to its written
// offset, as stored.
func readAllUnchecked(t *testing.T, l *Log) []byte {
	t.Helper()
	spans, err := l.Read(l.LogStartOffset(), 1<<20, l.WrittenOffset())
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, sp := range spans {
		if out, err = sp.AppendTo(out); err != nil {
			t.Fatal(err)
		}
	}
	ReleaseSpans(spans)
	return out
}

// TestSetSegmentRoll: a running log takes new roll bounds (a topic's
// segment.bytes changed at run time): lowered below the active segment's
// size, the next append rolls, and appends go on rolling at the new
// bound; out-of-range bounds are ErrConfig and change nothing; every
// batch reads back after a reopen.
func TestSetSegmentRoll(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		cfg := Config{Fsync: FsyncNever}
		l := openLog(t, fsys, dir, cfg, newEngine())
		rng := newRNG(3)
		want := map[int64][]byte{}
		appendN := func(n int) {
			for i := 0; i < n; i++ {
				b := makeBatch(rng, 2, 1<<10, int64(1000+len(want)))
				base, _, err := l.AppendLeader(b, 1)
				if err != nil {
					t.Fatal(err)
				}
				want[base] = stamped(b, base, 1)
			}
		}
		appendN(8)
		if l.SegmentCount() != 1 {
			t.Fatalf("%d segments under the default 1 GiB bound", l.SegmentCount())
		}
		for _, bad := range [][2]int64{{1023, 0}, {SegmentBytesMax + 1, 0}, {4096, -2}} {
			if err := l.SetSegmentRoll(bad[0], bad[1]); !errors.Is(err, ErrConfig) {
				t.Fatalf("SetSegmentRoll(%d, %d): %v, want ErrConfig", bad[0], bad[1], err)
			}
		}
		if b, ms := l.SegmentRoll(); b != SegmentBytesDefault || ms != SegmentMsDefault {
			t.Fatalf("after refused changes the roll is %d bytes, %d ms", b, ms)
		}
		if err := l.SetSegmentRoll(8<<10, -1); err != nil {
			t.Fatal(err)
		}
		appendN(24)
		mustFlush(t, l)
		if n := l.SegmentCount(); n < 4 {
			t.Fatalf("%d segments after 24 KiB-and-more at an 8 KiB bound", n)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2 := openLog(t, fsys, dir, cfg, newEngine())
		defer l2.Close()
		mustHave(t, l2, want)
	})
}
