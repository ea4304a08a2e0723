package partition

import (
	"fmt"

	"github.com/corestream/corestream/segment/batch"
)

// Bounds of the idempotent-producer table.
const (
	// ProducerWindow is how many recent batches per producer are
	// remembered for duplicate detection: the most batches an idempotent
	// producer may have in flight per partition (every protocol's bound
	// must equal it).
	ProducerWindow = 32
	// producersMax bounds producers remembered per partition; past it the
	// least recently written one is forgotten (it then gets
	// UNKNOWN_PRODUCER_ID on a non-zero sequence and re-initialises).
	producersMax = 10000
)

// seqBatch is one remembered batch of a producer.
type seqBatch struct {
	firstSeq, lastSeq int32
	base, last        int64
	term              int32
}

// producerState is what a partition remembers of one producer id.
// Invariant: batches are in append order, at most ProducerWindow.
type producerState struct {
	epoch   int16
	batches []seqBatch
	// touched orders producers for eviction (a partition-local clock).
	touched uint64
	// lastTs is the largest timestamp of its last batch.
	lastTs int64
}

// producers is the idempotence table of one partition. It is rebuilt from
// the log when a replica opens, truncates or resets, and updated for every
// batch appended, on primaries and followers alike, so a new primary
// already knows every producer.
type producers struct {
	m     map[int64]*producerState
	clock uint64
}

func newProducers() *producers { return &producers{m: map[int64]*producerState{}} }

// verdict is what check decides for an incoming batch.
type verdict int

const (
	appendBatch verdict = iota // new: append it
	duplicate                  // a retry of a remembered batch: answer with its offset
)

// check applies the protocol's idempotence rules (docs/protocol.md,
// "Idempotent producers") to batch header h. On duplicate it returns the
// remembered batch.
func (p *producers) check(h *batch.Header) (verdict, seqBatch, error) {
	if !h.HasProducerID() {
		return appendBatch, seqBatch{}, nil
	}
	first, last := h.BaseSequence, h.LastSequence()
	st := p.m[h.ProducerID]
	switch {
	case st == nil:
		if first != 0 {
			return 0, seqBatch{}, errorf(ErrUnknownProducer,
				"producer %d is unknown to this partition and its batch starts at sequence %d, not 0: the producer state expired; call InitProducer",
				h.ProducerID, first)
		}
		return appendBatch, seqBatch{}, nil
	case h.ProducerEpoch < st.epoch:
		return 0, seqBatch{}, errorf(ErrFencedProducerEpoch,
			"producer %d epoch %d is older than epoch %d already seen: this producer was fenced", h.ProducerID, h.ProducerEpoch, st.epoch)
	case h.ProducerEpoch > st.epoch:
		if first != 0 {
			return 0, seqBatch{}, errorf(ErrOutOfOrderSequence,
				"producer %d starts epoch %d at sequence %d; a new epoch starts at 0", h.ProducerID, h.ProducerEpoch, first)
		}
		return appendBatch, seqBatch{}, nil
	}
	for _, b := range st.batches {
		if b.firstSeq == first && b.lastSeq == last {
			return duplicate, b, nil
		}
	}
	if len(st.batches) == 0 { // the epoch began with a transaction marker
		if first != 0 {
			return 0, seqBatch{}, errorf(ErrOutOfOrderSequence,
				"producer %d starts epoch %d at sequence %d; a new epoch starts at 0", h.ProducerID, h.ProducerEpoch, first)
		}
		return appendBatch, seqBatch{}, nil
	}
	lastSeq := st.batches[len(st.batches)-1].lastSeq
	if first == nextSeq(lastSeq) {
		return appendBatch, seqBatch{}, nil
	}
	if seqBefore(first, st.batches[0].firstSeq) {
		return 0, seqBatch{}, errorf(ErrDuplicateSequence,
			"producer %d batch %d..%d is older than the last %d batches remembered (from %d): it was written long ago",
			h.ProducerID, first, last, len(st.batches), st.batches[0].firstSeq)
	}
	return 0, seqBatch{}, errorf(ErrOutOfOrderSequence,
		"producer %d batch starts at sequence %d but the next expected is %d", h.ProducerID, first, nextSeq(lastSeq))
}

// record remembers a batch appended at [base, last] in term. A
// transaction marker carries the producer's epoch too (under transaction
// version 2 the coordinator bumps it at every transaction's end): a
// newer one starts the epoch, whose first batch then starts at sequence
// 0; the marker itself has no sequence to remember.
func (p *producers) record(h *batch.Header, base, last int64, term int32) {
	if !h.HasProducerID() || h.IsControl() && !h.IsTxnMarker() {
		return
	}
	st := p.m[h.ProducerID]
	if st == nil || h.ProducerEpoch > st.epoch {
		if st == nil {
			p.evictIfFull()
			st = &producerState{}
			p.m[h.ProducerID] = st
		}
		st.epoch, st.batches = h.ProducerEpoch, st.batches[:0]
	}
	st.lastTs = h.MaxTimestamp
	if h.IsControl() {
		p.clock++
		st.touched = p.clock
		return
	}
	if len(st.batches) == ProducerWindow {
		copy(st.batches, st.batches[1:])
		st.batches = st.batches[:ProducerWindow-1]
	}
	st.batches = append(st.batches, seqBatch{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(), base: base, last: last, term: term})
	p.clock++
	st.touched = p.clock
}

func (p *producers) evictIfFull() {
	if len(p.m) < producersMax {
		return
	}
	var oldest int64
	var at uint64 = ^uint64(0)
	for id, st := range p.m {
		if st.touched < at {
			oldest, at = id, st.touched
		}
	}
	delete(p.m, oldest)
}

// nextSeq is the sequence after s (wrapping from MaxInt32 to 0).
func nextSeq(s int32) int32 {
	if s == 1<<31-1 {
		return 0
	}
	return s + 1
}

// seqBefore reports whether a comes before b in wrapping sequence order.
func seqBefore(a, b int32) bool { return int32(uint32(a)-uint32(b)) < 0 }

func (p *producers) String() string { return fmt.Sprintf("%d producers", len(p.m)) }
