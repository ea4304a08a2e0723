package partition

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
)

// memberFetch runs a fetch on member m and returns its values from
// args.Offset on (control batches skipped) and its result.
func (tg *testGroup) memberFetch(m *testMember, args FetchArgs) ([]string, FetchResult) {
	tg.t.Helper()
	out := make(chan FetchResult, 1)
	m.do(tg.t, func() { m.r.Fetch(&args, func(res FetchResult) { out <- res }) })
	return tg.fetchValues(out, args.Offset)
}

// fetchValues waits for a fetch's answer on out and decodes it as
// memberFetch does.
func (tg *testGroup) fetchValues(out chan FetchResult, from int64) ([]string, FetchResult) {
	tg.t.Helper()
	var res FetchResult
	select {
	case res = <-out:
	case <-time.After(10 * time.Second):
		tg.t.Fatal("fetch not answered within 10 s")
	}
	var data []byte
	for _, sp := range res.Spans {
		var err error
		if data, err = sp.AppendTo(data); err != nil {
			tg.t.Fatal(err)
		}
	}
	segment.ReleaseSpans(res.Spans)
	return values(tg.t, data, from), res
}

// TestFollowerReadStopsAtItsHighWatermark: a follower holding a record it
// does not know to be committed (its acknowledgements to the primary are
// lost, and the third replica is cut off, so the record cannot commit)
// serves follower reads up to its own high watermark only: never the
// uncommitted record, OFFSET_OUT_OF_RANGE above its high watermark, and a
// long poll at its high watermark answered once the record commits.
// Without a follower flag it still answers NOT_PRIMARY.
func TestFollowerReadStopsAtItsHighWatermark(t *testing.T) {
	tg := newTestGroup(t)
	for _, id := range ids123 {
		tg.start(id, ids123, nil)
	}
	p := tg.primary()
	var f, g *testMember
	for _, id := range ids123 {
		if id != p.id {
			if f == nil {
				f = tg.member(id)
			} else {
				g = tg.member(id)
			}
		}
	}
	produce := func(v string, acksPrimary bool) ProduceResult {
		out := make(chan ProduceResult, 1)
		b := mkBatchValue(t, v)
		p.do(t, func() {
			p.r.Produce(&ProduceArgs{Generation: GenerationUnknown, AcksPrimary: acksPrimary, Records: b, Timeout: 5 * time.Second},
				func(res ProduceResult) { out <- res })
		})
		res := <-out
		if res.Err != nil {
			t.Fatalf("produce %s: %v", v, res.Err)
		}
		return res
	}
	a := produce("a", false)
	tg.waitFor(f, "the follower learns a is committed", func(r *Replica) bool { return r.HighWatermark() > a.Produced.BaseOffset })

	// Cut g off, and lose f's acknowledgements: b reaches f's log but
	// cannot commit.
	tg.setDrop(func(from raftlite.NodeID, m raftlite.Message) bool {
		return from == g.id || m.To == g.id || (from == f.id && m.Type == raftlite.MsgAppResp)
	})
	b := produce("b", true)
	tg.waitFor(f, "the follower holds b", func(r *Replica) bool { return r.log.UserEndOffset() > b.Produced.BaseOffset })
	var hw int64
	f.do(t, func() { hw = f.r.HighWatermark() })
	if hw != b.Produced.BaseOffset {
		t.Fatalf("follower high watermark %d, want %d (b at %d must not be committed)", hw, b.Produced.BaseOffset, b.Produced.BaseOffset)
	}

	got, res := tg.memberFetch(f, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20, Follower: true})
	if res.Err != nil || !slices.Equal(got, []string{"a"}) || res.HighWatermark != hw {
		t.Fatalf("follower read from 0: %v, hw %d, err %v; want [a], hw %d (never the uncommitted b)", got, res.HighWatermark, res.Err, hw)
	}
	_, res = tg.memberFetch(f, FetchArgs{Generation: GenerationUnknown, Offset: hw + 1, MaxBytes: 1 << 20, Follower: true})
	if !errors.Is(res.Err, ErrOffsetOutOfRange) {
		t.Fatalf("follower read above its high watermark: %v, want ErrOffsetOutOfRange", res.Err)
	}
	_, res = tg.memberFetch(f, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20})
	if !errors.Is(res.Err, ErrNotPrimary) {
		t.Fatalf("a fetch without the follower flag on a follower: %v, want ErrNotPrimary", res.Err)
	}
	var term int32
	f.do(t, func() { term = f.r.term })
	_, res = tg.memberFetch(f, FetchArgs{Generation: term + 1, Offset: 0, MaxBytes: 1 << 20, Follower: true})
	if !errors.Is(res.Err, ErrNotPrimary) {
		t.Fatalf("a follower read at a generation the follower has not reached: %v, want ErrNotPrimary", res.Err)
	}

	// A long poll at the follower's high watermark waits for b to commit.
	out := make(chan FetchResult, 1)
	f.do(t, func() {
		f.r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: hw, MaxBytes: 1 << 20, MinBytes: 1, MaxWait: 10 * time.Second, Follower: true},
			func(res FetchResult) { out <- res })
	})
	select {
	case res := <-out:
		t.Fatalf("the long poll answered before b committed: %+v", res)
	default:
	}
	tg.setDrop(nil)
	got, res = tg.fetchValues(out, hw)
	if res.Err != nil || !slices.Equal(got, []string{"b"}) {
		t.Fatalf("long poll after b committed: %v, err %v; want [b]", got, res.Err)
	}
}
