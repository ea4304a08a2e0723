package segment

import (
	"testing"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// A zero-width consensus batch (docs/design/offsets.md) takes no offset:
// appended between two data batches it lies at the next one's base, the
// log end does not move, an offset lookup passes over it to the data
// batch at the same base, and recovery (clean and unclean) keeps it.
func TestZeroWidthBatchTakesNoOffset(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		rng := newRNG(7)
		l := openLog(t, fsys, dir, Config{}, newEngine())
		data3, data2 := makeBatch(rng, 3, 40, 1000), makeBatch(rng, 2, 40, 2000)
		noop := batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 1500, true)
		append1 := func(b []byte, epoch int32, wantBase, wantLast int64) {
			t.Helper()
			base, last, err := l.AppendLeader(b, epoch)
			if err != nil || base != wantBase || last != wantLast {
				t.Fatalf("append: [%d, %d], %v; want [%d, %d]", base, last, err, wantBase, wantLast)
			}
		}
		append1(data3, 1, 0, 2)
		append1(noop, 2, 3, 2)
		if l.LogEndOffset() != 3 {
			t.Fatalf("log end %d after a zero-width batch, want 3", l.LogEndOffset())
		}
		append1(data2, 2, 3, 4)
		mustFlush(t, l)
		check := func(l *Log) {
			t.Helper()
			if l.LogEndOffset() != 5 {
				t.Fatalf("log end %d, want 5", l.LogEndOffset())
			}
			if e, err := l.TermAt(3); err != nil || e != 2 {
				t.Fatalf("term at 3: %d, %v; want 2", e, err)
			}
			spans, err := l.Read(3, 1<<20, l.WrittenOffset())
			if err != nil || len(spans) == 0 {
				t.Fatalf("Read(3): %v, %d spans", err, len(spans))
			}
			b, err := spans[0].AppendTo(nil)
			ReleaseSpans(spans)
			if err != nil {
				t.Fatal(err)
			}
			h, err := batch.ReadHeader(b)
			if err != nil || h.IsZeroWidth() || h.BaseOffset != 3 || h.RecordCount != 2 {
				t.Fatalf("Read(3) starts with %+v (%v), want the data batch at 3", h, err)
			}
		}
		check(l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, fsys, dir, Config{}, newEngine())
		check(l)
		if err := l.Discard(); err != nil { // no clean record: the next open scans
			t.Fatal(err)
		}
		l = openLog(t, fsys, dir, Config{}, newEngine())
		if l.Recovery().Clean {
			t.Fatal("the open after Discard was clean")
		}
		check(l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// A fresh partition's first batch is its first primary's no-op: zero-width
// at offset 0, the log still ends at 0, and the first data batch is at 0,
// also after an unclean reopen between the two.
func TestZeroWidthBatchFirstInLog(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		rng := newRNG(8)
		l := openLog(t, fsys, dir, Config{}, newEngine())
		base, last, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 1000, true), 1)
		if err != nil || base != 0 || last != -1 || l.LogEndOffset() != 0 {
			t.Fatalf("no-op appended at [%d, %d] (%v), log end %d; want [0, -1], 0", base, last, err, l.LogEndOffset())
		}
		mustFlush(t, l)
		if err := l.Discard(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, fsys, dir, Config{}, newEngine())
		if l.LogEndOffset() != 0 || l.LogStartOffset() != 0 {
			t.Fatalf("reopened: log [%d, %d), want [0, 0)", l.LogStartOffset(), l.LogEndOffset())
		}
		if base, last, err := l.AppendLeader(makeBatch(rng, 4, 10, 2000), 1); err != nil || base != 0 || last != 3 {
			t.Fatalf("first data batch at [%d, %d] (%v), want [0, 3]", base, last, err)
		}
		mustFlush(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, fsys, dir, Config{}, newEngine())
		if l.LogEndOffset() != 4 {
			t.Fatalf("reopened: log end %d, want 4", l.LogEndOffset())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
