package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// Batch states, as the sender sees them.
const (
	// batchUnsent: waiting to be sent (first time or again).
	batchUnsent = iota
	// batchInFlight: sent; its completion has not been handled.
	batchInFlight
	// batchFailed: its last send failed; recovery decides what next.
	batchFailed
	// batchDone: final (acknowledged, or failed for good); ready to deliver.
	batchDone
)

// prodBatch is one cut batch and its records' callbacks.
type prodBatch struct {
	ps   *partSender
	buf  *[]byte // pooled buffer holding data
	data []byte  // the batch; immutable while any send of it may be read
	recs []pendingRecord
	// bytes is what the records charged against BufferedBytesMax.
	bytes int
	// seq and epoch are the batch's producer fields (when idempotent).
	seq     int32
	epoch   int16
	created time.Time

	// claim decides, once per send, who handles the send's end: the
	// connection's reader (claimAnswered: the completion goes to events)
	// or the sender when the delivery timeout passes first
	// (claimExpired: the completion is dropped). Reset by each send.
	claim atomic.Int32

	// The fields below are owned by the sender goroutine.
	state int
	// sentAt is when the last attempt to send the batch began (routing
	// included): a failure of it is followed by a metadata refresh that
	// started later.
	sentAt time.Time
	// abandoned: a send of this batch may still be on a connection that
	// has not answered (its delivery timeout passed while it was in
	// flight), so its buffer is never recycled.
	abandoned bool
	// failures counts the recoveries this batch caused as the oldest
	// failed batch; later batches resent in the same recovery do not count.
	failures int
	// route is the cache's view of the partition's route when the last
	// attempt was routed; backoffFrom is failures when the route last
	// improved on it (the backoff restarts from its minimum there).
	route       routeState
	backoffFrom int
	// seqRecoveries counts the epoch bumps this batch caused
	// (OUT_OF_ORDER_SEQUENCE, UNKNOWN_PRODUCER_ID); RetryAttemptsMax
	// bounds them, apart from the retriable failures before them, which
	// the delivery timeout bounds.
	seqRecoveries int
	sent          bool // sent at least once: its outcome may be "appended"
	err           error
	head          []byte // the request frame before the records, reused per send
	call          call
	resp          wire.ProduceResponse
	// baseOffset and logAppendTimeMs are the acknowledgement's.
	baseOffset      int64
	logAppendTimeMs int64
}

// Values of prodBatch.claim.
const (
	claimNone int32 = iota
	claimAnswered
	claimExpired
)

// deadline is when the batch's delivery timeout passes.
func (b *prodBatch) deadline() time.Time { return b.created.Add(b.ps.p.cfg.DeliveryTimeout) }

// pendingRecord is what delivery needs of one record.
type pendingRecord struct {
	cb func(Produced, error)
	ts int64
}

// partSender accumulates and sends one partition's batches.
type partSender struct {
	p         *Producer
	topic     string
	partition int32
	// events receives completions of this partition's produce calls; its
	// capacity is the in-flight bound, so a connection reader never blocks.
	events chan *prodBatch
	// undelivered counts this partition's batches handed to the delivery
	// goroutine whose callbacks have not all run. A Produce that runs the
	// sender itself completes its own batch only when it is 0, so its
	// answer never overtakes an earlier record's callback.
	undelivered atomic.Int32
	// kick wakes the sender when batches are cut (capacity 1).
	kick chan struct{}

	mu sync.Mutex
	// builder, recs, bytes and started hold the batch being accumulated;
	// started is when its first record came. Guarded by mu.
	builder *batch.Builder
	recs    []pendingRecord
	bytes   int
	started time.Time
	// stampAt is the time records without a timestamp get, read when
	// the batch started or stampRecordsMax records ago (stampUses).
	stampAt   time.Time
	stampUses int
	timer     *time.Timer // linger; guarded by mu
	// ready holds cut batches not yet taken by the sender. Guarded by mu.
	ready []*prodBatch
	// running says a sender is active: a goroutine (run), or a Produce
	// call running the same loop itself (runInline). Guarded by mu.
	running bool
	stopped bool
	// pid, epoch and nextSeq number the next batch cut. Guarded by mu.
	pid     int64
	epoch   int16
	nextSeq int32
	tp      *topicProducer // set on first add; guarded by mu
	// halted, once set (StopOnFailure, after a failed batch), fails every
	// batch cut later without sending it. Guarded by mu.
	halted error

	// Owned by the sender goroutine:
	// window holds the unacknowledged batches in sequence order.
	window     []*prodBatch
	inflight   int
	recovering bool
	// probing is set after a recovery: the oldest batch is resent alone,
	// and pipelining resumes once it is acknowledged. The oldest batch may
	// already be in the log (its answer was lost); if it were resent with
	// later batches and failed again (BUSY, a lost connection) while they
	// were appended behind it, each round would push it further out of the
	// broker's window of recent batches, and its retry would come back
	// DUPLICATE_SEQUENCE with its offset unknown.
	probing bool
	// topicID pins the topic's history once a batch was routed.
	topicID wire.TopicID
	// conn carries the sends in flight. Invariant: while inflight > 0,
	// every send in flight is on conn, so the broker appends them in
	// order, and a broken conn fails all of them before anything is
	// sent elsewhere (otherwise a later batch could be acknowledged on a
	// new connection before an earlier one's failure is known).
	conn *conn
}

// errWaitInFlight tells sendUnsent to wait: the partition's route now
// leads to another connection than the one its sends in flight use.
var errWaitInFlight = errors.New("wait for the sends in flight")

func newPartSender(p *Producer, topic string, partition int32) *partSender {
	b, _ := batch.NewBuilder(batch.Options{Codec: p.cfg.Compression, Level: p.cfg.CompressionLevel})
	return &partSender{p: p, topic: topic, partition: partition, builder: b,
		events: make(chan *prodBatch, p.cfg.InFlightPerPartitionMax), kick: make(chan struct{}, 1),
		pid: batch.NoProducerID, epoch: batch.NoProducerEpoch}
}

// stampRecordsMax is how many records without a timestamp share one clock
// read (stampNow). A clock read per record was 8 % of a batching
// producer's CPU; one per batch start and per this many records bounds a
// stamp's age by Linger and by the time this many Produce calls take.
const stampRecordsMax = 64

// add appends one record to the accumulating batch, cutting it first when
// the record would not fit and after when it is full. With stampNow the
// record gets the time read when its batch started (or at most
// stampRecordsMax records ago), not ts. With inline, when the record's
// batch is cut at once and no sender runs, add starts none and returns the
// batch: the caller must then run the sender itself (runInline).
func (s *partSender) add(tp *topicProducer, rec *Record, ts int64, stampNow bool, size int, cb func(Produced, error), inline bool) (*prodBatch, error) {
	br := batch.Record{Timestamp: ts, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, ErrClosed
	}
	s.tp = tp
	if s.builder.Len() > 0 && s.builder.EstimatedBytes()+s.builder.RecordBytes(&br) > s.p.cfg.BatchBytesMax {
		s.cutLocked()
	}
	if stampNow {
		if s.builder.Len() == 0 || s.stampUses >= stampRecordsMax {
			s.stampAt, s.stampUses = s.p.now(), 0
		}
		s.stampUses++
		ts = s.stampAt.UnixMilli()
		br.Timestamp = ts
	}
	if err := s.builder.Append(br); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRecordTooLarge, err)
	}
	s.recs = append(s.recs, pendingRecord{cb: cb, ts: ts})
	s.bytes += size
	switch {
	case s.builder.EstimatedBytes() >= s.p.cfg.BatchBytesMax || s.p.cfg.Linger < 0:
		if inline && !s.running {
			return s.cutRunLocked(), nil
		}
		s.cutLocked()
	case s.builder.Len() == 1:
		if stampNow { // read for this record, just now
			s.started = s.stampAt
		} else {
			s.started = time.Now()
		}
		if s.timer == nil {
			s.timer = time.AfterFunc(s.p.cfg.Linger, s.lingerExpired)
		} else {
			s.timer.Reset(s.p.cfg.Linger)
		}
	}
	return nil, nil
}

// lingerExpired cuts the batch when it has waited Linger (the timer may
// fire for an earlier batch: then it re-arms for this one).
func (s *partSender) lingerExpired() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.builder.Len() == 0 || s.stopped {
		return
	}
	if wait := s.p.cfg.Linger - time.Since(s.started); wait > 0 {
		s.timer.Reset(wait)
		return
	}
	s.cutLocked()
}

// flush cuts the accumulating batch.
func (s *partSender) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutLocked()
}

// stop makes later adds fail and stops the linger timer. REQUIRES: nothing
// is left accumulating (Close flushed first).
func (s *partSender) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// cutLocked builds the accumulating batch and hands it to the sender,
// starting one when none runs. REQUIRES: s.mu held.
func (s *partSender) cutLocked() {
	if s.buildLocked() == nil {
		return
	}
	if !s.running {
		s.running = true
		s.p.senders.Add(1)
		go s.run()
		return
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// cutRunLocked builds the accumulating batch and takes the sender's role
// for the caller, which must call runInline with the batch returned.
// REQUIRES: s.mu held, something accumulated, and no sender running.
func (s *partSender) cutRunLocked() *prodBatch {
	b := s.buildLocked()
	s.running = true
	s.p.senders.Add(1)
	return b
}

// buildLocked builds the accumulating batch into ready and returns it, or
// nil when nothing accumulated. REQUIRES: s.mu held.
func (s *partSender) buildLocked() *prodBatch {
	if s.builder.Len() == 0 {
		return nil
	}
	p := s.p
	b := &prodBatch{ps: s, recs: s.recs, bytes: s.bytes, created: time.Now(), seq: batch.NoSequence, epoch: batch.NoProducerEpoch}
	s.recs, s.bytes = make([]pendingRecord, 0, cap(b.recs)), 0 // the next batch is likely as large
	if !p.cfg.DisableIdempotence {
		if s.pid == batch.NoProducerID {
			s.pid, s.epoch = p.ProducerID()
		}
		b.seq, b.epoch = s.nextSeq, s.epoch
		s.builder.SetProducer(s.pid, s.epoch, s.nextSeq)
		s.nextSeq = batch.IncrementSequence(s.nextSeq, int32(s.builder.Len()))
	}
	b.buf = p.getBuf()
	data, err := s.builder.BuildAppend((*b.buf)[:0])
	if err != nil { // a compressed batch over the format's bound
		s.builder.Reset()
		b.err = fmt.Errorf("%w: %w", ErrRecordTooLarge, err)
		b.state = batchDone
	}
	b.data = data
	*b.buf = data[:0]
	p.batchCut()
	if s.tp != nil {
		s.tp.advanceSticky(s.partition)
	}
	s.ready = append(s.ready, b)
	switch {
	case s.stopped:
		b.err, b.state = ErrClosed, batchDone
	case s.halted != nil:
		b.err, b.state = s.halted, batchDone
	case b.err != nil && p.cfg.StopOnFailure:
		s.halted = fmt.Errorf("%w (%s/%d: %v)", ErrEarlierRecordFailed, s.topic, s.partition, b.err)
	}
	return b
}

// run is the sender goroutine: it sends the partition's batches in order,
// at most InFlightPerPartitionMax at a time, handles their completions and
// recovers from failures, and exits when nothing is left.
func (s *partSender) run() {
	defer s.p.senders.Done()
	// expiry fires when the oldest unfinished batch's delivery timeout
	// passes, so that it fails on time even while its node does not answer.
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	for { // bounded by the batches cut; each turn waits for an event or makes progress
		if !s.takeReady() {
			return
		}
		if s.p.ctx.Err() != nil {
			s.abort()
			return
		}
		s.deliverDone(nil)
		if len(s.window) == 0 {
			continue
		}
		s.expireDue(time.Now())
		if s.recovering && s.inflight == 0 {
			s.recover()
			continue
		}
		if !s.recovering {
			s.sendUnsent(nil)
		}
		if s.inflight == 0 {
			continue // recover from a failed send, or take new batches
		}
		if head := s.oldestUnfinished(); head != nil {
			expiry.Reset(time.Until(head.deadline()))
		}
		select {
		case b := <-s.events:
			s.completed(b)
		case <-s.kick:
		case <-expiry.C:
		case <-s.p.ctx.Done():
		}
	}
}

// takeReady moves the batches cut since the last look into the window and
// reports whether anything is left to send or wait for. When nothing is,
// the sender's role ends (running = false) under the same lock, so that a
// batch cut after that starts a new sender.
func (s *partSender) takeReady() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = append(s.window, s.ready...)
	clear(s.ready)
	s.ready = s.ready[:0]
	if len(s.window) == 0 {
		s.running = false
		return false
	}
	return true
}

// oldestUnfinished returns the window's first batch that is not done, or
// nil. Batches are cut in order, so it has the earliest deadline.
func (s *partSender) oldestUnfinished() *prodBatch {
	for _, b := range s.window {
		if b.state != batchDone {
			return b
		}
	}
	return nil
}

// expireDue acts when the oldest unfinished batch's delivery timeout has
// passed at now. Sends still in flight are abandoned: their completions
// will be dropped (claimExpired), they stop counting as in flight, and
// they fail with an unknown outcome — the node may yet append them — so
// recovery (retryOrFail) fails every batch sent so far with
// ErrDeliveryTimeout and moves the rest to a new epoch, which fences any
// late append of the abandoned sends. A batch not in flight is marked
// failed for recovery to finish. The metadata is refreshed: the node did
// not answer in time.
func (s *partSender) expireDue(now time.Time) {
	head := s.oldestUnfinished()
	if head == nil || now.Before(head.deadline()) {
		return
	}
	expired := false
	for _, b := range s.window {
		switch {
		case b.state == batchInFlight && b.claim.CompareAndSwap(claimNone, claimExpired):
			// The reader has not claimed the answer: abandon the send.
			s.inflight--
			b.state, b.abandoned, expired = batchFailed, true, true
			b.err = &noAnswerError{fmt.Sprintf("node %d (%s) has not answered the produce sent %v ago",
				s.conn.nodeID, s.conn.addr, now.Sub(b.sentAt).Round(time.Millisecond)), b.err}
		case b == head && b.state == batchUnsent:
			b.state, b.err = batchFailed, &noAnswerError{"no route or connection to the primary in time", b.err}
		}
	}
	// A send whose answer the reader already claimed completes through
	// events at once; recovery waits for it (inflight > 0).
	s.recovering = true
	if expired {
		s.p.c.kickRefresh()
	}
}

// errNoAnswerInTime matches the failure of a send abandoned, or never
// made, because the batch's delivery timeout passed: its outcome is
// unknown when the batch was ever sent, so it is not classified like a
// broker's answer.
var errNoAnswerInTime = errors.New("no answer before the delivery timeout")

// noAnswerError says why a batch had no answer by its delivery timeout,
// and wraps the failure of its previous attempt (nil when none): that is
// usually the cause worth reporting (NOT_ENOUGH_REPLICAS, a refused
// connection). It matches errNoAnswerInTime.
type noAnswerError struct {
	msg  string
	last error
}

func (e *noAnswerError) Error() string {
	if e.last == nil {
		return e.msg
	}
	return e.msg + "; the attempt before failed: " + e.last.Error()
}

func (e *noAnswerError) Is(target error) bool { return target == errNoAnswerInTime }
func (e *noAnswerError) Unwrap() error        { return e.last }

// hasState reports whether some batch of the window is in state st.
func (s *partSender) hasState(st int) bool {
	for _, b := range s.window {
		if b.state == st {
			return true
		}
	}
	return false
}

// sendUnsent sends unsent batches in order while the in-flight bound
// allows. Routing, connecting and waiting for a connection slot end at the
// oldest unfinished batch's delivery deadline, and when caller (a
// Produce's context, for runInline; nil for run) ends: a send stopped by
// it leaves its batch unsent, for the sender goroutine taking over.
func (s *partSender) sendUnsent(caller context.Context) {
	head := s.oldestUnfinished()
	if head == nil {
		return
	}
	ctx, cancel := context.WithDeadline(s.p.ctx, head.deadline())
	defer cancel()
	if caller != nil {
		defer context.AfterFunc(caller, cancel)()
	}
	for _, b := range s.window {
		if s.inflight >= s.p.cfg.InFlightPerPartitionMax || (s.probing && s.inflight > 0) {
			return
		}
		if b.state != batchUnsent {
			continue
		}
		if err := s.send(ctx, b); err != nil {
			if err == errWaitInFlight || (caller != nil && caller.Err() != nil) {
				return
			}
			if errors.Is(err, context.DeadlineExceeded) && s.p.ctx.Err() == nil {
				err = &noAnswerError{"no route or connection to the primary in time", b.err}
			}
			b.state, b.err = batchFailed, err
			s.recovering = true
			return
		}
	}
}

// send routes and sends one batch, waiting under ctx.
func (s *partSender) send(ctx context.Context, b *prodBatch) error {
	c := s.p.c
	b.sentAt = time.Now() // a failure of this attempt refreshes the metadata from a later refresh
	b.route = c.meta.state(s.topic, s.partition)
	rt, err := c.routeOf(ctx, s.topic, s.partition)
	if err != nil {
		return err
	}
	if s.topicID.IsZero() {
		s.topicID = rt.ref.TopicID
	} else if rt.ref.TopicID != s.topicID {
		return fmt.Errorf("%w: %s now has id %s, not %s", ErrTopicRecreated, s.topic, rt.ref.TopicID, s.topicID)
	}
	if err := c.dialBackoff(rt.addr); err != nil {
		return err
	}
	cn, err := c.connForPartition(ctx, rt.addr, &rt.ref)
	if err != nil {
		return err
	}
	if s.inflight > 0 && cn != s.conn {
		return errWaitInFlight
	}
	v, err := cn.version(wire.APIProduce)
	if err != nil {
		return err
	}
	b.head = appendProduceHead(b.head[:0], v, &rt.ref, s.p.cfg.Acks, timeoutMs(c.cfg.RequestTimeout), len(b.data))
	if size := len(b.head) - wire.SizeFieldBytes + len(b.data); size > cn.frameBytesMax {
		return fmt.Errorf("%w: a %d-byte produce request exceeds node %d's frame limit of %d bytes",
			ErrRecordTooLarge, size, cn.nodeID, cn.frameBytesMax)
	}
	b.call = call{key: wire.APIProduce, version: v, head: b.head, tail: b.data, resp: &b.resp, cb: s.onComplete, owner: b,
		part: partKey{s.topic, s.partition}, gen: rt.ref.Generation}
	b.claim.Store(claimNone)
	if err := cn.send(ctx, &b.call); err != nil {
		return err
	}
	b.state, b.sent = batchInFlight, true
	s.inflight++
	s.conn = cn
	return nil
}

// onComplete runs on a connection's reader goroutine. It hands the
// completion to the sender unless the sender abandoned the send (its
// delivery timeout passed first); then nobody waits for it, and the batch's
// buffer, which the writer is done with now, is left to the collector.
func (s *partSender) onComplete(cl *call) {
	if cl.owner.claim.CompareAndSwap(claimNone, claimAnswered) {
		s.events <- cl.owner
	}
}

// completed handles one send's outcome.
func (s *partSender) completed(b *prodBatch) {
	s.inflight--
	err := b.call.err
	switch {
	case err == nil:
		b.state, b.err = batchDone, nil
		b.baseOffset, b.logAppendTimeMs = b.resp.BaseOffset, b.resp.LogAppendTimeMs
		s.probing = false // while probing, the one batch in flight is the oldest
	case errors.Is(err, wire.ErrDuplicateSequence):
		// Written long ago; the data is in the log (offset unknown).
		b.state, b.err = batchDone, nil
		b.baseOffset, b.logAppendTimeMs = -1, -1
	default:
		b.state, b.err = batchFailed, err
		s.recovering = true
	}
}

// deliverDone hands finished batches at the head of the window to delivery,
// and reports whether own (runInline's batch; nil for run) was among them.
// own is delivered on the calling goroutine, without waking the delivery
// goroutine, when its one record is the caller's (its callback only hands
// the outcome to Produce) and every earlier batch of the partition has
// been delivered; otherwise it queues behind them.
func (s *partSender) deliverDone(own *prodBatch) (ownDone bool) {
	n := 0
	for n < len(s.window) && s.window[n].state == batchDone {
		b := s.window[n]
		if b.abandoned {
			b.buf = nil // a connection may still read it: do not recycle
		}
		if b == own {
			ownDone = true
			if len(b.recs) == 1 && s.undelivered.Load() == 0 {
				s.p.deliverBatch(b)
				n++
				continue
			}
		}
		s.undelivered.Add(1)
		s.p.deliveries <- b
		n++
	}
	if n > 0 {
		s.window = append(s.window[:0], s.window[n:]...)
	}
	return ownDone
}

// abort fails everything left after the producer's context ended.
func (s *partSender) abort() {
	s.mu.Lock()
	s.window = append(s.window, s.ready...)
	s.ready = nil
	s.running = false
	s.mu.Unlock()
	for _, b := range s.window {
		if b.state != batchDone {
			b.state, b.err = batchDone, ErrClosed
			if !b.sent {
				b.err = fmt.Errorf("%w (%w)", ErrClosed, ErrNeverSent)
			}
		}
		if b.sent && b.err != nil {
			b.buf = nil // a dead send may still read it: do not recycle
		}
		s.undelivered.Add(1)
		s.p.deliveries <- b
	}
	s.window = nil
}

// appendProduceHead appends a Produce request frame without its records,
// sized for recordsLen bytes of records sent right after it.
func appendProduceHead(dst []byte, version uint16, ref *wire.PartitionRef, acks wire.Acks, timeoutMs uint32, recordsLen int) []byte {
	req := wire.ProduceRequest{PartitionRef: *ref, Acks: acks, TimeoutMs: timeoutMs}
	start := len(dst)
	dst = wire.AppendRequest(dst, 0, version, &req)
	// The body ends with records_len (0 here); the records come last.
	binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(recordsLen))
	size := binary.BigEndian.Uint32(dst[start:])
	binary.BigEndian.PutUint32(dst[start:], size+uint32(recordsLen))
	return dst
}
