package segment

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

func TestNoSpaceRewindsAndRecovers(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncNever} {
		t.Run(policy.String(), func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := Config{Fsync: policy, PreallocateBytes: -1}
			d := NewIO(NewPwriteEngine())
			var notes int
			d.SetNotify(func(*Log) { notes++ })
			l, err := OpenLog(fsys, "/d", cfg, d)
			if err != nil {
				t.Fatal(err)
			}
			want := fill(t, l, 10, constEpoch(1), constTs(1))
			leo := l.LogEndOffset()
			// Room for a little more than one more batch.
			fsys.SetCapacity(fsys.UsedBytes() + 500)
			rng := newRNG(10)
			for i := 0; i < 3; i++ {
				if _, _, err := l.AppendLeader(makeBatch(rng, 2, 300, 1), 1); err != nil {
					t.Fatal(err)
				}
			}
			notes = 0
			err = l.Sync()
			if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Sync on a full disk: %v", err)
			}
			if l.LogEndOffset() != leo || l.WrittenOffset() != leo-1 || notes == 0 {
				t.Fatalf("not rewound: LEO %d (was %d), written %d, %d notifications", l.LogEndOffset(), leo, l.WrittenOffset(), notes)
			}
			if l.Err() != nil {
				t.Fatalf("no space must not fail the log: %v", l.Err())
			}
			got := readAll(t, l)
			if len(got) != len(want) {
				t.Fatalf("partial batches visible: %d batches, want %d", len(got), len(want))
			}
			// Space returns: appends work again.
			fsys.SetCapacity(-1)
			more := fill(t, l, 5, constEpoch(1), constTs(1))
			for k, v := range more {
				want[k] = v
			}
			got = readAll(t, l)
			for k, v := range want {
				if !bytes.Equal(got[k], v) {
					t.Fatalf("batch %d differs", k)
				}
			}
			l.Close()
			l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
			defer l.Close()
			if len(readAll(t, l)) != len(want) {
				t.Fatal("reopen lost batches")
			}
			d.Close()
		})
	}
}

func TestNoSpaceFailsAppendsUntilRewound(t *testing.T) {
	fsys := vfs.NewMem()
	// The reorder engine holds completions back, so the rewind waits.
	e := newReorderEngine(3)
	l := openLog(t, fsys, "/d", Config{PreallocateBytes: -1, ChainsInFlight: 8}, e)
	defer l.Close()
	fill(t, l, 3, constEpoch(1), constTs(1))
	fsys.SetCapacity(fsys.UsedBytes() + 100)
	rng := newRNG(11)
	for i := 0; i < 4; i++ {
		l.AppendLeader(makeBatch(rng, 1, 300, 1), 1)
		l.io.Flush()
	}
	// Reap until the log sees the failure.
	for l.stall == nil && l.lastFailure == nil && l.io.InFlight() > 0 {
		l.io.Wait()
	}
	if l.stall != nil {
		if _, _, err := l.AppendLeader(makeBatch(rng, 1, 10, 1), 1); !errors.Is(err, ErrNoSpace) {
			t.Fatalf("append while stalled: %v", err)
		}
	}
	for l.io.InFlight() > 0 {
		l.io.Wait()
	}
	if l.stall != nil || l.LogEndOffset() != 6 {
		t.Fatalf("after the writes drained: stall %v, LEO %d", l.stall, l.LogEndOffset())
	}
	fsys.SetCapacity(-1)
	fill(t, l, 2, constEpoch(1), constTs(1))
}

func injectOn(fsys *vfs.MemFS, op vfs.Op, err error) {
	fsys.SetInjector(func(o vfs.Op, path string) error {
		if o == op && strings.HasSuffix(path, logSuffix) {
			return err
		}
		return nil
	})
}

func TestEIOPoisons(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync} {
		t.Run(op.String(), func(t *testing.T) {
			fsys := vfs.NewMem()
			l := openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
			want := fill(t, l, 5, constEpoch(1), constTs(1))
			injectOn(fsys, op, syscall.EIO)
			rng := newRNG(12)
			l.AppendLeader(makeBatch(rng, 1, 100, 1), 1)
			if err := l.Sync(); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Sync after EIO: %v", err)
			}
			fsys.SetInjector(nil)
			// No retry, no way back: every append fails, even with the
			// fault gone.
			if _, _, err := l.AppendLeader(makeBatch(rng, 1, 100, 1), 1); !errors.Is(err, ErrLogFailed) {
				t.Fatalf("append after EIO: %v", err)
			}
			if err := l.Sync(); !errors.Is(err, ErrLogFailed) {
				t.Fatalf("Sync again: %v", err)
			}
			if !errors.Is(l.Err(), ErrLogFailed) || l.DurableOffset() != 9 {
				t.Fatalf("Err %v, durable %d", l.Err(), l.DurableOffset())
			}
			l.Close()
			// Reopening recovers what is on disk.
			l = openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
			defer l.Close()
			got := readAll(t, l)
			for k, v := range want {
				if !bytes.Equal(got[k], v) {
					t.Fatalf("durable batch %d lost", k)
				}
			}
			fill(t, l, 1, constEpoch(1), constTs(1))
		})
	}
}

func TestEngineRefusalFailsTheLog(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/d", Config{}, refusingEngine{NewPwriteEngine()})
	defer l.Close()
	l.AppendLeader(makeBatch(newRNG(1), 1, 10, 1), 1)
	if err := l.Sync(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Sync through a refusing engine: %v", err)
	}
}

type refusingEngine struct{ Engine }

func (refusingEngine) Write(vfs.File, []byte, int64, bool, uint64) error {
	return errors.New("no descriptor")
}

// TestNoSpaceRewindDuringCopiedAppend: a copied append that has to wait
// for a write slot can meet, inside that wait, a write that found no
// space and the rewind that follows (it moves the log end back). The
// append must then fail with the rewind's cause, not enter its batch at
// the end it saw before the wait: every append that succeeds lands at
// the log end it was called at, and the log reads back contiguous.
func TestNoSpaceRewindDuringCopiedAppend(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{Fsync: FsyncNever, PreallocateBytes: -1, ChainsInFlight: 1, WriteBufferBytes: 4096}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	want := fill(t, l, 3, constEpoch(1), constTs(1))
	fsys.SetCapacity(fsys.UsedBytes() + 100)
	rng := newRNG(21)
	failed := 0
	for i := range 40 {
		b := makeBatch(rng, 2, 900, 1) // four or so fill a write buffer
		before := l.LogEndOffset()
		base, last, err := l.AppendLeader(b, int32(2+i/4)) // new epochs on the way
		if err != nil {
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("append %d: %v", i, err)
			}
			failed++
			continue
		}
		if base != before || l.LogEndOffset() != last+1 || l.UserEndOffset() != l.LogEndOffset() {
			t.Fatalf("append %d landed at %d..%d with the end at %d before it; now end %d, user end %d",
				i, base, last, before, l.LogEndOffset(), l.UserEndOffset())
		}
	}
	if failed == 0 {
		t.Fatal("no append met the full disk: the test did not test")
	}
	for _, e := range l.Epochs() {
		if e.StartOffset >= l.LogEndOffset() {
			t.Fatalf("epoch %v starts at or past the log end %d after the rewinds", e, l.LogEndOffset())
		}
	}
	_ = l.Sync()
	fsys.SetCapacity(-1)
	for k, v := range fill(t, l, 3, constEpoch(50), constTs(1)) {
		want[k] = v
	}
	mustFlush(t, l)
	check := func() {
		t.Helper()
		got := readAll(t, l)
		if len(got) != len(want) {
			t.Fatalf("%d batches, want %d", len(got), len(want))
		}
		mustHave(t, l, want)
	}
	check()
	l.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	check()
}
