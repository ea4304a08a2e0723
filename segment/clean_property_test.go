package segment

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

var (
	cleanSeeds = flag.Int("clean-seeds", 40, "TestCleanProperty: number of seeds to run")
	cleanSeed  = flag.Int64("clean-seed", -1, "TestCleanProperty: run only this seed (replay a failure)")
)

// TestCleanProperty runs random keyed workloads with tombstones and
// zero-width batches, interleaving appends, cleaner steps with random
// limits, byte budgets, key-map bounds and delete retentions, clock
// moves and reopens, against a map model. After every step: every record
// read is one appended at its offset, offsets increase, the log's shape
// (offsets, epochs, markers, translation) is what the step found, nothing
// at or above the step's limit changed, the last record of every key is
// its latest, or gone only when that was a tombstone, and a tombstone
// went only once delete.retention.ms had passed.
func TestCleanProperty(t *testing.T) {
	var st cleanStats
	if *cleanSeed >= 0 {
		if err := cleanRun(t, uint64(*cleanSeed), &st); err != nil {
			t.Fatalf("seed %d: %v", *cleanSeed, err)
		}
		return
	}
	for seed := uint64(0); seed < uint64(*cleanSeeds); seed++ {
		if err := cleanRun(t, seed, &st); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test ./segment -run 'TestCleanProperty$' -clean-seed %d -v", seed, err, seed)
		}
	}
	// The workloads must exercise the cleaner, not only check it did no harm.
	if st.removed == 0 || st.tombsGone == 0 || st.budgetSteps == 0 {
		t.Fatalf("the workloads removed %d records and %d latest tombstones, %d steps stopped at their budget", st.removed, st.tombsGone, st.budgetSteps)
	}
	t.Logf("%+v", st)
}

// cleanStats counts what the property test's cleaner steps did.
type cleanStats struct {
	removed, tombsGone, budgetSteps int64
}

func cleanRun(t *testing.T, seed uint64, st *cleanStats) error {
	rng := rand.New(rand.NewPCG(seed, 27))
	now := int64(1_000_000)
	cfg := Config{SegmentBytes: int64(1024 + rng.IntN(3072)), NowMs: func() int64 { return now },
		Fsync: []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNever}[rng.IntN(3)]}
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "/p", cfg, NewPwriteEngine())
	defer func() { _ = l.Close() }()
	w := &cleanWorkload{recs: map[int64]cleanRec{}, latest: map[string]int64{}}
	ts := map[int64]int64{} // user offset → timestamp
	keys := 1 + rng.IntN(20)
	epoch, n := int32(1), 0
	limit := int64(0)
	// A topic's delete.retention.ms (a step that finishes a segment
	// rewrite started by an earlier one applies the earlier's setting).
	retention := []int64{0, 30, 1 << 40}[rng.IntN(3)]
	for round := range 60 {
		for range 1 + rng.IntN(6) {
			if rng.IntN(10) == 0 {
				epoch++
				if _, _, err := l.AppendLeader(batch.BuildConsensus(batch.ConsensusKeyNoop, nil, now, true), epoch); err != nil {
					return err
				}
			}
			var recs []cleanRec
			for range 1 + rng.IntN(4) {
				r := cleanRec{key: fmt.Sprint("k", rng.IntN(keys)), value: fmt.Sprintf("v%d%s", n, strings.Repeat("x", rng.IntN(40)))}
				r.tomb = rng.IntN(7) == 0
				recs = append(recs, r)
				n++
			}
			user := l.UserEndOffset()
			if _, _, err := l.AppendLeader(keyedBatch(t, now, recs...), epoch); err != nil {
				return err
			}
			for j, r := range recs {
				w.recs[user+int64(j)], ts[user+int64(j)] = r, now
				w.latest[r.key] = user + int64(j)
			}
		}
		mustFlush(t, l)
		now += int64(rng.IntN(40))
		if rng.IntN(8) == 0 {
			if err := l.Close(); err != nil {
				return err
			}
			l = openLog(t, fsys, "/p", cfg, NewPwriteEngine())
		}
		for range rng.IntN(4) {
			// Limits mostly grow, as a replica's commit does; now and then
			// one goes back (a pass under way then starts again).
			limit = max(limit, l.LogStartOffset()+rng.Int64N(l.LogEndOffset()-l.LogStartOffset()+1))
			if rng.IntN(10) == 0 {
				limit = l.LogStartOffset() + rng.Int64N(limit-l.LogStartOffset()+1)
			}
			c := CleanConfig{Limit: limit,
				KeysMax: 1 + rng.IntN(2*keys), DeleteRetentionMs: retention}
			if rng.IntN(2) == 0 {
				c.BytesMax = int64(200 + rng.IntN(4000))
			}
			if err := cleanStep(t, l, w, ts, c, now, round, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// cleanStep runs one Clean step and checks the invariants.
func cleanStep(t *testing.T, l *Log, w *cleanWorkload, ts map[int64]int64, c CleanConfig, now int64, round int, st *cleanStats) error {
	shape := logShape(l)
	before, _ := readRecords(t, l, w)
	res, err := l.Clean(c)
	if err != nil {
		return fmt.Errorf("round %d: Clean(%+v): %w", round, c, err)
	}
	if got := logShape(l); got != shape {
		return fmt.Errorf("round %d: the step changed the log's shape:\n%s\nwant\n%s", round, got, shape)
	}
	after, order := readRecords(t, l, w)
	limitUser := l.UserOffset(c.Limit)
	for off := range before {
		if _, ok := after[off]; !ok && off >= limitUser {
			return fmt.Errorf("round %d: record %d at or above the limit (user %d) was removed", round, off, limitUser)
		}
	}
	st.removed += res.RecordsRemoved
	if res.Segments > 0 && !res.PassDone {
		st.budgetSteps++
	}
	if res.RecordsRemoved != int64(len(before)-len(after)) {
		return fmt.Errorf("round %d: the step says %d records removed, %d went", round, res.RecordsRemoved, len(before)-len(after))
	}
	lastOf := map[string]int64{}
	for _, off := range order {
		lastOf[after[off].key] = off
	}
	for k, want := range w.latest {
		got, ok := lastOf[k]
		switch {
		case ok && got != want:
			return fmt.Errorf("round %d: the last record of %s is at %d, its latest at %d", round, k, got, want)
		case !ok && !w.recs[want].tomb:
			return fmt.Errorf("round %d: key %s is gone; its latest record %d is a value", round, k, want)
		case !ok:
			_, was := before[want]
			if was {
				st.tombsGone++
			}
			if was && now-ts[want] <= c.DeleteRetentionMs {
				return fmt.Errorf("round %d: tombstone %d of %s went %d ms after it was written, delete.retention.ms %d",
					round, want, k, now-ts[want], c.DeleteRetentionMs)
			}
		}
	}
	return nil
}
