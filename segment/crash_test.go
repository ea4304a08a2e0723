package segment

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

var (
	crashSeeds = flag.Int("seeds", 150, "TestCrashProperty: number of seeds to run")
	crashSeed  = flag.Int64("seed", -1, "TestCrashProperty: run only this seed (replay a failure)")
)

// TestCrashProperty runs a random workload (appends, flushes, syncs,
// truncations, retention, resets, clean restarts) on the in-memory FS,
// kills the process at a random operation or step, crashes the file system
// (unsynced bytes lost, the first lost write torn at a random byte) and
// reopens. The recovered log must be a prefix of what was appended, every
// batch at or below the last durable offset must read back byte-identical,
// and the log must go on working.
func TestCrashProperty(t *testing.T) {
	if *crashSeed >= 0 {
		if err := crashRun(t, uint64(*crashSeed)); err != nil {
			t.Fatalf("seed %d: %v", *crashSeed, err)
		}
		return
	}
	for seed := uint64(0); seed < uint64(*crashSeeds); seed++ {
		if err := crashRun(t, seed); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test ./segment -run 'TestCrashProperty$' -seed %d -v", seed, err, seed)
		}
	}
}

// crashModel is what the workload believes the log holds.
type crashModel struct {
	start   int64
	batches map[int64][]byte // by base offset, as stored
	// ever holds every batch ever appended at a base offset.
	ever map[int64][][]byte
	// durable is the last durable offset the log reported.
	durable int64
}

func (m *crashModel) clone() *crashModel {
	c := &crashModel{start: m.start, batches: map[int64][]byte{}, ever: m.ever, durable: m.durable}
	for k, v := range m.batches {
		c.batches[k] = v
	}
	return c
}

func (m *crashModel) truncate(end int64) {
	for k := range m.batches {
		if k >= end {
			delete(m.batches, k)
		}
	}
	m.durable = min(m.durable, end-1)
}

func (m *crashModel) bases() []int64 {
	var b []int64
	for k := range m.batches {
		b = append(b, k)
	}
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	return b
}

// rlastOf is the last raft offset of a stored batch at raft offset base.
func rlastOf(b []byte, base int64) int64 {
	h, _ := readHeaderBytes(b)
	return rlast(&h, base)
}

func crashRun(t *testing.T, seed uint64) (err error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fsys := vfs.NewMem()
	now := int64(1_000_000)
	cfg := Config{
		Fsync:              []FsyncPolicy{FsyncAlways, FsyncAlways, FsyncInterval, FsyncMessages, FsyncNever}[rng.IntN(5)],
		FsyncIntervalMs:    20,
		FsyncMessages:      int64(1 + rng.IntN(20)),
		SegmentBytes:       int64(2048 + rng.IntN(30000)),
		IndexIntervalBytes: int64(rng.IntN(2000)),
		WriteBufferBytes:   4096 << rng.IntN(4),
		ChainsInFlight:     1 + rng.IntN(4),
		PreallocateBytes:   []int64{-1, 4096, 1 << 20}[rng.IntN(3)],
		Preallocate:        []PreallocMode{PreallocKeepSize, PreallocZeroFill}[rng.IntN(2)],
		RetentionBytes:     int64(5000 + rng.IntN(50000)),
		RetentionMs:        -1,
		NowMs:              func() int64 { return now },
	}
	reorder := rng.IntN(2) == 0
	newEngine := func() Engine {
		if reorder {
			return newReorderEngine(rng.Uint64())
		}
		return NewPwriteEngine()
	}
	// The process dies at a random file-system operation (or never: then
	// the crash comes after the last step).
	deathAt, ops := -1, 0
	if rng.IntN(4) != 0 {
		deathAt = rng.IntN(400)
	}
	dead := false
	fsys.SetInjector(func(vfs.Op, string) error {
		ops++
		if deathAt >= 0 && ops > deathAt {
			dead = true
			return vfs.ErrCrashed
		}
		return nil
	})

	m := &crashModel{batches: map[int64][]byte{}, ever: map[int64][][]byte{}, durable: -1}
	var alt *crashModel // the other acceptable outcome of an interrupted operation
	l, err := OpenLog(fsys, "/p", cfg, NewIO(newEngine()))
	if err != nil {
		if !dead {
			return fmt.Errorf("first open: %w", err)
		}
		l = nil
	} else {
		l.ownIO = true
	}
	epoch := int32(0)
	steps := 50 + rng.IntN(250)
	for step := 0; step < steps && l != nil && !dead; step++ {
		alt = nil
		var opErr error
		switch r := rng.IntN(100); {
		case r < 65:
			if rng.IntN(20) == 0 {
				epoch++
			}
			b := makeBatch(rng, 1+rng.IntN(4), rng.IntN(1500), now)
			var base int64
			var e error
			if rng.IntN(10) == 0 {
				// A marked batch (a configuration entry): its marker is
				// written ahead of it.
				payload := []byte(fmt.Sprintf("m%d", step))
				b = MarkerBatch(payload, now)
				base, _, e = l.AppendLeaderMarked(b, epoch, payload)
			} else if rng.IntN(5) == 0 {
				// A batch lent to the log, written in place; its release
				// scribbles over it, so a write after the release stores
				// garbage that the recovery check catches.
				b = makeBatch(rng, 1+rng.IntN(4), InPlaceBytesMin+rng.IntN(1500), now)
				lent := b
				orig := bytes.Clone(b)
				base, _, e = l.AppendLeaderCheckedLent(b, epoch, func() func() {
					released := false
					return func() {
						if released {
							t.Errorf("seed %d: a lent batch released twice", seed)
						}
						released = true
						for i := range lent {
							lent[i] = 0xee
						}
					}
				})
				b = orig
			} else {
				base, _, e = l.AppendLeader(b, epoch)
			}
			if opErr = e; e == nil {
				s := stamped(b, l.UserOffset(base), epoch)
				m.batches[base] = s
				m.ever[base] = append(m.ever[base], s)
			}
		case r < 85:
			opErr = l.io.Flush()
		case r < 90:
			_, opErr = l.io.Wait()
		case r < 93:
			opErr = l.Sync()
		case r < 95:
			bases := m.bases()
			if len(bases) > 0 {
				end := bases[rng.IntN(len(bases))]
				alt = m.clone()
				alt.truncate(end)
				if opErr = l.TruncateTo(end); opErr == nil {
					m, alt = alt, nil
				}
			}
		case r < 97:
			before := l.LogStartOffset()
			alt = m.clone()
			alt.durable = -1 // any start between the old and new one
			res, e := l.ApplyRetention(l.WrittenOffset())
			if opErr = e; e == nil {
				for k := range m.batches {
					if k < res.LogStartOffset {
						delete(m.batches, k)
					}
				}
				m.start, alt = max(before, res.LogStartOffset), nil
			}
		case r < 98:
			newStart := max(0, l.LogEndOffset()+int64(rng.IntN(100))-50)
			alt = &crashModel{start: newStart, batches: map[int64][]byte{}, ever: m.ever, durable: -1}
			if opErr = l.Reset(newStart); opErr == nil {
				m, alt = alt, nil
			}
		case r < 99:
			// A clean restart, from the log's own record or from a node's
			// clean-stop record: everything must come back as it was.
			reopen := cfg
			if rng.IntN(2) == 0 {
				opErr = stopInto(l, fsys, &reopen)
			} else {
				opErr = l.Close()
			}
			if opErr == nil {
				m.durable = l.LogEndOffset() - 1
				l, opErr = OpenLog(fsys, "/p", reopen, NewIO(newEngine()))
				if opErr == nil {
					l.ownIO = true
					if !l.Recovery().Clean && !dead {
						return fmt.Errorf("step %d: reopen after Close was not clean: %v", step, l.Recovery())
					}
					if e := checkRecovered(t, l, m, true); e != nil && !dead {
						return fmt.Errorf("step %d: after a clean restart: %w", step, e)
					}
					if e := markersMatchOwnBase(l); e != nil && !dead {
						return fmt.Errorf("step %d: markers after a clean restart: %w", step, e)
					}
				} else {
					l = nil
				}
			}
		default:
			now += int64(rng.IntN(50))
		}
		if opErr != nil && !dead {
			return fmt.Errorf("step %d: %w", step, opErr)
		}
		if l != nil && l.Err() == nil && !dead {
			m.durable = max(m.durable, l.DurableOffset())
			if l.DurableOffset() > l.WrittenOffset() || l.WrittenOffset() >= l.LogEndOffset() {
				return fmt.Errorf("step %d: watermarks out of order: durable %d written %d LEO %d",
					step, l.DurableOffset(), l.WrittenOffset(), l.LogEndOffset())
			}
		}
	}
	if l != nil {
		abandon(l)
	}
	fsys.Crash(rng.Uint64())

	// As a node starts: a clean-stop record the crash left is used.
	if cfg.Stopped, err = LoadStopRecord(fsys, "/"); err != nil {
		return fmt.Errorf("clean-stop record after crash: %w", err)
	}
	l, err = OpenLog(fsys, "/p", cfg, NewIO(newEngine()))
	if err != nil {
		return fmt.Errorf("reopen after crash: %w", err)
	}
	l.ownIO = true
	defer l.Close()
	if testing.Verbose() {
		t.Logf("seed %d: policy %s, died=%v; recovery: %v", seed, cfg.Fsync, dead, l.Recovery())
	}
	if e := checkRecovered(t, l, m, false); e != nil {
		if alt == nil {
			return e
		}
		if e2 := checkRecovered(t, l, alt, false); e2 != nil {
			return fmt.Errorf("%w (and against the interrupted operation's outcome: %v)", e, e2)
		}
	}
	// The markers are exactly the marker batches the recovered log holds.
	if e := markersMatchOwnBase(l); e != nil {
		return fmt.Errorf("markers after the crash: %w", e)
	}
	// The recovered log goes on.
	b := makeBatch(rng, 2, 100, now)
	if _, _, err := l.AppendLeader(b, max(epoch, l.LastEpoch())); err != nil {
		return fmt.Errorf("append after recovery: %w", err)
	}
	if err := l.Sync(); err != nil {
		return fmt.Errorf("sync after recovery: %w", err)
	}
	return nil
}

// checkRecovered: every batch read back was appended at its offset (and
// is the model's batch there when the model has one); every model batch at
// or below the model's durable offset is there. exact: also nothing more.
func checkRecovered(t *testing.T, l *Log, m *crashModel, exact bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic reading the recovered log: %v", r)
		}
	}()
	got, err := readAllErr(l)
	if err != nil {
		return err
	}
	for off, b := range got {
		if want, ok := m.batches[off]; ok {
			if !bytes.Equal(b, want) {
				return fmt.Errorf("batch at %d differs from the one appended there", off)
			}
			continue
		}
		found := false
		for _, e := range m.ever[off] {
			found = found || bytes.Equal(e, b)
		}
		if !found {
			return fmt.Errorf("batch at %d was never appended", off)
		}
	}
	for _, base := range m.bases() {
		b := m.batches[base]
		if base < max(m.start, l.LogStartOffset()) || rlastOf(b, base) > m.durable {
			continue
		}
		if !bytes.Equal(got[base], b) {
			return fmt.Errorf("durable batch at %d (durable offset %d) lost; log is [%d, %d), recovery: %v",
				base, m.durable, l.LogStartOffset(), l.LogEndOffset(), l.Recovery())
		}
	}
	if exact && len(got) != len(m.batches) {
		return fmt.Errorf("%d batches, want %d", len(got), len(m.batches))
	}
	if l.DurableOffset() != l.LogEndOffset()-1 {
		return fmt.Errorf("after open, durable %d but LEO %d", l.DurableOffset(), l.LogEndOffset())
	}
	return nil
}

func readAllErr(l *Log) (map[int64][]byte, error) {
	out := map[int64][]byte{}
	for off := l.LogStartOffset(); off <= l.WrittenOffset(); {
		spans, err := l.Read(off, 1<<20, l.WrittenOffset())
		if err != nil {
			return nil, fmt.Errorf("Read(%d): %w", off, err)
		}
		if len(spans) == 0 {
			return nil, fmt.Errorf("Read(%d) empty below written offset %d", off, l.WrittenOffset())
		}
		for _, sp := range spans {
			b, err := sp.AppendTo(nil)
			if err != nil {
				return nil, err
			}
			for len(b) > 0 {
				h, err := readHeaderBytes(b)
				if err != nil || h.Size() > len(b) {
					return nil, fmt.Errorf("bad batch read back at %d: %v", off, err)
				}
				if want := l.UserOffset(off); h.BaseOffset != want {
					return nil, fmt.Errorf("batch read back at raft offset %d has base %d, want %d", off, h.BaseOffset, want)
				}
				out[off] = b[:h.Size()]
				off += rwidth(&h)
				b = b[h.Size():]
			}
		}
		ReleaseSpans(spans)
	}
	if len(out) == 0 && l.LogEndOffset() != l.LogStartOffset() {
		return nil, errors.New("no batches but a non-empty log")
	}
	return out, nil
}

// stopInto closes l as a node's graceful stop does (CloseInto, Commit)
// and loads the record as the next start does, into cfg.Stopped.
func stopInto(l *Log, fsys vfs.FS, cfg *Config) error {
	rec := NewStopRecord("/")
	if err := l.CloseInto(rec); err != nil {
		return err
	}
	if err := rec.Commit(fsys); err != nil {
		return err
	}
	var err error
	cfg.Stopped, err = LoadStopRecord(fsys, "/")
	return err
}

// markersMatchOwnBase is markersMatch from the base the log reports.
func markersMatchOwnBase(l *Log) error {
	var base []byte
	if m, ok := l.MarkerAt(l.LogStartOffset() - 1); ok {
		if m.Offset != l.LogStartOffset()-1 {
			return fmt.Errorf("base marker at %d, log start %d", m.Offset, l.LogStartOffset())
		}
		base = m.Payload
	}
	return markersMatch(l, base)
}
