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
	// LastStableOffset is the LSO (txns.go), whatever the isolation.
	LastStableOffset int64
	// Aborted lists, for a ReadCommitted fetch, the aborted transactions
	// whose records the spans may hold (the client drops them).
	Aborted []AbortedTxn
	Spans   []segment.Span
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
	// ReadCommitted reads up to the last stable offset only (Kafka's
	// read_committed), with the aborted transactions of the range read;
	// otherwise up to the high watermark.
	ReadCommitted bool
}

// Offsets answers ListOffsets.
type Offsets struct {
	// Offset is the offset found, -1 when no committed batch matches.
	Offset int64
	// Timestamp is the max timestamp of the batch found by time, else -1.
	Timestamp      int64
	LogStartOffset int64
	HighWatermark  int64
	// LastStableOffset is the LSO: "latest" for a read_committed client.
	LastStableOffset int64
}

// Special timestamps of ListOffsets (Kafka's values).
const (
	TimestampLatest   int64 = -1
	TimestampEarliest int64 = -2
	// TimestampMax asks for the record with the largest timestamp
	// (KIP-734).
	TimestampMax int64 = -3
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
	if req.Follower && !r.IsPrimary() && req.Offset > r.HighWatermark() {
		// The consumer has seen, at the primary, offsets this follower
		// does not know to be committed yet: it cannot answer them, and
		// waiting here would hide that the primary can.
		reply(FetchResult{HighWatermark: r.HighWatermark(), LogStartOffset: r.StartOffset(),
			Err: errorf(ErrOffsetOutOfRange, "%s/%d: offset %d is above this follower's (node %d) high watermark %d; fetch from the primary",
				r.cfg.Topic, r.cfg.Partition, req.Offset, r.cfg.Self, r.HighWatermark())})
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

// read resolves a fetch against the log now. Fetches speak user offsets
// (docs/design/offsets.md): req.Offset and the answer's watermarks; the
// spans may hold zero-width consensus batches, which the front ends leave
// out.
func (r *Replica) read(req *FetchArgs) FetchResult {
	res := FetchResult{HighWatermark: r.HighWatermark(), LogStartOffset: r.StartOffset(), LastStableOffset: r.LastStableOffset()}
	if req.Offset < res.LogStartOffset || req.Offset > r.log.UserEndOffset() {
		res.Err = errorf(ErrOffsetOutOfRange, "%s/%d: offset %d is outside [%d, %d]",
			r.cfg.Topic, r.cfg.Partition, req.Offset, res.LogStartOffset, r.log.UserEndOffset())
		return res
	}
	end, upTo := res.HighWatermark, r.commit
	if req.ReadCommitted {
		end, upTo = res.LastStableOffset, r.stableEnd()
	}
	if req.Offset >= end {
		return res
	}
	maxBytes := int(req.MaxBytes)
	spans, err := r.log.Read(r.log.RaftOffset(req.Offset), maxBytes, upTo)
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
	if req.ReadCommitted && len(spans) > 0 {
		// The records read lie in user offsets [req.Offset, the user
		// offset after the last raft offset read); spans are in order.
		end := r.log.UserOffset(spans[len(spans)-1].LastOffset + 1)
		r.txns.settle(r.commit)
		res.Aborted = r.txns.abortedIn(req.Offset, end, res.LogStartOffset, nil)
	}
	return res
}

// readEnd is the user offset a waiting fetch needs the log to pass: the
// high watermark, or for read_committed the last stable offset.
func (r *Replica) readEnd(req *FetchArgs) int64 {
	if req.ReadCommitted {
		return r.LastStableOffset()
	}
	return r.HighWatermark()
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
		if !w.done && r.readEnd(&w.req) > w.req.Offset && r.available(w) >= int64(w.req.MinBytes) {
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
	upTo := r.commit
	if w.req.ReadCommitted {
		upTo = r.stableEnd()
	}
	spans, err := r.log.Read(r.log.RaftOffset(w.req.Offset), int(w.req.MinBytes), upTo)
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

// maxTimestampOffset is the (user) offset and timestamp of the first
// committed record with the largest timestamp, (-1, -1) when the log holds
// none: the segment log finds the batch, whose records are read (and
// decompressed) for the record, as Kafka answers since 3.8 (before, the
// batch's last offset).
func (r *Replica) maxTimestampOffset() (offset, ts int64) {
	base, ts, err := r.log.MaxTimestamp(r.commit)
	if err != nil {
		return -1, -1
	}
	spans, err := r.log.Read(base, 1, r.commit)
	if err != nil || len(spans) == 0 {
		return -1, -1
	}
	defer segment.ReleaseSpans(spans)
	var hdr [batch.HeaderSize]byte
	s := spans[0]
	if _, err := s.File().ReadAt(hdr[:], s.Pos); err != nil {
		return -1, -1
	}
	h, err := batch.ReadHeader(hdr[:])
	if err != nil || int64(h.Size()) > s.Len {
		return -1, -1
	}
	b := make([]byte, h.Size())
	if _, err := s.File().ReadAt(b, s.Pos); err != nil {
		return -1, -1
	}
	var it batch.Records
	if it.Reset(b) == nil {
		for it.Next() {
			if rec := it.Record(); rec.Timestamp == ts {
				return rec.Offset, ts
			}
		}
	}
	// Records that do not iterate (or a LogAppendTime batch): the batch's
	// last offset, Kafka's answer before 3.8.
	return h.LastOffset(), ts
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

// EndOfGeneration answers Kafka's OffsetForLeaderEpoch on the primary:
// the largest generation at or below asked that the log holds (-1:
// none) and the user offset where the next one starts, the high
// watermark for the current one (no consumer read past it). Like every
// read it waits for the primary's first commit of its term (checkRead):
// before it, the high watermark is what the replica started with, and a
// consumer told that its generation ends there takes the records it read
// above it for truncated and goes back to the log's start.
func (r *Replica) EndOfGeneration(generation, asked int32) (int32, int64, error) {
	if err := r.checkRead(generation); err != nil {
		return -1, -1, err
	}
	g, end := r.log.EndOffsetForEpoch(asked)
	if g >= 0 {
		end = min(r.log.UserOffset(end), r.HighWatermark())
	}
	return g, end, nil
}

// ListOffsets answers earliest (-2), latest (-1, the high watermark), max
// timestamp (-3: the first committed record with the largest timestamp,
// maxTimestampOffset) or the first committed offset whose batch's max
// timestamp is at or after ts.
func (r *Replica) ListOffsets(generation int32, ts int64) (Offsets, error) {
	if err := r.checkRead(generation); err != nil {
		return Offsets{}, err
	}
	resp := Offsets{Timestamp: -1, LogStartOffset: r.StartOffset(), HighWatermark: r.HighWatermark(), LastStableOffset: r.LastStableOffset()}
	switch ts {
	case TimestampEarliest:
		resp.Offset = resp.LogStartOffset
	case TimestampLatest:
		resp.Offset = resp.HighWatermark
	case TimestampMax:
		resp.Offset, resp.Timestamp = r.maxTimestampOffset()
	default:
		off, err := r.log.OffsetForTimestamp(ts)
		if err != nil || off > r.commit {
			resp.Offset = -1
			break
		}
		resp.Offset = max(r.log.UserOffset(off), resp.LogStartOffset)
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
