package partition

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

var (
	crashSeeds = flag.Int("crash.seeds", 40, "power-loss runs of TestAckedSurvivesPowerLoss")
	crashSeed  = flag.Int64("crash.seed", -1, "replay only this seed of TestAckedSurvivesPowerLoss")
)

// errPoweredOff fails every file operation from the moment power is lost.
var errPoweredOff = errors.New("test: powered off")

// TestAckedSurvivesPowerLoss is the fsync=always promise at the replica:
// produces run with several in flight, the power goes at a random moment
// (every file operation fails from then on), the in-memory file system then
// keeps a random part of what was not synced (vfs.MemFS.Crash), and the
// replica is opened again. Every produce that was acknowledged, before or
// after the power went, with acks=quorum or acks=primary, must be there at the offset it was acknowledged
// with, once, with every batch in the order it was proposed.
//
// A failing seed is printed; -crash.seed=N replays it (the crash point
// counts acknowledgements, so the timing of in-flight writes can differ
// between runs, but the dropped suffix is chosen by the seed).
func TestAckedSurvivesPowerLoss(t *testing.T) {
	seeds := make([]int64, 0, *crashSeeds)
	if *crashSeed >= 0 {
		seeds = append(seeds, *crashSeed)
	} else {
		n := *crashSeeds
		if testing.Short() {
			n = min(n, 8)
		}
		for s := range int64(n) {
			seeds = append(seeds, s)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if !powerLossRun(t, seed) {
				t.Logf("replay: go test ./shard/partition -run 'TestAckedSurvivesPowerLoss' -crash.seed=%d", seed)
			}
		})
	}
}

// inFlightMax is how many produces a power-loss run keeps in flight.
const inFlightMax = 8

type answered struct {
	seq int
	res ProduceResult
}

// powerLossRun runs one seed and reports whether it passed.
func powerLossRun(t *testing.T, seed int64) bool {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xc0ffee))
	mem := vfs.NewMem()
	e := newEnv(t, mem, "data")
	r := e.open(segment.FsyncAlways)

	answers := make(chan answered, inFlightMax)
	acks := [2]bool{acksQuorum, acksPrimary} // both wait for the fsync under always
	issue := func(seq int) {
		b := mkBatch(t, 1+seq%3, -1, 0, int32(seq))
		e.do(func() {
			r.Produce(&ProduceArgs{Generation: GenerationUnknown,
				AcksPrimary: acks[seq%2], Timeout: 5 * time.Second, Records: b}, func(res ProduceResult) { answers <- answered{seq, res} })
		})
	}
	acked := map[int]int64{} // seq -> base offset
	var refused []error
	record := func(a answered) {
		if a.res.Err != nil {
			refused = append(refused, a.res.Err)
			return
		}
		acked[a.seq] = a.res.Produced.BaseOffset
	}

	crashAfter := 1 + rng.IntN(80)
	next, pending := 0, 0
	for ; next < inFlightMax; next++ {
		issue(next)
		pending++
	}
	for len(acked) < crashAfter {
		select {
		case a := <-answers:
			pending--
			record(a)
			if a.res.Err != nil {
				t.Fatalf("produce %d before the power loss: %v", a.seq, a.res.Err)
			}
			issue(next)
			next++
			pending++
		case <-time.After(10 * time.Second):
			t.Fatalf("produces stalled at %d acknowledgements", len(acked))
		}
	}
	mem.SetInjector(func(vfs.Op, string) error { return errPoweredOff })
	for ; pending > 0; pending-- {
		select {
		case a := <-answers:
			record(a)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d produces never answered after the power loss", pending)
		}
	}
	e.stop()
	mem.Crash(rng.Uint64())

	e = newEnv(t, mem, "data")
	r = e.open(segment.FsyncAlways)
	data, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 64 << 20})
	if res.Err != nil {
		t.Fatalf("fetch after the power loss: %v", res.Err)
	}
	e.stop()
	return checkSurvivors(t, acked, recordsAt(t, data))
}

// recordsAt decodes fetched batches into value by offset (data records
// only).
func recordsAt(t *testing.T, data []byte) map[int64]string {
	out := map[int64]string{}
	var it batch.Records
	for {
		b, rest, err := batch.Cut(data)
		if err != nil {
			t.Fatalf("fetched bytes: %v", err)
		}
		if b == nil {
			return out
		}
		data = rest
		h, err := batch.ReadHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.IsControl() {
			continue
		}
		if err := it.Reset(b); err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			rec := it.Record()
			out[rec.Offset] = string(rec.Value)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkSurvivors checks every acknowledged batch is at its offset, that no
// batch appears twice, and that batches are in proposal order.
func checkSurvivors(t *testing.T, acked map[int]int64, got map[int64]string) bool {
	t.Helper()
	ok := true
	for seq, base := range acked {
		for i := 0; i < 1+seq%3; i++ {
			want := fmt.Sprintf("v%d-%d", seq, i)
			if v := got[base+int64(i)]; v != want {
				t.Errorf("acknowledged record %s at offset %d: found %q", want, base+int64(i), v)
				ok = false
			}
		}
	}
	seen := map[string]int64{}
	lastSeq, lastOff := -1, int64(-1)
	for off := int64(0); len(seen) < len(got); off++ {
		v, present := got[off]
		if !present {
			if off > 1<<20 {
				break
			}
			continue
		}
		if prev, dup := seen[v]; dup {
			t.Errorf("record %s at offsets %d and %d", v, prev, off)
			ok = false
		}
		seen[v] = off
		seq, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), "-", 2)[0])
		if seq < lastSeq {
			t.Errorf("batch %d at offset %d after batch %d at %d: out of proposal order", seq, off, lastSeq, lastOff)
			ok = false
		}
		lastSeq, lastOff = seq, off
	}
	return ok
}
