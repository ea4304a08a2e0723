package partition

import (
	"errors"
	"time"

	"github.com/corestream/corestream/netio/wire"
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

// Bounds on fetches.
const (
	// fetchWaitersMax bounds the long-poll fetches one partition holds;
	// more are answered at once with what is there.
	fetchWaitersMax = 4096
)

// fetchWaiter is a long-poll fetch waiting for the commit to move.
type fetchWaiter struct {
	req   wire.FetchRequest
	reply func(FetchResult)
	timer *shard.Timer
	done  bool
}

// Fetch reads committed batches from req.FetchOffset. When fewer than
// req.MinBytes are available it waits up to req.MaxWaitMs for more. reply
// runs exactly once.
func (r *Replica) Fetch(req *wire.FetchRequest, reply func(FetchResult)) {
	if r.closed {
		reply(FetchResult{Err: wire.Errorf(wire.ErrNotPrimary, "partition %s/%d is closed on node %d", r.cfg.Topic, r.cfg.Partition, r.cfg.Self)})
		return
	}
	if err := r.checkRead(req.Generation); err != nil {
		reply(FetchResult{Err: err})
		return
	}
	res := r.read(req)
	if res.Err != nil || res.Bytes >= int64(req.MinBytes) || req.MaxWaitMs == 0 || len(r.waiters) >= fetchWaitersMax {
		reply(res)
		return
	}
	segment.ReleaseSpans(res.Spans)
	w := &fetchWaiter{req: *req, reply: reply}
	w.req.Topic = "" // the waiter needs no name; do not pin the frame's string
	wait := time.Duration(min(req.MaxWaitMs, wire.FetchWaitMsMax)) * time.Millisecond
	w.timer = r.cfg.Sched.AfterFunc(wait, func() { r.answer(w) })
	r.waiters = append(r.waiters, w)
}

// checkRead is CheckRoute for reads. A new primary knows the high
// watermark only once an entry of its own term has committed (the no-op
// it appends when elected); until then its commit offset is what it
// started with (-1 after a restart), and answering would show consumers
// an old, lower high watermark: a "latest" offset that goes back, an end
// reached too early. Reads get the retriable PRIMARY_NOT_AVAILABLE then.
func (r *Replica) checkRead(generation int32) error {
	if err := r.CheckRoute(generation); err != nil {
		return err
	}
	if t, err := r.rlog.TermAt(r.commit); err != nil || t != r.term {
		e := wire.Errorf(wire.ErrPrimaryNotAvailable, "%s/%d: the primary of generation %d has not committed an entry of its term yet",
			r.cfg.Topic, r.cfg.Partition, r.term)
		e.RetryAfterMs = 10
		return e
	}
	return nil
}

// read resolves a fetch against the log now.
func (r *Replica) read(req *wire.FetchRequest) FetchResult {
	res := FetchResult{HighWatermark: r.commit + 1, LogStartOffset: r.log.LogStartOffset()}
	if req.FetchOffset < res.LogStartOffset || req.FetchOffset > r.log.LogEndOffset() {
		res.Err = wire.Errorf(wire.ErrOffsetOutOfRange, "%s/%d: offset %d is outside [%d, %d]",
			r.cfg.Topic, r.cfg.Partition, req.FetchOffset, res.LogStartOffset, r.log.LogEndOffset())
		return res
	}
	if req.FetchOffset > r.commit {
		return res
	}
	maxBytes := int(min(req.MaxBytes, wire.RecordsBytesMax))
	spans, err := r.log.Read(req.FetchOffset, maxBytes, r.commit)
	if err != nil {
		if errors.Is(err, segment.ErrOffsetOutOfRange) {
			res.Err = wire.Errorf(wire.ErrOffsetOutOfRange, "%s/%d: %v", r.cfg.Topic, r.cfg.Partition, err)
		} else {
			res.Err = wire.Errorf(wire.ErrStorageError, "%s/%d: %v", r.cfg.Topic, r.cfg.Partition, err)
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
		w.reply(FetchResult{Err: wire.Errorf(wire.ErrNotPrimary, "partition %s/%d is closed on node %d", r.cfg.Topic, r.cfg.Partition, r.cfg.Self)})
		return
	}
	w.reply(r.read(&w.req))
}

// wakeFetchers answers the waiters that the new commit satisfies and drops
// answered ones.
func (r *Replica) wakeFetchers() {
	if len(r.waiters) == 0 {
		return
	}
	n := 0
	for _, w := range r.waiters {
		if !w.done && r.commit+1-w.req.FetchOffset > 0 && r.available(w) >= int64(w.req.MinBytes) {
			r.answer(w)
		}
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
	spans, err := r.log.Read(w.req.FetchOffset, int(w.req.MinBytes), r.commit)
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
func (r *Replica) ListOffsets(req *wire.ListOffsetsRequest) (wire.ListOffsetsResponse, error) {
	if err := r.checkRead(req.Generation); err != nil {
		return wire.ListOffsetsResponse{}, err
	}
	resp := wire.ListOffsetsResponse{Timestamp: -1, LogStartOffset: r.log.LogStartOffset(), HighWatermark: r.commit + 1}
	switch req.Timestamp {
	case wire.TimestampEarliest:
		resp.Offset = resp.LogStartOffset
	case wire.TimestampLatest:
		resp.Offset = resp.HighWatermark
	default:
		off, err := r.log.OffsetForTimestamp(req.Timestamp)
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
