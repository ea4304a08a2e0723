package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/segment/vfs"
)

// abandon drops a log as a crashed process would: no sync, no clean
// record; only the memory it mapped is given back.
func abandon(l *Log) {
	l.closed = true
	if l.cur != nil {
		l.io.pool.put(l.cur)
		l.cur = nil
	}
	l.io.pool.close()
}

// appendRaw writes b at pos of file name (pos < 0: at its end) and syncs.
func appendRaw(t *testing.T, fsys vfs.FS, name string, pos int64, b []byte) {
	t.Helper()
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if pos < 0 {
		pos, _ = f.Size()
	}
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
	f.Sync()
}

func TestRecoverTornTail(t *testing.T) {
	rng := newRNG(7)
	for _, tc := range []struct {
		name     string
		tail     func(next []byte) []byte
		zeroTail bool
	}{
		{"half a batch", func(next []byte) []byte { return next[:len(next)/2] }, false},
		{"bad checksum", func(next []byte) []byte { c := bytes.Clone(next); c[len(c)-1] ^= 1; return c }, false},
		{"wrong offset", func(next []byte) []byte { return stamped(next, 500, 1) }, false},
		{"epoch going back", func(next []byte) []byte { return stamped(next, 20, 0) }, false},
		{"zeros", func([]byte) []byte { return make([]byte, 10000) }, true},
		{"a few bytes", func([]byte) []byte { return []byte{1, 2, 3} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			l := openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
			want := fill(t, l, 10, constEpoch(1), constTs(1))
			end := l.active().size
			abandon(l)
			next := stamped(makeBatch(rng, 1, 100, 1), 20, 1)
			appendRaw(t, fsys, "/d/"+segName(0, logSuffix), end, tc.tail(next))
			l = openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
			defer l.Close()
			r := l.Recovery()
			if r.Clean || r.TruncatedBytes == 0 || r.ZeroTail != tc.zeroTail || r.DataDropped() == tc.zeroTail {
				t.Fatalf("report: %v", r)
			}
			if l.LogEndOffset() != 20 || len(readAll(t, l)) != len(want) {
				t.Fatalf("LEO %d after recovery", l.LogEndOffset())
			}
			if !strings.Contains(r.String(), "truncated") {
				t.Fatalf("report text: %s", r)
			}
			// The log goes on from there.
			fill(t, l, 1, constEpoch(1), constTs(1))
		})
	}
}

func TestRecoverRebuildsIndexesAndEpochs(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 600}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	want := fill(t, l, 50, func(i int) int32 { return int32(i / 10) }, constTs(1))
	epochs := l.Epochs()
	l.Close()
	// Lose one sealed segment's index, damage another's, lose the epochs.
	if err := fsys.Remove("/d/" + segName(0, indexSuffix)); err != nil {
		t.Fatal(err)
	}
	second := l.segsBaseForTest(1)
	f, _ := fsys.OpenReadWrite("/d/" + segName(second, timeIndexSuffix))
	f.WriteAt([]byte{0xff}, 20)
	f.Close()
	fsys.Remove("/d/" + epochFile)
	fsys.Create("/d/" + logStartFile + ".tmp")

	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	r := l.Recovery()
	if !r.Clean || !r.EpochsRebuilt {
		t.Fatalf("report: %v", r)
	}
	if got := l.Epochs(); len(got) != len(epochs) {
		t.Fatalf("rebuilt epochs %v, want %v", got, epochs)
	}
	got := readAll(t, l)
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Fatalf("batch %d differs", k)
		}
	}
	if l.Recovery().IndexesRebuilt != 2 {
		t.Fatalf("indexes rebuilt: %d, want 2", l.Recovery().IndexesRebuilt)
	}
	names, _ := fsys.List("/d")
	for _, n := range names {
		if checkpoint.IsTemp(n) {
			t.Fatalf("temporary file %s left", n)
		}
	}
}

// segsBaseForTest returns the base of segment i (the log may be closed).
func (l *Log) segsBaseForTest(i int) int64 {
	names, _ := l.fs.List(l.dir)
	var bases []int64
	for _, n := range names {
		if b, ok := parseSegName(n, logSuffix); ok {
			bases = append(bases, b)
		}
	}
	return bases[i]
}

func TestRecoverFinishesInterruptedRetentionAndReset(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	fill(t, l, 50, constEpoch(1), constTs(1))
	third := l.segs[2].base
	l.Close()
	// A retention that persisted its new start and crashed before deleting.
	if err := checkpointLogStart(fsys, third); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	if l.LogStartOffset() != third || l.segs[0].base != third {
		t.Fatalf("start %d, first segment %d, want %d", l.LogStartOffset(), l.segs[0].base, third)
	}
	if len(l.Recovery().RemovedFiles) == 0 {
		t.Fatal("report lists no removed files")
	}
	leo := l.LogEndOffset()
	l.Close()
	// A reset past the end that crashed before deleting anything.
	checkpointLogStart(fsys, leo+100)
	defer func() {
		// A reset below the end, marked under way, is finished too.
		lr := &Log{fs: fsys, dir: "/d"}
		if err := lr.writeLogStart(5, 0, true, 0); err != nil {
			t.Fatal(err)
		}
		l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
		defer l.Close()
		if l.LogStartOffset() != 5 || l.LogEndOffset() != 5 {
			t.Fatalf("after an interrupted reset to 5: [%d, %d)", l.LogStartOffset(), l.LogEndOffset())
		}
		if ls, ok := lr.readLogStart(); !ok || ls.resetting {
			t.Fatalf("reset still marked under way after open (ok %v)", ok)
		}
	}()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	if l.LogStartOffset() != leo+100 || l.LogEndOffset() != leo+100 || l.SegmentCount() != 1 || l.LastEpoch() != -1 {
		t.Fatalf("after reset recovery: [%d, %d), %d segments, epoch %d", l.LogStartOffset(), l.LogEndOffset(), l.SegmentCount(), l.LastEpoch())
	}
}

func checkpointLogStart(fsys vfs.FS, start int64) error {
	l := &Log{fs: fsys, dir: "/d"}
	return l.writeLogStart(start, 0, false, 0)
}

// The leader-epoch checkpoint is written when the active segment rolls
// and when the log closes, not at each new epoch: a crash loses the
// checkpoint's latest entries, and recovery must find them again in the
// batch headers, in the active segment and in the sealed ones alike.
func TestRecoverEpochsAfterCrashWithLazyCheckpoint(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncNever} {
		t.Run(policy.String(), func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 700, Fsync: policy}
			l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
			epochOf := func(i int) int32 { return int32(1 + i/7) } // a new epoch every 7 batches
			fill(t, l, 40, epochOf, constTs(1))
			want := l.Epochs()
			if l.SegmentCount() < 3 || len(want) < 5 {
				t.Fatalf("setup: %d segments, epochs %v", l.SegmentCount(), want)
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			abandon(l)
			fsys.Crash(7)
			l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
			defer l.Close()
			if got := l.Epochs(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("epochs after the crash %v, want %v (report %+v)", got, want, l.Recovery())
			}
			for _, e := range want {
				if term, err := l.TermAt(e.StartOffset); err != nil || term != e.Epoch {
					t.Fatalf("term at %d: %d, %v; want %d", e.StartOffset, term, err, e.Epoch)
				}
			}
		})
	}
}

func TestRecoverEpochAheadOfData(t *testing.T) {
	// An epoch persisted (by a roll, say) ahead of batches that a crash
	// lost leaves an entry past the log end that recovery drops.
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
	fill(t, l, 5, constEpoch(1), constTs(1))
	rng := newRNG(1)
	if _, _, err := l.AppendLeader(makeBatch(rng, 1, 10, 1), 2); err != nil {
		t.Fatal(err)
	}
	if err := l.persistEpochs(); err != nil { // as a roll does
		t.Fatal(err)
	}
	abandon(l) // the batch never left the buffer
	l = openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
	defer l.Close()
	if l.LastEpoch() != 1 || !l.Recovery().EpochsRepaired {
		t.Fatalf("last epoch %d, report %v", l.LastEpoch(), l.Recovery())
	}
}

func TestRecoverRefusesNothingOnGarbageFiles(t *testing.T) {
	// Whatever bytes the files hold, OpenLog does not panic and yields a
	// log that reads back.
	rng := newRNG(8)
	for i := 0; i < 50; i++ {
		fsys := vfs.NewMem()
		fsys.MkdirAll("/d", 0o755)
		for _, name := range []string{segName(0, logSuffix), segName(0, indexSuffix), segName(0, timeIndexSuffix), epochFile, logStartFile, cleanFile} {
			if rng.IntN(2) == 0 {
				continue
			}
			f, _ := fsys.Create("/d/" + name)
			junk := make([]byte, rng.IntN(300))
			for j := range junk {
				junk[j] = byte(rng.Uint32())
			}
			f.WriteAt(junk, 0)
			f.Sync()
			f.Close()
		}
		fsys.SyncDir("/d")
		l, err := OpenLog(fsys, "/d", Config{}, nil)
		if err != nil {
			continue // a refusal is fine; a panic is not
		}
		readAll(t, l)
		l.Close()
	}
}

func TestRecoverCleanRecordMismatch(t *testing.T) {
	// A clean record that no longer matches the active segment is ignored.
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
	fill(t, l, 5, constEpoch(1), constTs(1))
	l.Close()
	rng := newRNG(9)
	appendRaw(t, fsys, "/d/"+segName(0, logSuffix), -1, stamped(makeBatch(rng, 1, 50, 1), 10, 1))
	l = openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
	defer l.Close()
	if l.Recovery().Clean || l.LogEndOffset() != 11 {
		t.Fatalf("report %v, LEO %d", l.Recovery(), l.LogEndOffset())
	}
	if _, err := fsys.Stat("/d/" + cleanFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("clean record still there: %v", err)
	}
}

// TestRecoverSealWithUntrimmedTail: a crash after a roll but before the
// background seal ran leaves the last sealed segment with its preallocated
// zero tail and no index files. Its batches are whole, so recovery trims
// the zeros and keeps the newer segment; nothing is dropped.
func TestRecoverSealWithUntrimmedTail(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 600}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	want := fill(t, l, 30, func(int) int32 { return 1 }, constTs(1))
	l.Close()
	names, _ := fsys.List("/d")
	var bases []int64
	for _, n := range names {
		if b, ok := parseSegName(n, logSuffix); ok {
			bases = append(bases, b)
		}
	}
	if len(bases) < 3 {
		t.Fatalf("%d segments; the test needs a sealed one before the active one", len(bases))
	}
	last := bases[len(bases)-2]
	f, err := fsys.OpenReadWrite("/d/" + segName(last, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Size()
	if _, err := f.WriteAt(make([]byte, 1500), size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, n := range []string{segName(last, indexSuffix), segName(last, timeIndexSuffix), cleanFile} {
		if err := fsys.Remove("/d/" + n); err != nil {
			t.Fatal(err)
		}
	}

	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	if r := l.Recovery(); r.Clean || r.DataDropped() {
		t.Fatalf("report %v: want an unclean start that drops nothing", r)
	}
	mustHave(t, l, want)
	f, _ = fsys.Open("/d/" + segName(last, logSuffix))
	if n, _ := f.Size(); n != size {
		t.Fatalf("sealed segment is %d bytes after recovery, want its %d bytes of batches", n, size)
	}
	f.Close()
}
