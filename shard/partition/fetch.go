package partition

import (
	"errors"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard"
)

// FetchResult answers a fetch: the committed batches from the requested
// offset as file spans (the caller sends them and releases them), or an
// error.
type FetchResult struct {
	HighWatermark  int64
	LogStartOffset int64
	Spans          []segment.Span
	// Bytes is the spans' total length.
	Bytes int64
	Err   error
}

// FetchArgs is one read of this replica.
type FetchArgs struct {
	// Generation is the route's generation; GenerationUnknown skips the check.
	Generation int32
	// Offset is the first offset wanted.
	Offset int64
	// MaxBytes bounds the answer (at least one whole batch is returned).
	// REQUIRES: within the protocol's bound, which the caller applies.
	MaxBytes uint32
	// MinBytes: with fewer committed bytes available the fetch waits.
	MinBytes uint32
	// MaxWait bounds that wait; 0 answers at once.
	// REQUIRES: within the protocol's bound, which the caller applies.
	MaxWait time.Duration
	// Follower lets a replica that is not the primary serve the fetch
	// (a follower read), up to its own high watermark: the commit index
	// it has learned from the primary, which never runs ahead of the
	// primary's, so it never returns an uncommitted record. The caller
	// checks that this replica is in the in-sync set (the replica does
	// not know it); the replica checks the rest (see checkFollowerRead).
	Follower bool
}

// Offsets answers ListOffsets.
type Offsets struct {
	// Offset is the offset found, -1 when no committed batch matches.
	Offset int64
	// Timestamp is the max timestamp of the batch found by time, else -1.
	Timestamp      int64
	LogStartOffset int64
	HighWatermark  int64
}

// Special timestamps of ListOffsets (Kafka's values).
const (
	TimestampLatest   int64 = -1
	TimestampEarliest int64 = -2
)

// Bounds on fetches.
const (
	// fetchWaitersMax bounds the long-poll fetches one partition holds;
	// more are answered at once with what is there.
	fetchWaitersMax = 4096
)

// fetchWaiter is a long-poll fetch waiting for the commit to move.
type fetchWaiter struct {
	req   FetchArgs
	reply func(FetchResult)
	timer *shard.Timer
	done  bool
}

// Fetch reads committed batches from req.Offset. When fewer than
// req.MinBytes are available it waits up to req.MaxWaitMs for more. reply
// runs exactly once.
func (r *Replica) Fetch(req *FetchArgs, reply func(FetchResult)) {
	if r.closed {
		reply(FetchResult{Err: errorf(ErrNotPrimary, "partition %s/%d is closed on node %d", r.cfg.Topic, r.cfg.Partition, r.cfg.Self)})
		return
	}
	check := r.checkRead
	if req.Follower && !r.IsPrimary() {
		check = r.checkFollowerRead
	}
	if err := check(req.Generation); err != nil {
		reply(FetchResult{Err: err})
		return
	}
	if req.Follower && !r.IsPrimary() && req.Offset > r.commit+1 {
		// The consumer has seen, at the primary, offsets this follower
		// does not know to be committed yet: it cannot answer them, and
		// waiting here would hide that the primary can.
		reply(FetchResult{HighWatermark: r.commit + 1, LogStartOffset: r.log.LogStartOffset(),
			Err: errorf(ErrOffsetOutOfRange, "%s/%d: offset %d is above this follower's (node %d) high watermark %d; fetch from the primary",
				r.cfg.Topic, r.cfg.Partition, req.Offset, r.cfg.Self, r.commit+1)})
		return
	}
	res := r.read(req)
	if len(r.waiters) >= fetchWaitersMax {
		// Waiters whose wait passed stay in the list until a commit
		// sweeps it: on a partition that has nothing new they would fill
		// the bound, and every later long poll would be answered at once,
		// empty, and miss the next record.
		r.dropAnswered()
	}
	if res.Err != nil || res.Bytes >= int64(req.MinBytes) || req.MaxWait <= 0 || len(r.waiters) >= fetchWaitersMax {
		reply(res)
		return
	}
	segment.ReleaseSpans(res.Spans)
	w := &fetchWaiter{req: *req, reply: reply}
	w.timer = r.cfg.Sched.AfterFunc(req.MaxWait, func() { r.answer(w) })
	r.waiters = append(r.waiters, w)
}

// checkRead is CheckRoute for reads. A new primary knows the high
// watermark only once an entry of its own term has committed (the no-op
// it appends when elected); until then its commit offset is what it
// started with (-1 after a restart), and answering would show consumers
// an old, lower high watermark: a "latest" offset that goes back, an end
// reached too early. Reads get the retriable ErrPrimaryNotAvailable then.
func (r *Replica) checkRead(generation int32) error {
	if err := r.CheckRoute(generation); err != nil {
		return err
	}
	if t, err := r.rlog.TermAt(r.commit); err != nil || t != r.term {
		e := errorf(ErrPrimaryNotAvailable, "%s/%d: the primary of generation %d has not committed an entry of its term yet",
			r.cfg.Topic, r.cfg.Partition, r.term)
		e.RetryAfterMs = 10
		return e
	}
	return nil
}

// checkFollowerRead is checkRead for a follower read: this replica must
// be healthy, and a known generation must not be newer than its term (a
// follower that has not heard of the route's primary yet sends the
// consumer back to it with ErrNotPrimary). An older generation, or no
// known primary (an election under way, the primary paused or cut off),
// does not stop it: everything up to its high watermark is committed in
// every term, so reads keep working while the group elects a primary.
// Whether it is still in the in-sync set is the caller's check.
func (r *Replica) checkFollowerRead(generation int32) error {
	if r.failure != nil || r.raft == nil {
		return errorf(ErrStorage, "partition %s/%d is offline on node %d: %v", r.cfg.Topic, r.cfg.Partition, r.cfg.Self, r.failure)
	}
	if generation != GenerationUnknown && generation > r.term {
		e := errorf(ErrNotPrimary, "follower %d of %s/%d is at generation %d, the fetch at %d; fetch from the primary",
			r.cfg.Self, r.cfg.Topic, r.cfg.Partition, r.term, generation)
		if r.leader != raftlite.None {
			e.Leader, e.Generation = int32(r.leader), r.term
		}
		return e
	}
	return nil
}

// read resolves a fetch against the log now.
func (r *Replica) read(req *FetchArgs) FetchResult {
	res := FetchResult{HighWatermark: r.commit + 1, LogStartOffset: r.log.LogStartOffset()}
	if req.Offset < res.LogStartOffset || req.Offset > r.log.LogEndOffset() {
		res.Err = errorf(ErrOffsetOutOfRange, "%s/%d: offset %d is outside [%d, %d]",
			r.cfg.Topic, r.cfg.Partition, req.Offset, res.LogStartOffset, r.log.LogEndOffset())
		return res
	}
	if req.Offset > r.commit {
		return res
	}
	maxBytes := int(req.MaxBytes)
	spans, err := r.log.Read(req.Offset, maxBytes, r.commit)
	if err != nil {
		if errors.Is(err, segment.ErrOffsetOutOfRange) {
			res.Err = errorf(ErrOffsetOutOfRange, "%s/%d: %v", r.cfg.Topic, r.cfg.Partition, err)
		} else {
			res.Err = errorf(ErrStorage, "%s/%d: %v", r.cfg.Topic, r.cfg.Partition, err)
		}
		return res
	}
	res.Spans = spans
	for _, sp := range spans {
		res.Bytes += sp.Len
	}
	return res
}

// answer replies to a waiter with what the log holds now.
func (r *Replica) answer(w *fetchWaiter) {
	if w.done {
		return
	}
	w.done = true
	r.cfg.Sched.Stop(w.timer)
	if r.closed {
		w.reply(FetchResult{Err: errorf(ErrNotPrimary, "partition %s/%d is closed on node %d", r.cfg.Topic, r.cfg.Partition, r.cfg.Self)})
		return
	}
	w.reply(r.read(&w.req))
}

// wakeFetchers answers the waiters that the new commit satisfies and drops
// answered ones. The list is detached while it is walked: a reply may
// park a new long poll on this replica (the Kafka listener reads again
// past control batches), which goes to a fresh list and is kept after
// the walk, not cut off with the answered ones (it would then wait out
// its whole max wait).
func (r *Replica) wakeFetchers() {
	if len(r.waiters) == 0 {
		return
	}
	ws := r.waiters
	r.waiters = nil
	n := 0
	for _, w := range ws {
		if !w.done && r.commit+1-w.req.Offset > 0 && r.available(w) >= int64(w.req.MinBytes) {
			r.answer(w)
		}
		if !w.done {
			ws[n] = w
			n++
		}
	}
	clear(ws[n:])
	r.waiters = append(ws[:n], r.waiters...)
}

// dropAnswered removes the answered waiters (woken, or their wait passed)
// from the list.
func (r *Replica) dropAnswered() {
	n := 0
	for _, w := range r.waiters {
		if !w.done {
			r.waiters[n] = w
			n++
		}
	}
	clear(r.waiters[n:])
	r.waiters = r.waiters[:n]
}

// available estimates the committed bytes a waiter would get: exact
// enough, since spans are resolved again when it is answered.
func (r *Replica) available(w *fetchWaiter) int64 {
	if w.req.MinBytes <= 1 {
		return 1
	}
	spans, err := r.log.Read(w.req.Offset, int(w.req.MinBytes), r.commit)
	if err != nil {
		return int64(w.req.MinBytes) // answer now: the read reports the error
	}
	var n int64
	for _, sp := range spans {
		n += sp.Len
	}
	segment.ReleaseSpans(spans)
	return n
}

// AnswerFetches answers every waiting long poll now with what the log
// holds, as if its wait had passed: a node that is stopping answers its
// consumers instead of keeping them until their connections are cut.
func (r *Replica) AnswerFetches() {
	for _, w := range r.waiters {
		r.answer(w)
	}
	clear(r.waiters)
	r.waiters = r.waiters[:0]
}

// failWaiters answers every waiting fetch with err.
func (r *Replica) failWaiters(err error) {
	for _, w := range r.waiters {
		if !w.done {
			w.done = true
			r.cfg.Sched.Stop(w.timer)
			w.reply(FetchResult{Err: err})
		}
	}
	r.waiters = r.waiters[:0]
}

// ListOffsets answers earliest (-2), latest (-1, the high watermark) or the
// first committed offset whose batch's max timestamp is at or after ts.
func (r *Replica) ListOffsets(generation int32, ts int64) (Offsets, error) {
	if err := r.checkRead(generation); err != nil {
		return Offsets{}, err
	}
	resp := Offsets{Timestamp: -1, LogStartOffset: r.log.LogStartOffset(), HighWatermark: r.commit + 1}
	switch ts {
	case TimestampEarliest:
		resp.Offset = resp.LogStartOffset
	case TimestampLatest:
		resp.Offset = resp.HighWatermark
	default:
		off, err := r.log.OffsetForTimestamp(ts)
		if err != nil || off > r.commit {
			resp.Offset = -1
			break
		}
		resp.Offset = off
		if spans, err := r.log.Read(off, 1, r.commit); err == nil && len(spans) > 0 {
			var hdr [batch.HeaderSize]byte
			if _, err := spans[0].File().ReadAt(hdr[:], spans[0].Pos); err == nil {
				if h, err := batch.ReadHeader(hdr[:]); err == nil {
					resp.Timestamp = h.MaxTimestamp
				}
			}
			segment.ReleaseSpans(spans)
		}
	}
	return resp, nil
}
