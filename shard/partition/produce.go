package partition

import (
	"errors"
	"fmt"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard"
)

// ProduceArgs is one produce to this replica.
type ProduceArgs struct {
	// Generation is the route's generation; GenerationUnknown skips the check.
	Generation int32
	// AcksPrimary acknowledges once the batch is durable here, without
	// waiting for it to commit.
	AcksPrimary bool
	// Timeout bounds the wait for the acknowledgement; 0 is the default.
	Timeout time.Duration
	// Records is one RecordBatch v2.
	Records []byte
	// Lend, when set, lends the log the memory of Records (segment.Lend):
	// the log may then write the batch from where it lies, stamped in
	// place, and releases the memory once written. It is called, if at
	// all, before Produce returns. Nil: the log copies Records.
	Lend segment.Lend
}

// Produced is where an acknowledged batch landed.
type Produced struct {
	BaseOffset      int64
	LogAppendTimeMs int64
	LogStartOffset  int64
}

// ProduceResult answers a produce: Produced, or Err.
type ProduceResult struct {
	Produced Produced
	Err      error
}

// pendingProduce is a produce waiting for its batch to commit (or, with
// acks=primary, to be written here).
type pendingProduce struct {
	base, last int64
	term       int32
	reply      func(ProduceResult)
	timer      *shard.Timer
	done       bool
}

// CheckRoute applies the protocol's routing checks 3 and 4 (the node layer
// did 1 and 2: the topic and partition exist): this replica must be the
// primary, and a known generation must be the current one.
func (r *Replica) CheckRoute(generation int32) error {
	if r.failure != nil || r.raft == nil {
		return errorf(ErrStorage, "partition %s/%d is offline on node %d: %v", r.cfg.Topic, r.cfg.Partition, r.cfg.Self, r.failure)
	}
	if !r.IsPrimary() {
		if r.leader == raftlite.None {
			if err := r.quorumErr(); err != nil {
				return err
			}
		}
		return r.notPrimaryErr()
	}
	if generation != GenerationUnknown {
		if generation > r.term {
			return r.notPrimaryErr()
		}
		if generation < r.term {
			e := errorf(ErrStaleGeneration, "%s/%d: generation %d is older than the current %d", r.cfg.Topic, r.cfg.Partition, generation, r.term)
			e.Leader, e.Generation = int32(r.cfg.Self), r.term
			return e
		}
	}
	return nil
}

// Produce appends req's batch through consensus and calls reply once:
// when the batch commits (acks=quorum), when it is durable here
// (acks=primary), on an error, or when req's timeout passes. data must stay
// valid until Produce returns (it is copied into the log before that),
// unless req.Lend lent it to the log, which then holds it until written.
func (r *Replica) Produce(req *ProduceArgs, reply func(ProduceResult)) {
	fail := func(err error) { reply(ProduceResult{Err: err}) }
	if err := r.writeRoute(req.Generation); err != nil {
		fail(err)
		return
	}
	data := req.Records
	if max := r.cfg.MaxMessageBytes; max > 0 && len(data) > max {
		fail(errorf(ErrBatchTooLarge, "batch of %d bytes exceeds topic %s's max.message.bytes %d", len(data), r.cfg.Topic, max))
		return
	}
	if max := r.cfg.Log.BatchBytesMax; r.cfg.MaxMessageBytes <= 0 && max > 0 && len(data) > max {
		fail(errorf(ErrBatchTooLarge, "batch of %d bytes exceeds storage.max_batch_bytes %d", len(data), max))
		return
	}
	validate := batch.ValidateRecords
	if r.cleaner != nil {
		validate = batch.ValidateKeyedRecords
	}
	h, err := validate(data)
	if errors.Is(err, batch.ErrKeyless) {
		fail(errorf(ErrInvalidBatch, "%s/%d: topic %s is compacted (cleanup.policy compact) and takes only records with a key: %v", r.cfg.Topic, r.cfg.Partition, r.cfg.Topic, err))
		return
	}
	if err != nil {
		fail(errorf(ErrCorruptBatch, "%s/%d: %v", r.cfg.Topic, r.cfg.Partition, err))
		return
	}
	if h.IsControl() {
		fail(errorf(ErrInvalidBatch, "%s/%d: producers may not write control batches", r.cfg.Topic, r.cfg.Partition))
		return
	}
	if err := r.writable(); err != nil {
		fail(err)
		return
	}
	v, dup, err := r.prod.check(&h)
	if err != nil {
		fail(err)
		return
	}
	if v == duplicate {
		r.answerDuplicate(req, dup, reply)
		return
	}
	// The log appends data during this call (process): it need not
	// compute the CRC ValidateRecords has just checked (appendEntries).
	r.checked, r.lend = data, req.Lend
	defer func() { r.checked, r.lend = nil, nil }()
	e, err := r.raft.Propose(h.RecordCount, data)
	if err != nil {
		fail(r.proposeErr(err))
		return
	}
	p := &pendingProduce{base: e.Base, last: e.Last, term: e.Term, reply: reply}
	r.wait(p, req)
	r.process()
}

// writeRoute is what a write (a produce, a marker) checks first: the
// replica is open, the primary, at the generation asked for.
func (r *Replica) writeRoute(generation int32) error {
	if r.closed {
		return errorf(ErrNotPrimary, "partition %s/%d is closed on node %d", r.cfg.Topic, r.cfg.Partition, r.cfg.Self)
	}
	return r.CheckRoute(generation)
}

// writable is what a write checks before it proposes: the log has not
// failed, and a majority of the replicas is reachable.
func (r *Replica) writable() error {
	if err := r.log.Err(); err != nil {
		return errorf(ErrStorage, "%s/%d: %v", r.cfg.Topic, r.cfg.Partition, err)
	}
	return r.quorumErr()
}

// isChecked says whether data is the batch Produce validated in the call
// now running (the same bytes, not a copy): the log may skip its CRC.
func (r *Replica) isChecked(data []byte) bool {
	c := r.checked
	return len(c) > 0 && len(data) == len(c) && &data[0] == &c[0]
}

// quorumErr is ErrNotEnoughReplicas when fewer than a majority of the
// replicas are reachable (a write could not commit until one returns).
func (r *Replica) quorumErr() error {
	// The voters in force (the replica set until a membership change),
	// walked without allocating: this runs for every produce.
	voters := r.Membership().Voters
	if r.cfg.Alive == nil || voters.Len() == 1 {
		return nil
	}
	up := 0
	var down []raftlite.NodeID
	for id := raftlite.NodeID(1); id <= raftlite.NodeIDMax; id++ {
		if !voters.Has(id) {
			continue
		}
		if id == r.cfg.Self || r.cfg.Alive(id) {
			up++
		} else {
			down = append(down, id)
		}
	}
	if need := voters.Quorum(); up < need {
		e := errorf(ErrNotEnoughReplicas, "%s/%d: %d of its %d replicas are reachable (nodes %v are down); writes need %d until one returns",
			r.cfg.Topic, r.cfg.Partition, up, voters.Len(), down, need)
		e.RetryAfterMs = 500
		return e
	}
	return nil
}

// answerDuplicate acknowledges a retried batch without appending it: at
// once when it is committed, else when it commits.
func (r *Replica) answerDuplicate(req *ProduceArgs, b seqBatch, reply func(ProduceResult)) {
	p := &pendingProduce{base: b.base, last: b.last, term: b.term, reply: reply}
	if b.last <= r.commit {
		r.finish(p)
		return
	}
	r.wait(p, req)
}

// wait queues p by acks and arms its timeout.
func (r *Replica) wait(p *pendingProduce, req *ProduceArgs) {
	timeout := produceTimeoutDefault
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	p.timer = r.cfg.Sched.AfterFunc(timeout, func() {
		if !p.done {
			p.done = true
			p.reply(ProduceResult{Err: errorf(ErrTimedOut,
				"%s/%d: offsets %d..%d not acknowledged within %v (the write may still commit; retry with the same sequence)",
				r.cfg.Topic, r.cfg.Partition, p.base, p.last, timeout)})
		}
	})
	if req.AcksPrimary {
		r.primaryQ = append(r.primaryQ, p)
		r.completePrimary()
		return
	}
	r.quorumQ = append(r.quorumQ, p)
	r.completeQuorum()
}

func (r *Replica) proposeErr(err error) error {
	switch {
	case errors.Is(err, raftlite.ErrNotLeader), errors.Is(err, raftlite.ErrTransferInProgress):
		return r.notPrimaryErr()
	case errors.Is(err, raftlite.ErrProposalBackpressure):
		e := errorf(ErrBusy, "%s/%d: too many bytes waiting for replication", r.cfg.Topic, r.cfg.Partition)
		e.RetryAfterMs = 10
		return e
	}
	return errorf(ErrInvalidBatch, "%s/%d: %v", r.cfg.Topic, r.cfg.Partition, err)
}

// finish answers p with success, or with ErrNotPrimary when the log holds
// another term at p's last offset (a new primary replaced the batch).
func (r *Replica) finish(p *pendingProduce) {
	if p.done {
		return
	}
	p.done = true
	if p.timer != nil {
		r.cfg.Sched.Stop(p.timer)
	}
	if t, err := r.rlog.TermAt(p.last); err == nil && t != p.term {
		p.reply(ProduceResult{Err: errorf(ErrNotPrimary,
			"%s/%d: the batch at %d..%d was replaced by a new primary; retry", r.cfg.Topic, r.cfg.Partition, p.base, p.last)})
		return
	}
	appendTime := int64(-1)
	p.reply(ProduceResult{Produced: Produced{BaseOffset: r.log.UserOffset(p.base), LogAppendTimeMs: appendTime, LogStartOffset: r.StartOffset()}})
}

// completeQuorum answers the quorum waiters the commit now covers.
func (r *Replica) completeQuorum() {
	r.complete(&r.quorumQ, func() int64 { return r.commit })
}

// completePrimary answers the acks=primary waiters the local write covers.
func (r *Replica) completePrimary() {
	r.complete(&r.primaryQ, r.localDurable)
}

// complete answers the waiters at the head of *q that upTo covers. Each
// leaves the queue before its reply runs, because a reply may produce
// again (the metadata controller proposes from a proposal's answer):
// that appends to *q and completes it re-entrantly, and a queue held in
// a local across the reply lost the new waiter, which then heard only
// its timeout although its batch committed.
func (r *Replica) complete(q *[]*pendingProduce, upTo func() int64) {
	for len(*q) > 0 && ((*q)[0].done || (*q)[0].last <= upTo()) {
		p := (*q)[0]
		(*q)[0] = nil
		*q = (*q)[1:]
		r.finish(p)
	}
}

// failPending answers every waiting produce with err. The queues are
// taken before any reply runs, so a produce made from a reply stays
// queued (see complete).
func (r *Replica) failPending(err error) {
	qs := [][]*pendingProduce{r.quorumQ, r.primaryQ}
	r.quorumQ, r.primaryQ = nil, nil
	for _, q := range qs {
		for _, p := range q {
			if !p.done {
				p.done = true
				if p.timer != nil {
					r.cfg.Sched.Stop(p.timer)
				}
				p.reply(ProduceResult{Err: err})
			}
		}
	}
	r.failConf(err)
}

// rebuildProducers reads every batch header of the log to rebuild the
// idempotence table (on open, truncation and restart).
func (r *Replica) rebuildProducers() error {
	r.prod, r.txns = newProducers(), newTxnState()
	return r.recordProducers(r.log.LogStartOffset(), r.log.LogEndOffset())
}

// recordProducers records the producer state of the batches in [start,
// end) of the log (already written).
func (r *Replica) recordProducers(start, end int64) error {
	var hdr [batch.HeaderSize]byte
	for off := start; off < end; {
		spans, err := r.log.Read(off, 64<<20, end-1)
		if err != nil {
			return fmt.Errorf("partition %s/%d: rebuilding producer state: %w", r.cfg.Topic, r.cfg.Partition, err)
		}
		if len(spans) == 0 {
			break
		}
		for _, sp := range spans {
			at := sp.FirstOffset // raft offsets: the table is keyed by them
			for pos := sp.Pos; pos < sp.Pos+sp.Len; {
				if _, err := sp.File().ReadAt(hdr[:], pos); err != nil {
					segment.ReleaseSpans(spans)
					return fmt.Errorf("partition %s/%d: rebuilding producer state: %w", r.cfg.Topic, r.cfg.Partition, err)
				}
				h, err := batch.ReadHeader(hdr[:])
				if err != nil {
					segment.ReleaseSpans(spans)
					return fmt.Errorf("partition %s/%d: rebuilding producer state: %w", r.cfg.Topic, r.cfg.Partition, err)
				}
				r.prod.record(&h, at, at+h.RaftWidth()-1, h.PartitionLeaderEpoch)
				if h.IsTransactional() {
					var m batch.TxnMarker
					isMarker := false
					if h.IsControl() {
						b := make([]byte, h.Size())
						if _, err := sp.File().ReadAt(b, pos); err != nil {
							segment.ReleaseSpans(spans)
							return fmt.Errorf("partition %s/%d: rebuilding transaction state: %w", r.cfg.Topic, r.cfg.Partition, err)
						}
						m, isMarker = markerOf(&h, b)
					}
					r.txns.record(&h, m, isMarker, at, h.BaseOffset)
				}
				pos += int64(h.Size())
				at += h.RaftWidth()
			}
			off = sp.LastOffset + 1
		}
		segment.ReleaseSpans(spans)
	}
	return nil
}
