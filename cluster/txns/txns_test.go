package txns

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// harness runs a coordinator whose owner persists every transition in
// log order (log), as the node's host will.
type harness struct {
	t   *testing.T
	c   *Coordinator
	log []Record
	pid int64
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, pid: 1000}
	h.c = New(Config{NewProducerID: func() (int64, error) { h.pid++; return h.pid, nil }})
	return h
}

// apply persists and applies tr, and returns what its call answers.
func (h *harness) apply(tr *Transition, err error) error {
	h.t.Helper()
	if err != nil || tr == nil {
		return err
	}
	h.log = append(h.log, tr.Record())
	h.c.Apply(tr)
	return tr.Answer
}

func (h *harness) init(id string) *Txn {
	h.t.Helper()
	if err := h.apply(h.c.InitProducerID(id, 60_000, -1, -1, 0)); err != nil {
		h.t.Fatalf("init %s: %v", id, err)
	}
	return h.c.Get(id)
}

// end ends id's transaction: prepare, its markers (returned), complete.
func (h *harness) end(id string, pid int64, epoch int16, commit, v2 bool) []Marker {
	h.t.Helper()
	tr, _, err := h.c.EndTxn(id, pid, epoch, commit, v2, 10)
	if err != nil || tr == nil {
		h.t.Fatalf("end %s: %v %v", id, tr, err)
	}
	ms := tr.Markers()
	if err := h.apply(tr, nil); err != nil {
		h.t.Fatal(err)
	}
	if err := h.apply(h.c.Complete(id, 11)); err != nil {
		h.t.Fatal(err)
	}
	return ms
}

func TestInitProducerID(t *testing.T) {
	h := newHarness(t)
	a := h.init("a")
	if a.ProducerID != 1001 || a.Epoch != 0 || a.State != Empty {
		t.Fatalf("first init: %+v", a)
	}
	// Again: the same producer id, the epoch bumped (the old producer
	// is fenced).
	if b := h.init("a"); b.ProducerID != 1001 || b.Epoch != 1 {
		t.Fatalf("second init: %+v", b)
	}
	// KIP-360: a producer naming what it holds keeps going only at the
	// current epoch.
	if _, err := h.c.InitProducerID("a", 60_000, 1001, 0, 0); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("re-init with an old epoch: %v", err)
	}
	if err := h.apply(h.c.InitProducerID("a", 60_000, 1001, 1, 0)); err != nil || h.c.Get("a").Epoch != 2 {
		t.Fatalf("re-init with the current epoch: %v %+v", err, h.c.Get("a"))
	}
	for _, ms := range []int32{0, -1, TimeoutMaxMsDefault + 1} {
		if _, err := h.c.InitProducerID("b", ms, -1, -1, 0); !errors.Is(err, ErrInvalidTimeout) {
			t.Fatalf("timeout %d: %v", ms, err)
		}
	}
	// Past the largest epoch: a fresh producer id at epoch 0.
	h.c.ids["a"].Epoch = math.MaxInt16 - 1
	if c := h.init("a"); c.ProducerID != 1002 || c.Epoch != 0 {
		t.Fatalf("epoch exhausted: %+v", c)
	}
}

// One transaction from begin to commit, and what each call answers on
// the way: fencing, wrong producer ids, ends that do not fit the state,
// retries, and one change at a time.
func TestTransactionLifecycle(t *testing.T) {
	h := newHarness(t)
	a := h.init("a")
	pid, ep := a.ProducerID, a.Epoch
	p0, p1, g := Partition{"t", 0}, Partition{"t", 1}, Partition{"__groups", 3}
	if _, _, err := h.c.EndTxn("a", pid, ep, true, false, 1); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("end with nothing begun: %v", err)
	}
	if _, err := h.c.AddPartitions("a", pid+1, ep, []Partition{p0}, 1); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("another producer id: %v", err)
	}
	if _, err := h.c.AddPartitions("a", pid, ep-1, []Partition{p0}, 1); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("an old epoch: %v", err)
	}
	tr, err := h.c.AddPartitions("a", pid, ep, []Partition{p1, p0}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// One change at a time: until tr is applied, the id is busy.
	if _, err := h.c.AddPartitions("a", pid, ep, []Partition{g}, 1); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("while a change is pending: %v", err)
	}
	_ = h.apply(tr, nil)
	if err := h.apply(h.c.AddPartitions("a", pid, ep, []Partition{g, p0}, 2)); err != nil {
		t.Fatal(err)
	}
	if tr, err := h.c.AddPartitions("a", pid, ep, []Partition{p1}, 3); tr != nil || err != nil {
		t.Fatalf("adding a partition already in: %v %v", tr, err)
	}
	got := h.c.Get("a")
	if got.State != Ongoing || !reflect.DeepEqual(got.Partitions, []Partition{g, p0, p1}) || got.StartMs != 1 {
		t.Fatalf("ongoing: %+v", got)
	}
	tr, _, err = h.c.EndTxn("a", pid, ep, true, false, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []Marker{{g, pid, ep, true}, {p0, pid, ep, true}, {p1, pid, ep, true}}
	if ms := tr.Markers(); !reflect.DeepEqual(ms, want) {
		t.Fatalf("markers %v, want %v", ms, want)
	}
	_ = h.apply(tr, nil)
	// Prepared: the same end again waits, the other end is refused, and
	// nothing new may be added until the markers are written.
	if _, _, err := h.c.EndTxn("a", pid, ep, true, false, 6); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("commit while committing: %v", err)
	}
	if _, _, err := h.c.EndTxn("a", pid, ep, false, false, 6); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("abort while committing: %v", err)
	}
	if _, err := h.c.AddPartitions("a", pid, ep, []Partition{p0}, 6); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("add while committing: %v", err)
	}
	if err := h.apply(h.c.Complete("a", 7)); err != nil {
		t.Fatal(err)
	}
	if got := h.c.Get("a"); got.State != CompleteCommit || len(got.Partitions) != 0 {
		t.Fatalf("complete: %+v", got)
	}
	// A retry of the commit that completed is answered as it was; an
	// abort of it is refused.
	if tr, _, err := h.c.EndTxn("a", pid, ep, true, false, 8); tr != nil || err != nil {
		t.Fatalf("retried commit: %v %v", tr, err)
	}
	if _, _, err := h.c.EndTxn("a", pid, ep, false, false, 8); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("abort after commit: %v", err)
	}
	// The next transaction starts anew.
	if err := h.apply(h.c.AddPartitions("a", pid, ep, []Partition{p1}, 9)); err != nil {
		t.Fatal(err)
	}
	if got := h.c.Get("a"); got.State != Ongoing || !reflect.DeepEqual(got.Partitions, []Partition{p1}) || got.StartMs != 9 {
		t.Fatalf("second transaction: %+v", got)
	}
}

// A producer that re-initialises while its transaction is open fences
// the old one: the open transaction is aborted with a bumped epoch first
// (the init answers CONCURRENT_TRANSACTIONS), and the retry after the
// abort completes bumps again.
func TestInitAbortsAnOpenTransaction(t *testing.T) {
	h := newHarness(t)
	a := h.init("a")
	_ = h.apply(h.c.AddPartitions("a", a.ProducerID, a.Epoch, []Partition{{"t", 0}}, 1))
	tr, err := h.c.InitProducerID("a", 60_000, -1, -1, 2)
	if err != nil || tr.Next.State != PrepareAbort || tr.Next.Epoch != a.Epoch+1 {
		t.Fatalf("init over an open transaction: %+v %v", tr, err)
	}
	if ms := tr.Markers(); len(ms) != 1 || ms[0].Commit || ms[0].Epoch != a.Epoch+1 {
		t.Fatalf("abort markers %v", ms)
	}
	if err := h.apply(tr, nil); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("the init answers %v, want CONCURRENT_TRANSACTIONS", err)
	}
	if _, err := h.c.InitProducerID("a", 60_000, -1, -1, 3); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("init while the abort's markers are written: %v", err)
	}
	// The old producer is fenced at once.
	if _, _, err := h.c.EndTxn("a", a.ProducerID, a.Epoch, true, false, 3); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("the old producer's commit: %v", err)
	}
	_ = h.apply(h.c.Complete("a", 4))
	if b := h.init("a"); b.Epoch != a.Epoch+2 || b.State != Empty {
		t.Fatalf("init after the abort: %+v", b)
	}
}

// A transaction open past its timeout is listed, and the coordinator's
// abort bumps the epoch, fencing the producer that left it.
func TestTransactionTimeout(t *testing.T) {
	h := newHarness(t)
	a := h.init("a")
	_ = h.apply(h.c.AddPartitions("a", a.ProducerID, a.Epoch, []Partition{{"t", 0}}, 1000))
	if ids := h.c.Expired(1000 + 60_000); len(ids) != 0 {
		t.Fatalf("expired at the timeout: %v", ids)
	}
	if ids := h.c.Expired(1000 + 60_001); !reflect.DeepEqual(ids, []string{"a"}) {
		t.Fatalf("expired past the timeout: %v", ids)
	}
	tr, err := h.c.Abort("a", 70_000)
	if err != nil || tr.Next.State != PrepareAbort || tr.Next.Epoch != a.Epoch+1 {
		t.Fatalf("abort: %+v %v", tr, err)
	}
	_ = h.apply(tr, nil)
	_ = h.apply(h.c.Complete("a", 70_001))
	if _, err := h.c.AddPartitions("a", a.ProducerID, a.Epoch, []Partition{{"t", 0}}, 70_002); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("the timed-out producer: %v", err)
	}
}

// Transaction version 2 (KIP-890): every end bumps the epoch, so its
// markers fence the epoch that wrote the transaction; a retried end of
// the old epoch is answered as the end it retries; and a delayed end of
// the old epoch that arrives after the next transaction began
// (KAFKA-17754) does not end the new one.
func TestVersion2EndBumpsTheEpoch(t *testing.T) {
	h := newHarness(t)
	a := h.init("a")
	pid, e0 := a.ProducerID, a.Epoch
	_ = h.apply(h.c.AddPartitions("a", pid, e0, []Partition{{"t", 0}}, 1))
	tr, _, err := h.c.EndTxn("a", pid, e0, true, true, 2)
	if err != nil || tr.Next.Epoch != e0+1 || tr.Next.PrevEpoch != e0 {
		t.Fatalf("v2 end: %+v %v", tr, err)
	}
	if ms := tr.Markers(); len(ms) != 1 || ms[0].Epoch != e0+1 {
		t.Fatalf("markers carry %v, want the new epoch %d", ms, e0+1)
	}
	_ = h.apply(tr, nil)
	// A retry (the answer was lost) with the old epoch, while prepared
	// and once complete: answered with the new epoch, no change.
	for _, complete := range []bool{false, true} {
		if complete {
			_ = h.apply(h.c.Complete("a", 3))
		}
		tr, cur, err := h.c.EndTxn("a", pid, e0, true, true, 4)
		if tr != nil || err != nil || cur.Epoch != e0+1 {
			t.Fatalf("retry (complete %v): %v %+v %v", complete, tr, cur, err)
		}
	}
	if _, _, err := h.c.EndTxn("a", pid, e0, false, true, 4); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("an abort retried as the commit's epoch: %v", err)
	}
	// The next transaction, at the new epoch; then the delayed end of the
	// old epoch arrives.
	_ = h.apply(h.c.AddPartitions("a", pid, e0+1, []Partition{{"t", 1}}, 5))
	if tr, _, err := h.c.EndTxn("a", pid, e0, true, true, 6); tr != nil || err == nil {
		t.Fatalf("a delayed end of the old epoch decided the new transaction: %v %v", tr, err)
	}
	if got := h.c.Get("a"); got.State != Ongoing || got.Epoch != e0+1 {
		t.Fatalf("the new transaction after the delayed end: %+v", got)
	}
}

// Every state persisted replays to the same coordinator; a record from a
// coordinator that was reset is ignored; a torn record is refused.
func TestReplay(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		id := fmt.Sprint("id-", i)
		a := h.init(id)
		_ = h.apply(h.c.AddPartitions(id, a.ProducerID, a.Epoch, []Partition{{"t", int32(i)}, {"u", 0}}, int64(i)))
		if i%2 == 0 {
			h.end(id, a.ProducerID, a.Epoch, i%4 == 0, i == 4)
		}
	}
	tr, _, err := h.c.EndTxn("id-1", 1002, 0, true, false, 9) // left prepared
	if err != nil {
		t.Fatal(err)
	}
	_ = h.apply(tr, nil)
	r := New(Config{NewProducerID: func() (int64, error) { return 0, errors.New("unused") }})
	for _, rec := range h.log {
		if err := r.Replay(rec); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(r.ids, h.c.ids) {
		t.Fatalf("replayed:\n%v\nlive:\n%v", r.ids, h.c.ids)
	}
	if p := r.Prepared(); len(p) != 1 || p[0].ID != "id-1" || p[0].State != PrepareCommit {
		t.Fatalf("prepared after replay: %+v", p)
	}
	// A transition begun before a reset is not applied after it.
	tr, err = h.c.AddPartitions("id-3", 1004, 0, []Partition{{"v", 0}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	h.c.Reset()
	h.c.Apply(tr)
	if h.c.Get("id-3") != nil {
		t.Fatal("a transition of before the reset was applied")
	}
	// Torn and foreign records.
	good := h.log[len(h.log)-1]
	for _, bad := range []Record{{Key: []byte("group/x"), Value: good.Value}, {Key: good.Key, Value: good.Value[:len(good.Value)-1]},
		{Key: good.Key, Value: append(append([]byte(nil), good.Value...), 0)}, {Key: good.Key, Value: []byte{2}}} {
		if err := r.Replay(bad); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("record %q/%x: %v", bad.Key, bad.Value, err)
		}
	}
}

// Random calls of random producers over a few ids, each persisted and
// applied or dropped (the write failed): the epochs of an id never go
// back, a producer id changes only when the epoch runs out, only the
// calls' documented errors come out, and the persisted records replay
// to the live state after every step.
func TestCoordinatorRandom(t *testing.T) {
	reached := map[State]int{}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		h := newHarness(t)
		epochs := map[string]int16{}
		known := []error{ErrConcurrentTransactions, ErrProducerFenced, ErrInvalidProducerIDMapping, ErrInvalidTxnState}
		for step := range 300 {
			id := fmt.Sprint("id-", rng.IntN(3))
			cur := h.c.Get(id)
			pid, ep := int64(-1), int16(-1)
			if cur != nil {
				pid, ep = cur.ProducerID, cur.Epoch-int16(rng.IntN(2)) // sometimes a fenced producer
			}
			now := int64(step * 1000)
			var tr *Transition
			var err error
			switch rng.IntN(6) {
			case 0:
				tr, err = h.c.InitProducerID(id, 5_000, -1, -1, now)
			case 1, 2:
				tr, err = h.c.AddPartitions(id, pid, ep, []Partition{{"t", int32(rng.IntN(4))}}, now)
			case 3:
				tr, _, err = h.c.EndTxn(id, pid, ep, rng.IntN(2) == 0, rng.IntN(2) == 0, now)
			case 4:
				if cur != nil && cur.State.Prepared() {
					tr, err = h.c.Complete(id, now)
				}
			case 5:
				if ids := h.c.Expired(now); len(ids) > 0 {
					tr, err = h.c.Abort(ids[0], now)
				}
			}
			if err != nil {
				ok := false
				for _, k := range known {
					ok = ok || errors.Is(err, k)
				}
				if !ok {
					t.Fatalf("seed %d step %d: unexpected error %v", seed, step, err)
				}
				continue
			}
			if tr == nil {
				continue
			}
			if rng.IntN(10) == 0 {
				h.c.Fail(tr)
				continue
			}
			_ = h.apply(tr, nil)
			n := h.c.Get(tr.Next.ID)
			reached[n.State]++
			if old, ok := epochs[n.ID]; ok && n.Epoch < old && n.Epoch != 0 {
				t.Fatalf("seed %d step %d: %s epoch went back %d -> %d", seed, step, n.ID, old, n.Epoch)
			}
			epochs[n.ID] = n.Epoch
			if !n.State.Prepared() && n.State != Ongoing && len(n.Partitions) != 0 {
				t.Fatalf("seed %d step %d: %s in %v holds partitions %v", seed, step, n.ID, n.State, n.Partitions)
			}
		}
		r := New(Config{})
		for _, rec := range h.log {
			if err := r.Replay(rec); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(r.ids, h.c.ids) {
			t.Fatalf("seed %d: the replay differs from the live state", seed)
		}
	}
	// The walk reaches every state but Dead (nothing deletes yet).
	for s := Empty; s < Dead; s++ {
		if reached[s] == 0 {
			t.Errorf("no step reached %v: %v", s, reached)
		}
	}
	t.Logf("states reached: %v", reached)
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte("txn/a"), encodeTxn(&Txn{ID: "a", ProducerID: 3, Partitions: []Partition{{"t", 1}}}))
	f.Add([]byte("txn/"), []byte{1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		id, txn, err := DecodeRecord(Record{Key: key, Value: value})
		if err != nil || txn == nil {
			return
		}
		// What decodes encodes back to the same bytes.
		if got := encodeTxn(txn); string(got) != string(value) || id != txn.ID {
			t.Fatalf("round trip: %x -> %+v -> %x", value, txn, got)
		}
	})
}
