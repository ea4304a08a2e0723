package partition

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// txnBatch is n transactional records of producer pid (values
// "<tag>-<i>"), at sequence seq.
func txnBatch(t *testing.T, tag string, n int, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	b, err := batch.NewBuilder(batch.Options{Idempotent: true, Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := b.AppendKV(1000, nil, []byte(fmt.Sprintf("%s-%d", tag, i))); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) marker(r *Replica, m batch.TxnMarker) ProduceResult {
	out := make(chan ProduceResult, 1)
	e.do(func() {
		r.WriteTxnMarker(&MarkerArgs{Generation: GenerationUnknown, Marker: m}, func(res ProduceResult) { out <- res })
	})
	select {
	case res := <-out:
		return res
	case <-time.After(10 * time.Second):
		e.t.Fatal("marker not answered")
	}
	return ProduceResult{}
}

// stable reads the replica's LSO, high watermark and open transactions.
func (e *env) stable(r *Replica) (lso, hw int64, open int) {
	e.do(func() { lso, hw, open = r.LastStableOffset(), r.HighWatermark(), r.OpenTransactions() })
	return lso, hw, open
}

// A partition's side of transactions, as Kafka's: two producers'
// transactions interleave with plain records; the last stable offset
// stays at the first offset of the oldest open transaction; markers take
// one offset each; a read_committed fetch stops at the LSO and lists the
// aborted transactions in its range, read_uncommitted reads to the high
// watermark; a marker of an old epoch is fenced; and all of it is the
// same after the replica reopens (rebuilt from the log).
func TestTransactionsInAPartition(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, vfs.OS(), dir)
	r := e.open(segment.FsyncNever)
	must := func(res ProduceResult) int64 {
		t.Helper()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res.Produced.BaseOffset
	}
	// A: offsets 0-1 (open); plain 2; B: 3-4 (open); A: 5; plain 6.
	must(e.produce(r, txnBatch(t, "a0", 2, 10, 0, 0), acksQuorum))
	must(e.produce(r, mkBatch(t, 1, -1, 0, 0), acksQuorum))
	must(e.produce(r, txnBatch(t, "b0", 2, 20, 0, 0), acksQuorum))
	must(e.produce(r, txnBatch(t, "a1", 1, 10, 0, 2), acksQuorum))
	must(e.produce(r, mkBatch(t, 1, -1, 0, 1), acksQuorum))
	if lso, hw, open := e.stable(r); lso != 0 || hw != 7 || open != 2 {
		t.Fatalf("two open transactions: LSO %d, HW %d, open %d; want 0, 7, 2", lso, hw, open)
	}
	// read_committed waits below the LSO: nothing to read at 0.
	if data, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20, ReadCommitted: true}); len(data) != 0 || res.LastStableOffset != 0 {
		t.Fatalf("read_committed below an open transaction: %d bytes, LSO %d", len(data), res.LastStableOffset)
	}
	// A aborts (marker at 7): the LSO moves to B's first offset, 3.
	if off := must(e.marker(r, batch.TxnMarker{ProducerID: 10, ProducerEpoch: 0})); off != 7 {
		t.Fatalf("abort marker at %d, want 7", off)
	}
	if lso, hw, open := e.stable(r); lso != 3 || hw != 8 || open != 1 {
		t.Fatalf("after A's abort: LSO %d, HW %d, open %d; want 3, 8, 1", lso, hw, open)
	}
	data, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20, ReadCommitted: true})
	if got := values(t, data, 0); !slices.Equal(got, []string{"a0-0", "a0-1", "v0-0"}) {
		t.Fatalf("read_committed to the LSO: %v", got)
	}
	if want := []AbortedTxn{{ProducerID: 10, FirstOffset: 0, LastOffset: 7}}; !slices.Equal(res.Aborted, want) {
		t.Fatalf("aborted %v, want %v", res.Aborted, want)
	}
	// B commits (marker at 8): nothing open, the LSO is the high watermark.
	if off := must(e.marker(r, batch.TxnMarker{ProducerID: 20, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 3})); off != 8 {
		t.Fatalf("commit marker at %d, want 8", off)
	}
	check := func(r *Replica) {
		t.Helper()
		if lso, hw, open := e.stable(r); lso != 9 || hw != 9 || open != 0 {
			t.Fatalf("all decided: LSO %d, HW %d, open %d; want 9, 9, 0", lso, hw, open)
		}
		data, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20, ReadCommitted: true})
		if got := values(t, data, 0); !slices.Equal(got, []string{"a0-0", "a0-1", "v0-0", "b0-0", "b0-1", "a1-0", "v1-0"}) {
			t.Fatalf("read_committed: %v", got)
		}
		if want := []AbortedTxn{{ProducerID: 10, FirstOffset: 0, LastOffset: 7}}; !slices.Equal(res.Aborted, want) {
			t.Fatalf("aborted %v, want %v", res.Aborted, want)
		}
		// From past A's marker there is nothing to drop.
		if _, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 8, MaxBytes: 1 << 20, ReadCommitted: true}); len(res.Aborted) != 0 {
			t.Fatalf("aborted from 8: %v", res.Aborted)
		}
		// read_uncommitted lists none, and its batches include both
		// markers, each one offset wide.
		data, res = e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20})
		if res.Aborted != nil {
			t.Fatalf("read_uncommitted aborted %v", res.Aborted)
		}
		var markers []int64
		for b := data; len(b) >= batch.HeaderSize; {
			h, _ := batch.ReadHeader(b)
			if h.IsTxnMarker() {
				markers = append(markers, h.BaseOffset)
			}
			b = b[h.Size():]
		}
		if !slices.Equal(markers, []int64{7, 8}) {
			t.Fatalf("markers at %v, want [7 8]", markers)
		}
	}
	check(r)
	// A new epoch of A fences a marker of the old one.
	must(e.produce(r, txnBatch(t, "a2", 1, 10, 1, 0), acksQuorum))
	if res := e.marker(r, batch.TxnMarker{ProducerID: 10, ProducerEpoch: 0}); !errors.Is(res.Err, ErrFencedProducerEpoch) {
		t.Fatalf("marker of a fenced epoch: %v", res.Err)
	}
	must(e.marker(r, batch.TxnMarker{ProducerID: 10, ProducerEpoch: 1, Commit: true}))
	// A marker that bumps the epoch (transaction version 2): the next
	// batch starts the new epoch at sequence 0, the old epoch is fenced.
	must(e.marker(r, batch.TxnMarker{ProducerID: 20, ProducerEpoch: 1, Commit: true}))
	if res := e.produce(r, txnBatch(t, "b1", 1, 20, 0, 2), acksQuorum); !errors.Is(res.Err, ErrFencedProducerEpoch) {
		t.Fatalf("a batch of the epoch before the marker's: %v", res.Err)
	}
	if res := e.produce(r, txnBatch(t, "b1", 1, 20, 1, 5), acksQuorum); !errors.Is(res.Err, ErrOutOfOrderSequence) {
		t.Fatalf("a marker's new epoch starting at sequence 5: %v", res.Err)
	}
	must(e.produce(r, txnBatch(t, "b1", 1, 20, 1, 0), acksQuorum))
	must(e.marker(r, batch.TxnMarker{ProducerID: 20, ProducerEpoch: 1}))
	wantAborted := []AbortedTxn{{ProducerID: 10, FirstOffset: 0, LastOffset: 7}, {ProducerID: 20, FirstOffset: 12, LastOffset: 13}}
	final := func(r *Replica) {
		t.Helper()
		_, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20, ReadCommitted: true})
		if lso, hw, _ := e.stable(r); lso != 14 || hw != 14 || !slices.Equal(res.Aborted, wantAborted) {
			t.Fatalf("LSO %d HW %d aborted %v; want 14, 14, %v", lso, hw, res.Aborted, wantAborted)
		}
	}
	final(r)
	// Reopened: the state is rebuilt from the log alone.
	e.stop()
	e = newEnv(t, vfs.OS(), dir)
	r = e.open(segment.FsyncNever)
	final(r)
}

// A transaction is decided when its marker commits, not when it is
// appended: until then the LSO stays at its first offset and its abort
// is not listed, because a new primary may not have the marker (Kafka
// moves the LSO at the marker's commit too).
func TestTransactionDecidedAtMarkerCommit(t *testing.T) {
	st := newTxnState()
	data := batch.TxnMarker{ProducerID: 10, ProducerEpoch: 0}
	txn := batch.Header{ProducerID: 10, ProducerEpoch: 0, Attributes: batch.TransactionalBit, LastOffsetDelta: 1}
	st.record(&txn, batch.TxnMarker{}, false, 5, 3) // raft 5-6, user 3-4
	marker := batch.Header{ProducerID: 10, ProducerEpoch: 0, Attributes: batch.TransactionalBit | batch.ControlBit}
	st.record(&marker, data, true, 8, 5) // the abort marker at raft 8, user 5
	st.settle(7)
	if raft, user, ok := st.firstOpen(); !ok || raft != 5 || user != 3 {
		t.Fatalf("marker appended, not committed: first open %d/%d %v; want 5/3", raft, user, ok)
	}
	if got := st.abortedIn(0, 10, 0, nil); len(got) != 0 {
		t.Fatalf("an abort not committed is listed: %v", got)
	}
	st.settle(8)
	if _, _, ok := st.firstOpen(); ok {
		t.Fatal("the marker committed: the transaction is still open")
	}
	if got, want := st.abortedIn(0, 10, 0, nil), []AbortedTxn{{ProducerID: 10, FirstOffset: 3, LastOffset: 5}}; !slices.Equal(got, want) {
		t.Fatalf("aborted %v, want %v", got, want)
	}
}
