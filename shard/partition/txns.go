package partition

import (
	"cmp"
	"slices"
	"sort"
	"time"

	"github.com/corestream/corestream/segment/batch"
)

// Transactions, the partition's side (docs/design/transactions.md): a
// producer's transactional batches are open from the first one appended
// until its transaction marker (a transactional control batch, written by
// the transaction coordinator through WriteTxnMarker) ends them. Every
// replica keeps the same state from the batches it appends, as it does
// the idempotence table, so a new primary already knows it; it is rebuilt
// from the log with that table (open, truncation, segment catch-up).
//
// Two figures come out of it:
//   - the last stable offset (LSO): the first offset of the oldest open
//     transaction, or the high watermark when none is open below it.
//     read_committed fetches and ListOffsets stop there;
//   - the aborted transactions, each (producer, first offset, marker
//     offset), which a read_committed fetch returns for the range it
//     read so that the client drops their records.

// AbortedTxn is one aborted transaction in a partition, in user offsets:
// its first batch's offset and its abort marker's.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// openTxn is a producer's transaction open in this partition: where its
// first batch lies (raft and user offsets).
type openTxn struct {
	epoch     int16
	first     int64
	firstUser int64
}

// closingTxn is a transaction whose marker is in the log but not yet
// committed: it is still open to readers (the LSO stays at its first
// offset, as Kafka's does until the marker's commit), because a new
// primary may not have the marker, and only then decided.
type closingTxn struct {
	producerID       int64
	first, firstUser int64
	// marker is the marker's raft offset, markerUser its user offset.
	marker, markerUser int64
	commit             bool
}

// txnState is a replica's open and aborted transactions.
// Invariants: aborted is in marker order (LastOffset ascending), and so
// is closing (marker ascending, every marker above the commit index once
// settled); every open or closing transaction starts below the log end.
type txnState struct {
	open    map[int64]openTxn
	closing []closingTxn
	aborted []AbortedTxn
}

func newTxnState() *txnState { return &txnState{open: map[int64]openTxn{}} }

// markerOf is what the marker batch data says (ok false for any other
// batch, or one that does not read as a marker: only validated batches
// reach the log, and markers are built by WriteTxnMarker). Read before
// the batch is appended: a lent batch is the log's from then on.
func markerOf(h *batch.Header, data []byte) (m batch.TxnMarker, ok bool) {
	if !h.IsTxnMarker() {
		return m, false
	}
	m, err := batch.ReadTxnMarker(data)
	return m, err == nil
}

// record notes the batch with header h (m: what it says, when it is a
// marker) appended at raft offset base, user offset userBase.
func (t *txnState) record(h *batch.Header, m batch.TxnMarker, isMarker bool, base, userBase int64) {
	if !h.IsTransactional() || !h.HasProducerID() {
		return
	}
	if !h.IsControl() {
		if _, ok := t.open[h.ProducerID]; !ok {
			t.open[h.ProducerID] = openTxn{epoch: h.ProducerEpoch, first: base, firstUser: userBase}
		}
		return
	}
	if !isMarker {
		return
	}
	o, ok := t.open[m.ProducerID]
	if !ok {
		return // a marker sent again, or for a partition the transaction did not write to
	}
	delete(t.open, m.ProducerID)
	t.closing = append(t.closing, closingTxn{producerID: m.ProducerID, first: o.first, firstUser: o.firstUser,
		marker: base, markerUser: userBase, commit: m.Commit})
}

// settle decides the closing transactions whose marker is at or below
// commit, the replica's commit index (raft offset): an aborted one joins
// the aborted list. Readers call it before they look.
func (t *txnState) settle(commit int64) {
	n := 0
	for n < len(t.closing) && t.closing[n].marker <= commit {
		if c := t.closing[n]; !c.commit {
			t.aborted = append(t.aborted, AbortedTxn{ProducerID: c.producerID, FirstOffset: c.firstUser, LastOffset: c.markerUser})
		}
		n++
	}
	if n > 0 {
		t.closing = slices.Delete(t.closing, 0, n)
	}
}

// firstOpen is the raft and user offsets of the oldest open or closing
// transaction's first batch; ok is false when none is.
func (t *txnState) firstOpen() (raft, user int64, ok bool) {
	for _, o := range t.open {
		if !ok || o.first < raft {
			raft, user, ok = o.first, o.firstUser, true
		}
	}
	for _, c := range t.closing {
		if !ok || c.first < raft {
			raft, user, ok = c.first, c.firstUser, true
		}
	}
	return raft, user, ok
}

// abortedIn appends to dst the aborted transactions a read of user
// offsets [from, upTo) must drop records of: those whose marker is at or
// after from and whose first batch is below upTo (Kafka's rule). Markers
// below start (the log start) are forgotten on the way.
func (t *txnState) abortedIn(from, upTo, start int64, dst []AbortedTxn) []AbortedTxn {
	if n := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= start }); n > 0 {
		t.aborted = slices.Delete(t.aborted, 0, n) // retention deleted their markers
	}
	i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= from })
	for _, a := range t.aborted[i:] {
		if a.FirstOffset < upTo {
			dst = append(dst, a)
		}
	}
	return dst
}

// ProducerInfo is one producer the replica remembers (DescribeProducers).
type ProducerInfo struct {
	ProducerID      int64
	Epoch           int16
	LastSequence    int32 // -1: none written in this epoch
	LastTimestampMs int64
	// TxnStart is the user offset of its open transaction's first batch,
	// -1 when none is open.
	TxnStart int64
}

// Producers lists the producers the replica remembers, by producer id.
func (r *Replica) Producers() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(r.prod.m))
	for id, st := range r.prod.m {
		pi := ProducerInfo{ProducerID: id, Epoch: st.epoch, LastSequence: -1, LastTimestampMs: st.lastTs, TxnStart: -1}
		if n := len(st.batches); n > 0 {
			pi.LastSequence = st.batches[n-1].lastSeq
		}
		if o, ok := r.txns.open[id]; ok {
			pi.TxnStart = o.firstUser
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// OpenTransactions is how many producers have a transaction open in this
// partition.
func (r *Replica) OpenTransactions() int { return len(r.txns.open) }

// LastStableOffset is the user offset below which every transaction is
// decided: the first offset of the oldest open transaction, if that is
// below the high watermark, else the high watermark. A transaction is
// decided once its marker commits.
func (r *Replica) LastStableOffset() int64 {
	r.txns.settle(r.commit)
	hw := r.HighWatermark()
	if _, u, ok := r.txns.firstOpen(); ok && u < hw {
		return u
	}
	return hw
}

// stableEnd is the raft offset of the last entry a read_committed read
// may return: the commit index, or the entry before the oldest open
// transaction's first batch.
func (r *Replica) stableEnd() int64 {
	r.txns.settle(r.commit)
	if f, _, ok := r.txns.firstOpen(); ok && f-1 < r.commit {
		return f - 1
	}
	return r.commit
}

// MarkerArgs is one transaction marker to write to this replica.
type MarkerArgs struct {
	// Generation is the route's generation; GenerationUnknown skips the check.
	Generation int32
	// Marker ends Marker.ProducerID's transaction, committing or
	// aborting it.
	Marker batch.TxnMarker
	// Timeout bounds the wait for the marker to commit; 0 is the default.
	Timeout time.Duration
}

// WriteTxnMarker appends the transaction marker of req through consensus
// (it takes one offset, as on Kafka) and replies once it commits, with
// its offset, or with an error: this replica is not the primary, the
// producer's epoch is older than one this partition has seen
// (ErrFencedProducerEpoch: a coordinator that lost its transaction's
// producer to a newer one), or what Produce answers. A marker for a
// producer with no transaction open here is written too (the
// coordinator's retry of a marker that committed, or a partition its
// transaction added but never wrote to), and changes nothing but the
// producer's epoch.
func (r *Replica) WriteTxnMarker(req *MarkerArgs, reply func(ProduceResult)) {
	fail := func(err error) { reply(ProduceResult{Err: err}) }
	if err := r.writeRoute(req.Generation); err != nil {
		fail(err)
		return
	}
	m := req.Marker
	if m.ProducerID < 0 {
		fail(errorf(ErrInvalidBatch, "%s/%d: a transaction marker for producer %d", r.cfg.Topic, r.cfg.Partition, m.ProducerID))
		return
	}
	if st := r.prod.m[m.ProducerID]; st != nil && m.ProducerEpoch < st.epoch {
		fail(errorf(ErrFencedProducerEpoch, "%s/%d: marker of producer %d epoch %d, older than epoch %d already seen",
			r.cfg.Topic, r.cfg.Partition, m.ProducerID, m.ProducerEpoch, st.epoch))
		return
	}
	if err := r.writable(); err != nil {
		fail(err)
		return
	}
	data := batch.BuildTxnMarker(m, r.cfg.NowMs())
	e, err := r.raft.Propose(1, data)
	if err != nil {
		fail(r.proposeErr(err))
		return
	}
	p := &pendingProduce{base: e.Base, last: e.Last, term: e.Term, reply: reply}
	r.wait(p, &ProduceArgs{Timeout: req.Timeout})
	r.process()
}
