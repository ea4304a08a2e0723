package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/segment/vfs"
)

// cleanRec is one record as appended: its key and value (nil: a tombstone).
type cleanRec struct {
	key, value string
	tomb       bool
}

// cleanWorkload is what a keyed workload appended: every record by user
// offset, and the latest of every key.
type cleanWorkload struct {
	recs   map[int64]cleanRec
	latest map[string]int64 // key → user offset of its latest record
}

// keyedBatch builds a batch of the records at timestamp ts.
func keyedBatch(t testing.TB, ts int64, recs ...cleanRec) []byte {
	t.Helper()
	bl, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var v []byte
		if !r.tomb {
			v = []byte(r.value)
		}
		if err := bl.Append(batch.Record{Timestamp: ts, Key: []byte(r.key), Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appendKeyed appends batches of 1-4 records over keys k0..k(keys-1), a
// new epoch's zero-width no-op every 7 batches, tombstones when tombEvery
// > 0, and returns what it wrote.
func appendKeyed(t *testing.T, l *Log, batches, keys, tombEvery int, ts int64) *cleanWorkload {
	t.Helper()
	w := &cleanWorkload{recs: map[int64]cleanRec{}, latest: map[string]int64{}}
	rng := newRNG(uint64(batches*31 + keys))
	epoch := int32(1)
	n := 0
	for i := range batches {
		if i%7 == 3 {
			epoch++
			if _, _, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, ts, true), epoch); err != nil {
				t.Fatal(err)
			}
		}
		var recs []cleanRec
		for range 1 + rng.IntN(4) {
			r := cleanRec{key: fmt.Sprint("k", rng.IntN(keys)), value: fmt.Sprintf("v%d-%s", n, strings.Repeat("x", 20))}
			r.tomb = tombEvery > 0 && n%tombEvery == tombEvery-1
			recs = append(recs, r)
			n++
		}
		user := l.UserEndOffset()
		if _, _, err := l.AppendLeader(keyedBatch(t, ts, recs...), epoch); err != nil {
			t.Fatal(err)
		}
		for j, r := range recs {
			w.recs[user+int64(j)] = r
			w.latest[r.key] = user + int64(j)
		}
	}
	mustFlush(t, l)
	return w
}

// latestBelow is the latest record of every key below user offset u.
func (w *cleanWorkload) latestBelow(u int64) map[string]int64 {
	m := map[string]int64{}
	for off, r := range w.recs {
		if off < u && off >= m[r.key] {
			m[r.key] = off
		}
	}
	return m
}

// readRecords reads every record of the log in order, checking that each
// is one appended at its user offset and that offsets increase.
func readRecords(t *testing.T, l *Log, w *cleanWorkload) (map[int64]cleanRec, []int64) {
	t.Helper()
	got := map[int64]cleanRec{}
	var order []int64
	byRaft := readAll(t, l)
	bases := make([]int64, 0, len(byRaft))
	for r := range byRaft {
		bases = append(bases, r)
	}
	slices.Sort(bases)
	for _, rb := range bases {
		b := byRaft[rb]
		var it batch.Records
		if err := it.Reset(b); err != nil {
			t.Fatalf("batch at raft %d: %v", rb, err)
		}
		if h := it.Header(); h.IsControl() {
			continue
		}
		for it.Next() {
			r := it.Record()
			if len(order) > 0 && r.Offset <= order[len(order)-1] {
				t.Fatalf("offset %d after %d", r.Offset, order[len(order)-1])
			}
			want, ok := w.recs[r.Offset]
			if !ok || want.key != string(r.Key) || want.tomb != (r.Value == nil) || !want.tomb && want.value != string(r.Value) {
				t.Fatalf("record at %d is %q=%q, appended %+v (%v)", r.Offset, r.Key, r.Value, want, ok)
			}
			got[r.Offset] = want
			order = append(order, r.Offset)
		}
		if it.Err() != nil {
			t.Fatalf("batch at raft %d: %v", rb, it.Err())
		}
	}
	return got, order
}

// cleanAll runs Clean steps until a pass is done and the next is idle.
func cleanAll(t *testing.T, l *Log, c CleanConfig) (total CleanResult) {
	t.Helper()
	for range 1000 {
		res, err := l.Clean(c)
		if err != nil {
			t.Fatalf("Clean: %v", err)
		}
		total.Segments += res.Segments
		total.RecordsRemoved += res.RecordsRemoved
		total.BytesBefore += res.BytesBefore
		total.BytesAfter += res.BytesAfter
		if res.Idle {
			return total
		}
	}
	t.Fatal("the cleaner never went idle")
	return total
}

// logShape is what cleaning must not change: offsets, epochs, markers,
// the translation.
func logShape(l *Log) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "start %d end %d user [%d, %d) base %d epochs %v markers %v consensus %v segs",
		l.LogStartOffset(), l.LogEndOffset(), l.UserStartOffset(), l.UserEndOffset(), l.ConsensusBase(),
		l.Epochs(), l.Markers(), l.ConsensusAt(0, l.UserEndOffset()+1, nil))
	for _, s := range l.segs {
		fmt.Fprintf(&sb, " %d-%d", s.base, s.last)
	}
	for r := l.LogStartOffset(); r <= l.LogEndOffset(); r++ {
		fmt.Fprintf(&sb, " %d", l.UserOffset(r))
	}
	return sb.String()
}

// The cleaner keeps, in the segments it may clean, only the latest record
// of every key, at its offset; the zero-width batches, epochs, markers
// and translation are unchanged; the active segment and what lies above
// the limit are untouched; a reopened log reads the same.
func TestCleanKeepsLatestPerKey(t *testing.T) {
	t.Run("fingerprints", cleanKeepsLatest)
	// Every key's first 64 bits the same: the second half of the
	// fingerprint alone tells the keys apart, and nothing of another
	// key's is cleaned away (a 64-bit map would keep one key in all).
	t.Run("first halves collide", func(t *testing.T) {
		real := keyPrintOf
		t.Cleanup(func() { keyPrintOf = real })
		keyPrintOf = func(d *xxhash.Digest, key []byte) keyPrint { return keyPrint{42, real(d, key)[1]} }
		cleanKeepsLatest(t)
	})
}

func cleanKeepsLatest(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 2048}
	l := openLog(t, fsys, "/p", cfg, NewPwriteEngine())
	defer func() { _ = l.Close() }()
	w := appendKeyed(t, l, 300, 10, 0, 1000)
	shape, size := logShape(l), l.Size()
	if l.SegmentCount() < 10 {
		t.Fatalf("%d segments; the test wants many", l.SegmentCount())
	}
	limit := l.segs[len(l.segs)-3].base // the last two sealed segments stay dirty
	res := cleanAll(t, l, CleanConfig{Limit: limit, DeleteRetentionMs: 1 << 50})
	if res.Segments == 0 || res.RecordsRemoved == 0 || l.Size() >= size || res.BytesAfter >= res.BytesBefore {
		t.Fatalf("cleaned %+v, size %d → %d", res, size, l.Size())
	}
	if got := logShape(l); got != shape {
		t.Fatalf("cleaning changed the log's shape:\n%s\nwant\n%s", got, shape)
	}
	check := func(l *Log) {
		t.Helper()
		got, _ := readRecords(t, l, w)
		for k, off := range w.latest {
			if _, ok := got[off]; !ok {
				t.Fatalf("latest record of %s (at %d) is gone", k, off)
			}
		}
		limitUser := l.UserOffset(limit)
		below := w.latestBelow(limitUser)
		for off, r := range w.recs {
			_, kept := got[off]
			switch {
			case off >= limitUser && !kept:
				t.Fatalf("record %d above the cleaned range was removed", off)
			case off < limitUser && kept && below[r.key] != off:
				t.Fatalf("superseded record %d of %s kept (latest below the limit %d)", off, r.key, below[r.key])
			case off < limitUser && !kept && below[r.key] == off:
				t.Fatalf("record %d, the latest of %s below the limit, was removed", off, r.key)
			}
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, "/p", cfg, NewPwriteEngine())
	if got := logShape(l); got != shape {
		t.Fatalf("after reopen:\n%s\nwant\n%s", got, shape)
	}
	check(l)
	if rep := l.Recovery(); rep.IndexesRebuilt != 0 {
		t.Fatalf("the cleaned segments' index files were rebuilt at reopen: %+v", rep)
	}
	// Cleaning again finds nothing more to remove below the limit.
	if res := cleanAll(t, l, CleanConfig{Limit: limit, DeleteRetentionMs: 1 << 50}); res.RecordsRemoved != 0 {
		t.Fatalf("a second pass removed %d records", res.RecordsRemoved)
	}
}

// A tombstone stays while delete.retention.ms has not passed since its
// segment's largest timestamp, and then goes with every older record of
// its key; a key written again after its tombstone keeps the new value.
func TestCleanTombstonesAfterDeleteRetention(t *testing.T) {
	fsys := vfs.NewMem()
	now := int64(10_000)
	cfg := Config{SegmentBytes: 2048, NowMs: func() int64 { return now }}
	l := openLog(t, fsys, "/p", cfg, NewPwriteEngine())
	defer func() { _ = l.Close() }()
	w := appendKeyed(t, l, 200, 8, 5, 9_000)
	limit := l.segs[len(l.segs)-1].base
	c := CleanConfig{Limit: limit, DeleteRetentionMs: 5_000}
	cleanAll(t, l, c)
	below := w.latestBelow(l.UserOffset(limit))
	tombs := func() (latestTombs, kept int) {
		got, _ := readRecords(t, l, w)
		for off, r := range got {
			if r.tomb && off < l.UserOffset(limit) {
				kept++
				if below[r.key] != off {
					t.Fatalf("superseded tombstone %d kept", off)
				}
			}
		}
		for _, off := range below {
			if w.recs[off].tomb {
				latestTombs++
			}
		}
		return latestTombs, kept
	}
	if want, kept := tombs(); want == 0 || kept != want {
		t.Fatalf("before delete.retention.ms: %d tombstones kept, want %d", kept, want)
	}
	now = 9_000 + 5_001
	l.cleanedTo = 0 // a dirty log again, as after a reopen
	cleanAll(t, l, c)
	if _, kept := tombs(); kept != 0 {
		t.Fatalf("after delete.retention.ms: %d tombstones kept", kept)
	}
	got, _ := readRecords(t, l, w)
	for k, off := range below {
		_, ok := got[off]
		if w.recs[off].tomb {
			for o, r := range got {
				if r.key == k && o < l.UserOffset(limit) {
					t.Fatalf("key %s deleted at %d still has record %d", k, off, o)
				}
			}
		} else if !ok {
			t.Fatalf("latest record of %s (at %d) is gone", k, off)
		}
	}
}

// A read at an offset whose record was cleaned away starts at the batch
// that held it (every batch keeps its offsets), whose next kept record —
// or the following batch's — is the next record.
func TestCleanReadAtCleanedOffset(t *testing.T) {
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "/p", Config{SegmentBytes: 2048}, NewPwriteEngine())
	defer func() { _ = l.Close() }()
	w := appendKeyed(t, l, 200, 4, 0, 1000)
	limit := l.segs[len(l.segs)-1].base
	cleanAll(t, l, CleanConfig{Limit: limit})
	_, order := readRecords(t, l, w)
	removed := 0
	for u := l.UserStartOffset(); u < l.UserOffset(limit); u++ {
		i := sort.Search(len(order), func(i int) bool { return order[i] >= u })
		if i < len(order) && order[i] == u {
			continue
		}
		removed++
		spans, err := l.Read(l.RaftOffset(u), 1<<20, l.WrittenOffset())
		if err != nil || len(spans) == 0 {
			t.Fatalf("read at cleaned offset %d: %v, %d spans", u, err, len(spans))
		}
		var b []byte
		for _, sp := range spans {
			if b, err = sp.AppendTo(b); err != nil {
				t.Fatal(err)
			}
		}
		ReleaseSpans(spans)
		next := int64(-1)
		for first := true; len(b) > 0 && next < 0; first = false {
			h, err := batch.ReadHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			if first && (h.BaseOffset > u || h.LastOffset() < u) {
				t.Fatalf("read at %d starts at batch %d..%d", u, h.BaseOffset, h.LastOffset())
			}
			var it batch.Records
			if err := it.Reset(b[:h.Size()]); err != nil {
				t.Fatal(err)
			}
			for it.Next() && !h.IsControl() {
				if it.Record().Offset >= u {
					next = it.Record().Offset
					break
				}
			}
			b = b[h.Size():]
		}
		if i < len(order) && next != order[i] {
			t.Fatalf("read at cleaned offset %d: next record %d, want %d", u, next, order[i])
		}
	}
	if removed == 0 {
		t.Fatal("nothing was cleaned away")
	}
}

// The cleaner's swap is crash-safe: the process dies at every file-system
// operation of a pass in turn, the file system loses what was not
// synced, and the reopened log holds, segment by segment, the old bytes
// or the cleaned ones — the same shape, every record one that was
// appended at its offset, the latest of every key present — and no
// temporary file; cleaning it then completes.
func TestCleanCrashAtEveryStep(t *testing.T) {
	cfg := Config{SegmentBytes: 2048}
	for step := 0; ; step++ {
		fsys := vfs.NewMem()
		l := openLog(t, fsys, "/p", cfg, NewPwriteEngine())
		w := appendKeyed(t, l, 120, 6, 4, 1000)
		shape := logShape(l)
		limit := l.segs[len(l.segs)-1].base
		ops := 0
		fsys.SetInjector(func(vfs.Op, string) error {
			if ops++; ops > step {
				return vfs.ErrCrashed
			}
			return nil
		})
		var err error
		for range 1000 {
			var res CleanResult
			if res, err = l.Clean(CleanConfig{Limit: limit, BytesMax: int64(step%2) * 700}); err != nil || res.Idle {
				break
			}
		}
		finished := err == nil
		if err != nil && !errors.Is(err, vfs.ErrCrashed) {
			t.Fatalf("step %d: %v", step, err)
		}
		abandon(l)
		fsys.Crash(uint64(step))
		l = openLog(t, fsys, "/p", cfg, NewPwriteEngine())
		if got := logShape(l); got != shape {
			t.Fatalf("crash at step %d:\n%s\nwant\n%s", step, got, shape)
		}
		names, _ := fsys.List("/p")
		for _, n := range names {
			if strings.HasSuffix(n, ".tmp") {
				t.Fatalf("crash at step %d left %s", step, n)
			}
		}
		got, _ := readRecords(t, l, w)
		for k, off := range w.latest {
			if _, ok := got[off]; !ok && !w.recs[off].tomb {
				t.Fatalf("crash at step %d: latest record of %s (at %d) is gone", step, k, off)
			}
		}
		cleanAll(t, l, CleanConfig{Limit: limit})
		got, _ = readRecords(t, l, w)
		below := w.latestBelow(l.UserOffset(limit))
		for off, r := range got {
			if off < l.UserOffset(limit) && below[r.key] != off {
				t.Fatalf("crash at step %d: after cleaning again, superseded record %d kept", step, off)
			}
		}
		_ = l.Close()
		if finished {
			if step < 10 {
				t.Fatalf("the pass took only %d file-system operations", step)
			}
			return
		}
	}
}

// BenchmarkCleanPass measures a whole cleaning pass of a log of about 9 MiB
// in 1 MiB segments, 64,000 records over 1,000 keys, on the in-memory FS
// (the cleaner's own cost: decoding, the map, filtering, writing, the scan
// before the swap; no device): bytes of dirty log per second.
func BenchmarkCleanPass(b *testing.B) {
	pad := strings.Repeat("x", 100)
	var logBytes int64
	for range b.N {
		b.StopTimer()
		l, err := OpenLog(vfs.NewMem(), "/p", Config{SegmentBytes: 1 << 20}, NewIO(NewPwriteEngine()))
		if err != nil {
			b.Fatal(err)
		}
		l.ownIO = true
		for i := range 64_000 / 8 {
			var recs []cleanRec
			for j := range 8 {
				recs = append(recs, cleanRec{key: fmt.Sprint("k", (i*8+j)%1000), value: fmt.Sprint(i, pad)})
			}
			if _, _, err := l.AppendLeader(keyedBatch(b, 1000, recs...), 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
		logBytes = l.Size()
		limit := l.LogEndOffset()
		b.StartTimer()
		for {
			res, err := l.Clean(CleanConfig{Limit: limit})
			if err != nil {
				b.Fatal(err)
			}
			if res.Idle || res.PassDone {
				break
			}
		}
		b.StopTimer()
		_ = l.Close()
	}
	b.SetBytes(logBytes)
}

// A log cleaned once and written a little since has a dirty ratio below
// min.cleanable.dirty.ratio and is left alone, until the oldest record
// not yet cleaned is max.compaction.lag.ms old (its segment's first batch
// timestamp): then it is cleaned whatever the ratio (Kafka's KIP-354).
func TestCleanMaxCompactionLag(t *testing.T) {
	now := int64(1_000)
	cfg := Config{SegmentBytes: 2048, NowMs: func() int64 { return now }}
	l := openLog(t, vfs.NewMem(), "/p", cfg, NewPwriteEngine())
	defer func() { _ = l.Close() }()
	appendKeyed(t, l, 300, 10, 0, now)
	all := func() CleanConfig { return CleanConfig{Limit: l.LogEndOffset() + 1, DeleteRetentionMs: 1 << 50} }
	if res := cleanAll(t, l, all()); res.RecordsRemoved == 0 {
		t.Fatalf("the first pass removed nothing: %+v", res)
	}
	const lag = 60_000
	now = 5_000
	for i := range 40 { // new records of the same keys, in a few new segments
		if _, _, err := l.AppendLeader(keyedBatch(t, now, cleanRec{key: fmt.Sprint("k", i%10), value: strings.Repeat("y", 40)}), 100); err != nil {
			t.Fatal(err)
		}
	}
	mustFlush(t, l)
	if r := l.DirtyRatio(); r <= 0 || r >= 0.5 {
		t.Fatalf("dirty ratio %.2f; the test wants a small dirty share", r)
	}
	c := all()
	c.MinDirtyRatio, c.MaxCompactionLagMs = 0.9, lag
	now += lag - 1
	if res := cleanAll(t, l, c); res.RecordsRemoved != 0 || res.Segments != 0 {
		t.Fatalf("cleaned below the dirty ratio before the max lag: %+v", res)
	}
	now++
	if res := cleanAll(t, l, c); res.RecordsRemoved == 0 {
		t.Fatalf("the max compaction lag passed and nothing was cleaned: %+v", res)
	}
	if r := l.DirtyRatio(); r != 0 {
		t.Fatalf("dirty ratio %.2f after the overdue pass", r)
	}
}

// The cleaner's progress survives a reopen: a cleaned log reopens clean
// (its dirty ratio 0, a pass finds nothing to map), and is dirty only
// above what it cleaned once more is written; a truncation below the
// cleaned part lowers the checkpoint before anything else is written.
func TestCleanCheckpoint(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 2048}
	l := openLog(t, fsys, "/p", cfg, NewPwriteEngine())
	appendKeyed(t, l, 300, 10, 0, 1000)
	c := CleanConfig{Limit: l.LogEndOffset() + 1, DeleteRetentionMs: 1 << 50}
	cleanAll(t, l, c)
	cleaned := l.cleanedTo
	if cleaned <= l.LogStartOffset() || l.DirtyRatio() != 0 {
		t.Fatalf("cleaned to %d, dirty ratio %.2f", cleaned, l.DirtyRatio())
	}
	reopen := func() {
		t.Helper()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, fsys, "/p", cfg, NewPwriteEngine())
	}
	reopen()
	if rep := l.Recovery(); rep.CleanedTo != cleaned || l.DirtyRatio() != 0 {
		t.Fatalf("reopened: cleaned to %d (want %d), dirty ratio %.2f", rep.CleanedTo, cleaned, l.DirtyRatio())
	}
	if res, err := l.Clean(c); err != nil || !res.Idle || res.BytesRead != 0 {
		t.Fatalf("a pass over the reopened clean log: %+v %v", res, err)
	}
	// Truncate into the cleaned part: the checkpoint follows at once.
	end := l.segs[len(l.segs)/2].base // a batch boundary inside the cleaned part
	if err := l.TruncateTo(end); err != nil {
		t.Fatal(err)
	}
	v, p, err := checkpoint.Read(fsys, l.path(cleanerFile), cleanerKind)
	if err != nil || v != 1 || int64(binary.BigEndian.Uint64(p)) != end {
		t.Fatalf("checkpoint after truncating to %d: %x %v", end, p, err)
	}
	reopen()
	if rep := l.Recovery(); rep.CleanedTo != end {
		t.Fatalf("reopened after the truncation: cleaned to %d, want %d", rep.CleanedTo, end)
	}
	_ = l.Close()
}
