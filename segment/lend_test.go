package segment

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/segment/vfs"
)

// lender lends batches to the log and counts what comes back. Each
// release scribbles over its batch: a log that released a batch before
// its write completed (or wrote it after) would store the scribble, which
// the batch's CRC and the tests' byte comparisons catch.
type lender struct {
	t        *testing.T
	lent     int
	released map[int]int // lend number -> releases
	refuse   bool        // lend gives no release (the caller cannot lend)
}

func newLender(t *testing.T) *lender { return &lender{t: t, released: map[int]int{}} }

func (ld *lender) lend(b []byte) Lend {
	return func() func() {
		if ld.refuse {
			return nil
		}
		ld.lent++
		k := ld.lent
		return func() {
			ld.released[k]++
			if ld.released[k] > 1 {
				ld.t.Errorf("lend %d released %d times", k, ld.released[k])
			}
			for i := range b {
				b[i] = 0xee
			}
		}
	}
}

// outstanding is the number of lends not yet released.
func (ld *lender) outstanding() int { return ld.lent - len(ld.released) }

func TestAppendLentWritesInPlace(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		for _, policy := range []FsyncPolicy{FsyncNever, FsyncMessages, FsyncAlways} {
			t.Run(policy.String(), func(t *testing.T) {
				l := openLog(t, fsys, fmt.Sprintf("%s-%s", dir, policy), Config{Fsync: policy, FsyncMessages: 50}, newEngine())
				defer l.Close()
				ld := newLender(t)
				rng := newRNG(5)
				want := map[int64][]byte{}
				small := 0
				for i := 0; i < 40; i++ {
					// Small batches (copied) between large ones (in place):
					// the file must keep the append order.
					payload := InPlaceBytesMin + rng.IntN(3*InPlaceBytesMin)
					if i%3 == 0 {
						payload, small = 100+rng.IntN(1000), small+1
					}
					b := makeBatch(rng, 1+rng.IntN(8), payload, 1)
					orig := bytes.Clone(b)
					base, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b))
					if err != nil {
						t.Fatal(err)
					}
					want[base] = stamped(orig, base, 1)
					if i%4 == 3 {
						mustFlush(t, l)
					}
				}
				mustFlush(t, l)
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				switch {
				case policy == FsyncAlways && ld.lent != 0:
					t.Fatalf("under always %d batches were lent, want every one copied", ld.lent)
				case policy != FsyncAlways && ld.lent != 40-small:
					t.Fatalf("%d batches lent, want the %d of at least %d bytes", ld.lent, 40-small, InPlaceBytesMin)
				}
				if n := ld.outstanding(); n != 0 {
					t.Fatalf("%d lent batches not released once everything is written", n)
				}
				mustHave(t, l, want)
			})
		}
	})
}

// TestAppendLentHeldUntilWritten: the log keeps a lent batch until its
// write completes, and the caller's bytes are stamped in place.
func TestAppendLentHeldUntilWritten(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/d", Config{Fsync: FsyncNever}, NewPwriteEngine())
	defer l.Close()
	ld := newLender(t)
	rng := newRNG(6)
	small := makeBatch(rng, 2, 500, 1)
	if _, _, err := l.AppendLeaderCheckedLent(small, 3, ld.lend(small)); err != nil {
		t.Fatal(err)
	}
	b := makeBatch(rng, 4, 2*InPlaceBytesMin, 1)
	base, _, err := l.AppendLeaderCheckedLent(b, 3, ld.lend(b))
	if err != nil {
		t.Fatal(err)
	}
	if base != 2 || ld.lent != 1 {
		t.Fatalf("base %d, %d lent; want 2, 1", base, ld.lent)
	}
	h, err := readHeaderBytes(b)
	if err != nil || h.BaseOffset != 2 || h.PartitionLeaderEpoch != 3 {
		t.Fatalf("the lent batch is not stamped in place: %+v, %v", h, err)
	}
	// The pwrite engine writes at Submit: nothing may be released before.
	if len(ld.released) != 0 {
		t.Fatal("a lent batch was released before its write was submitted")
	}
	want := stamped(b, base, 3)
	mustFlush(t, l)
	if ld.outstanding() != 0 {
		t.Fatal("the lent batch was not released once written")
	}
	mustHave(t, l, map[int64][]byte{0: stamped(small, 0, 3), 2: want})
}

// TestAppendLentBoundedByChains: a lent batch takes a write slot of its
// own; when none is free the batch is copied rather than the append
// waiting for the disk.
func TestAppendLentBoundedByChains(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/d", Config{Fsync: FsyncNever, ChainsInFlight: 2}, NewPwriteEngine())
	defer l.Close()
	ld := newLender(t)
	rng := newRNG(11)
	want := map[int64][]byte{}
	for i := 0; i < 3; i++ {
		b := makeBatch(rng, 2, InPlaceBytesMin, 1)
		orig := bytes.Clone(b)
		base, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b))
		if err != nil {
			t.Fatal(err)
		}
		want[base] = stamped(orig, base, 1)
	}
	if ld.lent != 2 {
		t.Fatalf("%d lent, want 2 (the rest copied)", ld.lent)
	}
	mustFlush(t, l)
	if ld.outstanding() != 0 {
		t.Fatal("a lent batch was not released")
	}
	mustHave(t, l, want)
}

// TestAppendLentRefused: a lend that gives no release leaves the batch to
// the copy path, unchanged.
func TestAppendLentRefused(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/d", Config{Fsync: FsyncNever}, NewPwriteEngine())
	defer l.Close()
	ld := newLender(t)
	ld.refuse = true
	b := makeBatch(newRNG(7), 3, InPlaceBytesMin, 1)
	orig := bytes.Clone(b)
	base, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, orig) {
		t.Fatal("a batch the caller could not lend was changed")
	}
	mustFlush(t, l)
	mustHave(t, l, map[int64][]byte{base: stamped(orig, base, 1)})
}

// TestAppendLentNoSpaceReleasesOnce: a write that finds no space rewinds
// the log; every lent batch, written or dropped, is released exactly once,
// and the log goes on once space returns.
func TestAppendLentNoSpaceReleasesOnce(t *testing.T) {
	for _, e := range []struct {
		name string
		new  func() Engine
	}{{"pwrite", func() Engine { return NewPwriteEngine() }}, {"reorder", func() Engine { return newReorderEngine(4) }}} {
		t.Run(e.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			l := openLog(t, fsys, "/d", Config{Fsync: FsyncNever, PreallocateBytes: -1, ChainsInFlight: 4}, e.new())
			defer l.Close()
			ld := newLender(t)
			rng := newRNG(8)
			want := fill(t, l, 3, constEpoch(1), constTs(1))
			leo := l.LogEndOffset()
			fsys.SetCapacity(fsys.UsedBytes() + InPlaceBytesMin/2)
			for i := 0; i < 4; i++ {
				b := makeBatch(rng, 2, InPlaceBytesMin, 1)
				if _, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b)); err != nil && !errors.Is(err, ErrNoSpace) {
					t.Fatal(err)
				}
			}
			err := l.Sync()
			if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Sync on a full disk: %v", err)
			}
			if l.LogEndOffset() != leo || l.Err() != nil {
				t.Fatalf("not rewound: LEO %d (was %d), err %v", l.LogEndOffset(), leo, l.Err())
			}
			if ld.lent == 0 || ld.outstanding() != 0 {
				t.Fatalf("%d lent, %d not released after the rewind", ld.lent, ld.outstanding())
			}
			mustHave(t, l, want)
			fsys.SetCapacity(-1)
			b := makeBatch(rng, 2, InPlaceBytesMin, 1)
			orig := bytes.Clone(b)
			base, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b))
			if err != nil || base != leo {
				t.Fatalf("append after space returned: base %d, %v", base, err)
			}
			want[base] = stamped(orig, base, 1)
			mustFlush(t, l)
			mustHave(t, l, want)
			if ld.outstanding() != 0 {
				t.Fatal("a lent batch was not released")
			}
		})
	}
}

// TestAppendLentFailureReleasesOnce: a failed write poisons the log; the
// lent batches in flight are released exactly once, and none is lent to a
// failed log.
func TestAppendLentFailureReleasesOnce(t *testing.T) {
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "/d", Config{Fsync: FsyncNever, PreallocateBytes: -1, ChainsInFlight: 4}, newReorderEngine(9))
	ld := newLender(t)
	rng := newRNG(9)
	fill(t, l, 2, constEpoch(1), constTs(1))
	injectOn(fsys, vfs.OpWrite, syscall.EIO)
	for i := 0; i < 3; i++ {
		b := makeBatch(rng, 2, InPlaceBytesMin, 1)
		if _, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b)); err != nil && !errors.Is(err, ErrLogFailed) {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Sync after EIO: %v", err)
	}
	lent := ld.lent
	b := makeBatch(rng, 2, InPlaceBytesMin, 1)
	if _, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b)); !errors.Is(err, ErrLogFailed) || ld.lent != lent {
		t.Fatalf("append to a failed log: %v, lent %d more", err, ld.lent-lent)
	}
	if lent == 0 || ld.outstanding() != 0 {
		t.Fatalf("%d lent, %d not released after the failure", lent, ld.outstanding())
	}
	l.Close()
}

// TestAppendLentReleasedByClose: writes still in flight when the log is
// discarded or closed release their batches.
func TestAppendLentReleasedByClose(t *testing.T) {
	for _, discard := range []bool{false, true} {
		t.Run(fmt.Sprintf("discard=%v", discard), func(t *testing.T) {
			l := openLog(t, vfs.NewMem(), "/d", Config{Fsync: FsyncNever, ChainsInFlight: 8}, newReorderEngine(10))
			ld := newLender(t)
			rng := newRNG(10)
			for i := 0; i < 5; i++ {
				b := makeBatch(rng, 2, InPlaceBytesMin, 1)
				if _, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b)); err != nil {
					t.Fatal(err)
				}
			}
			if ld.outstanding() != 5 {
				t.Fatalf("%d of 5 lent batches out before any flush", ld.outstanding())
			}
			var err error
			if discard {
				err = l.Discard()
			} else {
				err = l.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			if ld.outstanding() != 0 {
				t.Fatalf("%d lent batches not released by the close", ld.outstanding())
			}
		})
	}
}

// TestAppendLentReapsInlineWrites: io_uring makes a lent batch's write at
// once (inline) and reports it at the next reap; an append that finds
// every write slot taken reaps those instead of copying its batch.
func TestAppendLentReapsInlineWrites(t *testing.T) {
	e, err := uring.NewEngine(uring.Options{})
	if errors.Is(err, uring.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	l := openLog(t, vfs.OS(), t.TempDir()+"/p", Config{Fsync: FsyncNever, ChainsInFlight: 4}, e)
	defer l.Close()
	ld := newLender(t)
	rng := newRNG(12)
	want := map[int64][]byte{}
	const n = 12 // three times the slots, without a flush
	for i := 0; i < n; i++ {
		b := makeBatch(rng, 2, 64<<10-100, 1)
		orig := bytes.Clone(b)
		base, _, err := l.AppendLeaderCheckedLent(b, 1, ld.lend(b))
		if err != nil {
			t.Fatal(err)
		}
		want[base] = stamped(orig, base, 1)
	}
	if ld.lent != n {
		t.Fatalf("%d of %d batches lent: the rest were copied though their slots' writes were done", ld.lent, n)
	}
	mustFlush(t, l)
	if ld.outstanding() != 0 {
		t.Fatal("a lent batch was not released")
	}
	mustHave(t, l, want)
}
