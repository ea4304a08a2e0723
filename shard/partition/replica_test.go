package partition

import (
	"errors"
	"fmt"
	"github.com/corestream/corestream/netio/uring"
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
)

// env is one shard with a Host, as the node layer builds it.
type env struct {
	t    *testing.T
	g    *shard.Group
	sh   *shard.Shard
	host *Host
	fs   vfs.FS
	dir  string
}

func newEnv(t *testing.T, fs vfs.FS, dir string) *env {
	t.Helper()
	e := &env{t: t, fs: fs, dir: dir}
	g, err := shard.NewGroup(shard.Config{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	e.g, e.sh = g, g.Shard(0)
	e.do(func() {
		eng := testEngine(fs)
		h, err := NewHost(e.sh, eng, 10*time.Millisecond, 0)
		if err != nil {
			t.Fatal(err)
		}
		e.host = h
	})
	t.Cleanup(e.stop)
	return e
}

func (e *env) stop() {
	if e.g == nil {
		return
	}
	e.do(func() { e.host.Close(nil) })
	if err := e.g.Stop(); err != nil {
		e.t.Errorf("stop: %v", err)
	}
	e.g = nil
}

func (e *env) do(fn func()) {
	e.t.Helper()
	if err := e.sh.Do(func(*shard.Shard) { fn() }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) open(fsync segment.FsyncPolicy) *Replica {
	var r *Replica
	e.do(func() {
		var err error
		r, err = e.host.Open(Config{DenseOffsets: true, FS: e.fs, Dir: e.dir + "/p0", Log: segment.Config{Fsync: fsync, BatchBytesMax: 1 << 20},
			Topic: "t", TopicID: [16]byte{1}, Partition: 0, Self: 1, Replicas: []raftlite.NodeID{1}})
		if err != nil {
			e.t.Fatal(err)
		}
	})
	e.waitPrimary(r)
	return r
}

func (e *env) waitPrimary(r *Replica) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ok bool
		e.do(func() { ok = r.IsPrimary() && r.CommitEnd() >= r.log.LogEndOffset() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal("replica did not become primary")
		}
		time.Sleep(time.Millisecond)
	}
}

// The acknowledgement levels, by name, for the produce helper.
const acksQuorum, acksPrimary = false, true

func (e *env) produce(r *Replica, b []byte, acksPrimary bool) ProduceResult {
	out := make(chan ProduceResult, 1)
	e.do(func() {
		r.Produce(&ProduceArgs{Generation: GenerationUnknown, AcksPrimary: acksPrimary, Records: b},
			func(res ProduceResult) { out <- res })
	})
	select {
	case res := <-out:
		return res
	case <-time.After(10 * time.Second):
		e.t.Fatal("produce not answered")
	}
	return ProduceResult{}
}

func (e *env) fetch(r *Replica, req FetchArgs) ([]byte, FetchResult) {
	out := make(chan FetchResult, 1)
	e.do(func() { r.Fetch(&req, func(res FetchResult) { out <- res }) })
	var res FetchResult
	select {
	case res = <-out:
	case <-time.After(10 * time.Second):
		e.t.Fatal("fetch not answered")
	}
	var data []byte
	for _, sp := range res.Spans {
		var err error
		if data, err = sp.AppendTo(data); err != nil {
			e.t.Fatal(err)
		}
	}
	segment.ReleaseSpans(res.Spans)
	return data, res
}

func mkBatch(t *testing.T, n int, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	opts := batch.Options{}
	if pid >= 0 {
		opts = batch.Options{Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
	}
	b, err := batch.NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := b.AppendKV(1000, nil, []byte(fmt.Sprintf("v%d-%d", seq, i))); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// values returns every data record's value in fetched bytes (control
// batches skipped), starting at offset from.
func values(t *testing.T, data []byte, from int64) []string {
	var out []string
	var it batch.Records
	for len(data) >= batch.HeaderSize {
		h, err := batch.ReadHeader(data)
		if err != nil || h.Size() > len(data) {
			break
		}
		b := data[:h.Size()]
		data = data[h.Size():]
		if h.IsControl() {
			continue
		}
		if err := it.Reset(b); err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			if r := it.Record(); r.Offset >= from {
				out = append(out, string(r.Value))
			}
		}
	}
	return out
}

func TestProduceFetchSingleNode(t *testing.T) {
	for _, fsync := range []segment.FsyncPolicy{segment.FsyncAlways, segment.FsyncNever} {
		t.Run(fsync.String(), func(t *testing.T) {
			e := newEnv(t, vfs.OS(), t.TempDir())
			r := e.open(fsync)
			var bases []int64
			for i := 0; i < 5; i++ {
				res := e.produce(r, mkBatch(t, 3, -1, 0, int32(i)), acksQuorum)
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				bases = append(bases, res.Produced.BaseOffset)
			}
			// The new primary's no-op takes no offset: records start at 0.
			if bases[0] != 0 || bases[4] != 12 {
				t.Fatalf("base offsets %v", bases)
			}
			data, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 3, MaxBytes: 1 << 20})
			if res.Err != nil || res.HighWatermark != 15 {
				t.Fatalf("fetch: hw %d err %v", res.HighWatermark, res.Err)
			}
			got := values(t, data, 3)
			if len(got) != 12 || got[0] != "v1-0" || got[11] != "v4-2" {
				t.Fatalf("values %v", got)
			}
		})
	}
}

// TestProduceComputesTheCRCOnce: a produced batch's CRC-32C is checked
// by Produce, and the log appends the same bytes without computing it
// again (the no-op of a new primary is not a produced batch).
func TestProduceComputesTheCRCOnce(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncNever)
	for i := 0; i < 5; i++ {
		if res := e.produce(r, mkBatch(t, 3, -1, 0, int32(i)), acksQuorum); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	var n int64
	var stale bool
	e.do(func() { n, stale = r.checkedAppends, r.checked != nil })
	if n != 5 || stale {
		t.Fatalf("%d of 5 produced batches appended without a second CRC (a batch still marked checked: %v)", n, stale)
	}
	bad := mkBatch(t, 3, -1, 0, 9)
	bad[len(bad)-1] ^= 1
	if res := e.produce(r, bad, acksQuorum); !errors.Is(res.Err, ErrCorruptBatch) {
		t.Fatalf("a batch with a wrong CRC: %v, want ErrCorruptBatch", res.Err)
	}
}

func TestIdempotentRetryIsNotWrittenTwice(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncAlways)
	b0 := mkBatch(t, 2, 7, 0, 0)
	first := e.produce(r, b0, acksQuorum)
	again := e.produce(r, b0, acksQuorum)
	if first.Err != nil || again.Err != nil || first.Produced.BaseOffset != again.Produced.BaseOffset {
		t.Fatalf("retry: %+v then %+v", first, again)
	}
	if res := e.produce(r, mkBatch(t, 2, 7, 0, 5), acksQuorum); !errors.Is(res.Err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", res.Err)
	}
	if res := e.produce(r, mkBatch(t, 2, 8, 0, 3), acksQuorum); !errors.Is(res.Err, ErrUnknownProducer) {
		t.Fatalf("unknown producer: %v", res.Err)
	}
	if res := e.produce(r, mkBatch(t, 2, 7, 0, 2), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	// After a restart the table is rebuilt from the log: the same retry is
	// still recognised.
	dir := e.dir
	e.stop()
	e = newEnv(t, vfs.OS(), dir)
	r = e.open(segment.FsyncAlways)
	res := e.produce(r, mkBatch(t, 2, 7, 0, 2), acksQuorum)
	if res.Err != nil || res.Produced.BaseOffset != 2 {
		t.Fatalf("retry after restart: %+v", res)
	}
	if res := e.produce(r, mkBatch(t, 2, 7, 0, 4), acksQuorum); res.Err != nil || res.Produced.BaseOffset != 4 {
		t.Fatalf("next after restart: %+v", res)
	}
	if res := e.produce(r, mkBatch(t, 1, 7, 0, 6), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := e.produce(r, mkBatch(t, 1, 7, 1, 3), acksQuorum); !errors.Is(res.Err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch not at 0: %v", res.Err)
	}
}

func TestBadBatchesAreRefused(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncAlways)
	b := mkBatch(t, 2, -1, 0, 0)
	b[len(b)-1] ^= 0xff
	if res := e.produce(r, b, acksQuorum); !errors.Is(res.Err, ErrCorruptBatch) {
		t.Fatalf("corrupt: %v", res.Err)
	}
	big := make([]byte, 2<<20)
	if res := e.produce(r, big, acksQuorum); !errors.Is(res.Err, ErrBatchTooLarge) {
		t.Fatalf("too large: %v", res.Err)
	}
	var end int64
	e.do(func() { end = r.log.LogEndOffset() })
	if end != 1 {
		t.Fatalf("a refused batch reached the log: end %d", end)
	}
}

func TestLongPollFetch(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncAlways)
	out := make(chan FetchResult, 1)
	e.do(func() {
		r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20, MinBytes: 1, MaxWait: 10000 * time.Millisecond},
			func(res FetchResult) { out <- res })
	})
	select {
	case <-out:
		t.Fatal("fetch answered before any data")
	default:
	}
	if res := e.produce(r, mkBatch(t, 1, -1, 0, 0), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	select {
	case res := <-out:
		if res.Err != nil || res.Bytes == 0 {
			t.Fatalf("woken fetch: %+v", res)
		}
		segment.ReleaseSpans(res.Spans)
	case <-time.After(5 * time.Second):
		t.Fatal("long poll not woken by the commit")
	}
	// MaxWait passes with nothing new: answered empty.
	start := time.Now()
	_, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 1, MaxBytes: 1 << 20, MinBytes: 1, MaxWait: 50 * time.Millisecond})
	if res.Err != nil || res.Bytes != 0 || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("timed-out fetch: %+v after %v", res, time.Since(start))
	}
	if _, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 99, MaxBytes: 1}); !errors.Is(res.Err, ErrOffsetOutOfRange) {
		t.Fatalf("out of range: %v", res.Err)
	}
}

func TestRouteChecks(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncAlways)
	var term int32
	e.do(func() { _, term = r.Route() })
	e.do(func() {
		if err := r.CheckRoute(term - 1); !errors.Is(err, ErrStaleGeneration) {
			t.Errorf("older generation: %v", err)
		}
		if err := r.CheckRoute(term + 1); !errors.Is(err, ErrNotPrimary) {
			t.Errorf("newer generation: %v", err)
		}
		if err := r.CheckRoute(term); err != nil {
			t.Errorf("current generation: %v", err)
		}
	})
}

// A disk that fills up: the produce fails, nothing partial is visible,
// and produces work again once space returns.
func TestNoSpaceAndRecovery(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "data")
	r := e.open(segment.FsyncAlways)
	if res := e.produce(r, mkBatch(t, 1, -1, 0, 0), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	var used int64
	e.do(func() { used = r.log.Size() })
	mem.SetCapacity(used + 100)
	res := e.produce(r, mkBatch(t, 50, -1, 0, 1), acksQuorum)
	if !errors.Is(res.Err, ErrStorage) {
		t.Fatalf("full disk: %v", res.Err)
	}
	mem.SetCapacity(-1)
	e.waitPrimary(r)
	res = e.produce(r, mkBatch(t, 2, -1, 0, 2), acksQuorum)
	if res.Err != nil {
		t.Fatalf("after space returned: %v", res.Err)
	}
	data, _ := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20})
	got := values(t, data, 0)
	if len(got) != 3 || got[0] != "v0-0" || got[1] != "v2-0" {
		t.Fatalf("values after recovery %v", got)
	}
}

// testEngine is the engine a node gives a shard on fsys: io_uring where
// the kernel allows it and fsys has descriptors, else pwrite.
func testEngine(fsys vfs.FS) segment.Engine {
	if u, err := uring.ForFS(fsys); err == nil {
		return u
	}
	return segment.NewPwriteEngine()
}
