package segment

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// A zero-width consensus batch (docs/design/offsets.md) takes one raft
// offset and no user offset: appended between two data batches it lies at
// the next one's user base, the user end does not move, a read at the
// next data record's raft offset starts at the data batch, and recovery
// (clean and unclean) rebuilds the translation.
func TestZeroWidthBatchTakesNoUserOffset(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		rng := newRNG(7)
		l := openLog(t, fsys, dir, Config{}, newEngine())
		data3, data2 := makeBatch(rng, 3, 40, 1000), makeBatch(rng, 2, 40, 2000)
		noop := batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 1500, true)
		append1 := func(b []byte, epoch int32, wantBase, wantLast, wantUserEnd int64) {
			t.Helper()
			base, last, err := l.AppendLeader(b, epoch)
			if err != nil || base != wantBase || last != wantLast || l.UserEndOffset() != wantUserEnd {
				t.Fatalf("append: [%d, %d], user end %d, %v; want [%d, %d], %d", base, last, l.UserEndOffset(), err, wantBase, wantLast, wantUserEnd)
			}
		}
		append1(data3, 1, 0, 2, 3)
		append1(noop, 2, 3, 3, 3)
		append1(data2, 2, 4, 5, 5)
		mustFlush(t, l)
		check := func(l *Log) {
			t.Helper()
			if l.LogEndOffset() != 6 || l.UserEndOffset() != 5 || l.UserStartOffset() != 0 {
				t.Fatalf("log end %d, user [%d, %d); want 6, [0, 5)", l.LogEndOffset(), l.UserStartOffset(), l.UserEndOffset())
			}
			for r, u := range map[int64]int64{0: 0, 2: 2, 3: 3, 4: 3, 5: 4, 6: 5} {
				if got := l.UserOffset(r); got != u {
					t.Fatalf("UserOffset(%d) = %d, want %d", r, got, u)
				}
			}
			if r := l.RaftOffset(3); r != 4 {
				t.Fatalf("RaftOffset(3) = %d, want 4 (past the no-op)", r)
			}
			if e, err := l.TermAt(4); err != nil || e != 2 {
				t.Fatalf("term at 4: %d, %v; want 2", e, err)
			}
			spans, err := l.Read(l.RaftOffset(3), 1<<20, l.WrittenOffset())
			if err != nil || len(spans) == 0 {
				t.Fatalf("Read: %v, %d spans", err, len(spans))
			}
			b, err := spans[0].AppendTo(nil)
			ReleaseSpans(spans)
			if err != nil {
				t.Fatal(err)
			}
			h, err := batch.ReadHeader(b)
			if err != nil || h.IsZeroWidth() || h.BaseOffset != 3 || h.RecordCount != 2 {
				t.Fatalf("the read starts with %+v (%v), want the data batch at user offset 3", h, err)
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
		// A divergent tail cut at the no-op takes it out of the table.
		if err := l.TruncateTo(3); err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != 3 || l.UserEndOffset() != 3 {
			t.Fatalf("after truncation to 3: end %d, user end %d; want 3, 3", l.LogEndOffset(), l.UserEndOffset())
		}
		append1(data2, 3, 3, 4, 5)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// A fresh partition's first batch is its first primary's no-op: raft
// offset 0, user offset none, so the first data record is user offset 0,
// also after an unclean reopen between the two.
func TestZeroWidthBatchFirstInLog(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		rng := newRNG(8)
		l := openLog(t, fsys, dir, Config{}, newEngine())
		base, last, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 1000, true), 1)
		if err != nil || base != 0 || last != 0 || l.LogEndOffset() != 1 || l.UserEndOffset() != 0 {
			t.Fatalf("no-op appended at [%d, %d] (%v), log end %d, user end %d; want [0, 0], 1, 0", base, last, err, l.LogEndOffset(), l.UserEndOffset())
		}
		mustFlush(t, l)
		if err := l.Discard(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, fsys, dir, Config{}, newEngine())
		if l.LogEndOffset() != 1 || l.UserEndOffset() != 0 || l.UserStartOffset() != 0 {
			t.Fatalf("reopened: log end %d, user [%d, %d); want 1, [0, 0)", l.LogEndOffset(), l.UserStartOffset(), l.UserEndOffset())
		}
		if base, last, err := l.AppendLeader(makeBatch(rng, 4, 10, 2000), 1); err != nil || base != 1 || last != 4 || l.UserEndOffset() != 4 {
			t.Fatalf("first data batch at [%d, %d] (%v), user end %d; want [1, 4], 4", base, last, err, l.UserEndOffset())
		}
		mustFlush(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, fsys, dir, Config{}, newEngine())
		if l.LogEndOffset() != 5 || l.UserEndOffset() != 4 {
			t.Fatalf("reopened: log end %d, user end %d; want 5, 4", l.LogEndOffset(), l.UserEndOffset())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// The count of consensus entries below the log start survives what moves
// the start: a reset with its base, and retention past segments holding
// no-ops, each across a reopen, also when the new start's segment is
// empty (no batch there to read it from).
func TestConsensusBaseSurvivesResetAndRetention(t *testing.T) {
	fsys := vfs.NewMem()
	rng := newRNG(9)
	cfg := Config{SegmentBytes: 1024, RetentionBytes: -1, RetentionMs: -1}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	if err := l.ResetAt(10, 3, 1, nil); err != nil {
		t.Fatal(err)
	}
	if l.UserStartOffset() != 7 || l.UserEndOffset() != 7 {
		t.Fatalf("after reset: user [%d, %d), want [7, 7)", l.UserStartOffset(), l.UserEndOffset())
	}
	l.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	if l.UserStartOffset() != 7 || l.LogStartOffset() != 10 {
		t.Fatalf("reopened after reset: start %d, user start %d; want 10, 7", l.LogStartOffset(), l.UserStartOffset())
	}
	epoch := int32(1)
	users := 7
	for i := 0; i < 40; i++ {
		if i%8 == 0 {
			epoch++
			if _, _, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 1000, true), epoch); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := l.AppendLeader(makeBatch(rng, 3, 60, 1000), epoch); err != nil {
			t.Fatal(err)
		}
		users += 3
	}
	mustFlush(t, l)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.UserEndOffset() != int64(users) || l.LogEndOffset() != int64(users)+3+5 {
		t.Fatalf("user end %d, end %d; want %d, %d", l.UserEndOffset(), l.LogEndOffset(), users, users+8)
	}
	if len(l.segs) < 3 {
		t.Fatalf("%d segments, want several", len(l.segs))
	}
	before := l.ConsensusBase()
	res, err := l.ApplyRetentionBelow(l.LogEndOffset(), l.segs[len(l.segs)-1].base)
	if err != nil || res.Segments == 0 {
		t.Fatalf("retention: %+v, %v", res, err)
	}
	if l.ConsensusBase() <= before || l.LogStartOffset()-l.ConsensusBase() != l.UserStartOffset() {
		t.Fatalf("after retention: base %d (was %d), start %d, user start %d", l.ConsensusBase(), before, l.LogStartOffset(), l.UserStartOffset())
	}
	start, ustart, uend := l.LogStartOffset(), l.UserStartOffset(), l.UserEndOffset()
	l.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	if l.LogStartOffset() != start || l.UserStartOffset() != ustart || l.UserEndOffset() != uend {
		t.Fatalf("reopened after retention: start %d, user [%d, %d); want %d, [%d, %d)", l.LogStartOffset(), l.UserStartOffset(), l.UserEndOffset(), start, ustart, uend)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// A log written before offsets were dense holds one-offset consensus
// batches: they keep their offsets (nothing is renumbered, so offsets
// consumers committed stay valid), and the zero-width batches appended
// after it take none.
func TestOneOffsetConsensusBatchesKeepTheirOffsets(t *testing.T) {
	fsys := vfs.NewMem()
	rng := newRNG(10)
	l := openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
	if _, _, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 1000, false), 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.AppendLeader(makeBatch(rng, 2, 10, 1000), 1); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, l)
	if err := l.Discard(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
	if l.LogEndOffset() != 3 || l.UserEndOffset() != 3 {
		t.Fatalf("old log: end %d, user end %d; want 3, 3", l.LogEndOffset(), l.UserEndOffset())
	}
	if _, _, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 1000, true), 2); err != nil {
		t.Fatal(err)
	}
	base, _, err := l.AppendLeader(makeBatch(rng, 2, 10, 1000), 2)
	if err != nil || base != 4 || l.UserOffset(base) != 3 || l.UserEndOffset() != 5 {
		t.Fatalf("after the switch: base %d (%v), user %d, user end %d; want 4, 3, 5", base, err, l.UserOffset(base), l.UserEndOffset())
	}
	mustFlush(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, "/d", Config{}, NewPwriteEngine())
	defer l.Close()
	if l.UserEndOffset() != 5 || l.UserOffset(4) != 3 {
		t.Fatalf("reopened: user end %d, user offset of 4 %d; want 5, 3", l.UserEndOffset(), l.UserOffset(4))
	}
}

// MaxTimestamp finds the first data batch with the largest timestamp at
// or below the limit, in raft offsets: a new primary's no-op stamped later
// than every record does not count (its segment's headers are read), a
// tie goes to the earlier batch, a batch above the limit (not committed)
// is not seen, segments that cannot beat the best are skipped, and a log
// of consensus batches only has none.
func TestMaxTimestamp(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		rng := newRNG(11)
		l := openLog(t, fsys, dir, Config{SegmentBytes: 1024}, newEngine())
		if _, _, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 9000, true), 1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.MaxTimestamp(l.WrittenOffset()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("only a no-op: %v, want ErrNotFound", err)
		}
		bases := map[int64]int64{} // ts → raft base
		for i, ts := range []int64{1000, 5000, 3000, 5000, 2000, 4000} {
			base, _, err := l.AppendLeader(makeBatch(rng, 2, 300, ts), 1)
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			if _, ok := bases[ts]; !ok {
				bases[ts] = base
			}
		}
		if _, _, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, 99000, true), 2); err != nil {
			t.Fatal(err)
		}
		late, _, err := l.AppendLeader(makeBatch(rng, 1, 300, 7000), 2)
		if err != nil {
			t.Fatal(err)
		}
		mustFlush(t, l)
		if l.SegmentCount() < 3 {
			t.Fatalf("%d segments: the test meant several", l.SegmentCount())
		}
		for _, c := range []struct {
			limit, base, ts int64
		}{
			{l.WrittenOffset(), late, 7000},
			{late - 1, bases[5000], 5000}, // the 7000 batch not committed; the first 5000 wins the tie
			{bases[5000] + 1, bases[5000], 5000},
			{bases[5000] - 1, bases[1000], 1000},
		} {
			base, ts, err := l.MaxTimestamp(c.limit)
			if err != nil || base != c.base || ts != c.ts {
				t.Fatalf("MaxTimestamp(%d) = %d, %d, %v; want %d, %d", c.limit, base, ts, err, c.base, c.ts)
			}
		}
	})
}
