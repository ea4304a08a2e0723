package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// Producer sends records in batches, one accumulating batch per partition,
// with idempotence on by default. It is safe for concurrent use.
//
// Lifecycle of a record: Produce/ProduceAsync picks the partition and
// copies the record into that partition's batch (under the partition's
// lock); the batch is cut when full, when Linger passes or on Flush, and
// handed to the partition's sender goroutine, which keeps at most
// InFlightPerPartitionMax batches in flight on the primary's connection and
// retries them in order (producer_send.go). Acknowledged batches go, in
// order per partition, to the producer's one delivery goroutine, which runs
// the callbacks. A synchronous Produce that cuts its own batch while its
// partition's sender is idle is the sender itself until its record is
// answered (producer_inline.go).
type Producer struct {
	c   *Client
	cfg ProducerConfig
	// ctx ends when Close gives up flushing; senders then fail what is left.
	ctx    context.Context
	cancel context.CancelFunc
	// senders counts running sender goroutines.
	senders sync.WaitGroup
	// deliveries feeds the delivery goroutine; closed by Close after every
	// sender has exited.
	// now reads the clock that stamps records (a seam for tests).
	now          func() time.Time
	deliveries   chan *prodBatch
	deliveryDone chan struct{}

	// closeMu makes Close wait for appends in progress: appends hold it
	// shared, Close exclusively while it sets closing.
	closeMu sync.RWMutex
	closing atomic.Bool
	// fatal, once set, fails every later record (a fenced producer).
	fatal atomic.Pointer[error]

	// topics is a copy-on-write map of the topics produced to; topicsMu
	// serialises its replacements.
	topics   atomic.Pointer[map[string]*topicProducer]
	topicsMu sync.Mutex

	// idMu guards producerID and epoch, the identity the newest batches use.
	idMu       sync.Mutex
	producerID int64
	epoch      int16

	// bufMu guards bufUsed and bufWake: bytes of records accepted and not
	// delivered, and a channel closed when bytes are released.
	bufMu   sync.Mutex
	bufUsed int
	bufWake chan struct{}

	// pendMu guards pending (batches cut and not delivered) and idle
	// (closed when pending drops to 0).
	pendMu  sync.Mutex
	pending int
	idle    chan struct{}

	// freeBufs is a free list of batch buffers, bounded by the buffers
	// BufferedBytesMax can keep busy at once (a sync.Pool would be emptied
	// by every collection, and batch buffers are large).
	freeBufs chan *[]byte
}

// topicProducer is one topic's partitions.
type topicProducer struct {
	name string
	id   wire.TopicID
	// parts is the current slice of partition senders; it only grows.
	parts atomic.Pointer[[]*partSender]
	mu    sync.Mutex // serialises growth of parts
	// metaVersion is the metadata version parts was checked against.
	metaVersion atomic.Uint64
	// sticky is the partition AnyPartition records go to now.
	sticky atomic.Int32
}

// NewProducer returns a producer on c. With idempotence (the default) it
// obtains a producer id from the cluster first, under ctx.
func (c *Client) NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Producer{c: c, cfg: cfg, deliveries: make(chan *prodBatch, 256), deliveryDone: make(chan struct{}),
		producerID: batch.NoProducerID, epoch: batch.NoProducerEpoch, bufWake: make(chan struct{}), idle: make(chan struct{}), now: time.Now}
	close(p.idle)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.topics.Store(&map[string]*topicProducer{})
	p.freeBufs = make(chan *[]byte, cfg.BufferedBytesMax/cfg.BatchBytesMax+1)
	if !cfg.DisableIdempotence {
		var resp wire.InitProducerResponse
		req := wire.InitProducerRequest{ProducerID: wire.ProducerIDNone, ProducerEpoch: -1}
		if err := c.doAdmin(ctx, anyNode, &req, &resp, true); err != nil {
			p.cancel()
			return nil, fmt.Errorf("client: init producer: %w", err)
		}
		p.producerID, p.epoch = resp.ProducerID, resp.ProducerEpoch
	}
	go p.deliver()
	return p, nil
}

// ProducerID returns the idempotent producer id and epoch the newest
// batches use; -1, -1 without idempotence.
func (p *Producer) ProducerID() (id int64, epoch int16) {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.producerID, p.epoch
}

// Produce sends rec and waits for its acknowledgement. It waits under ctx;
// when ctx ends first it returns ctx's error and the record may still be
// written. Produce waits at least Linger: for many records, use
// ProduceAsync and Flush. Do not call it from a ProduceAsync callback.
func (p *Producer) Produce(ctx context.Context, rec Record) (Produced, error) {
	type result struct {
		pr  Produced
		err error
	}
	ch := make(chan result, 1)
	own, err := p.produce(ctx, rec, func(pr Produced, err error) { ch <- result{pr, err} }, true)
	if err != nil {
		return Produced{}, err
	}
	if own != nil { // no sender ran: this call is it (producer_inline.go)
		own.ps.runInline(ctx, own)
	}
	select {
	case r := <-ch:
		return r.pr, r.err
	case <-ctx.Done():
		return Produced{}, ctx.Err()
	}
}

// ProduceAsync adds rec to its partition's batch and returns. ctx bounds
// only the wait before the record is accepted: for the topic's metadata and
// for buffer space (BufferedBytesMax). Once accepted, the record is
// delivered or failed within DeliveryTimeout, and cb (when not nil) is
// called exactly once with the outcome. When ProduceAsync returns an error,
// cb is never called.
//
// Callbacks run one at a time on the producer's delivery goroutine, in
// offset order per partition; they must return quickly and must not call
// Produce or Flush.
func (p *Producer) ProduceAsync(ctx context.Context, rec Record, cb func(Produced, error)) error {
	_, err := p.produce(ctx, rec, cb, false)
	return err
}

// produce is ProduceAsync; with inline, it may return the batch rec was
// cut into, whose sender the caller must then run (runInline).
func (p *Producer) produce(ctx context.Context, rec Record, cb func(Produced, error), inline bool) (*prodBatch, error) {
	if errp := p.fatal.Load(); errp != nil {
		return nil, *errp
	}
	tp, err := p.topic(ctx, rec.Topic)
	if err != nil {
		return nil, err
	}
	parts := tp.partitions(p.c)
	n := int32(len(parts))
	part := p.cfg.Partitioner.Partition(rec, n)
	if part == AnyPartition {
		part = tp.sticky.Load() % n
	}
	if part < 0 || part >= n {
		return nil, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", rec.Topic, n, part)
	}
	size := recordOverheadBytes + len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		size += len(h.Key) + len(h.Value) + 8
	}
	if size > wire.RecordsBytesMax {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrRecordTooLarge, size, wire.RecordsBytesMax)
	}
	// A record without a timestamp is stamped by add, with a clock read
	// shared by the records of its batch (stampNow).
	ts, stampNow := rec.Timestamp.UnixMilli(), rec.Timestamp.IsZero()
	if err := p.reserve(ctx, size); err != nil {
		return nil, err
	}
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closing.Load() {
		p.release(size)
		return nil, ErrClosed
	}
	own, err := parts[part].add(tp, &rec, ts, stampNow, size, cb, inline)
	if err != nil {
		p.release(size)
		return nil, err
	}
	return own, nil
}

// Flush sends every buffered record now and waits, under ctx, until every
// batch cut so far is acknowledged or failed.
func (p *Producer) Flush(ctx context.Context) error {
	for _, tp := range *p.topics.Load() {
		for _, ps := range *tp.parts.Load() {
			ps.flush()
		}
	}
	p.pendMu.Lock()
	idle := p.idle
	p.pendMu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes under ctx, then stops the producer: records still buffered
// or in flight when ctx ends fail with ErrClosed (those in flight may still
// be written). Every callback has run when Close returns.
func (p *Producer) Close(ctx context.Context) error {
	p.closeMu.Lock()
	already := p.closing.Swap(true)
	p.closeMu.Unlock()
	if already {
		<-p.deliveryDone
		return nil
	}
	err := p.Flush(ctx)
	p.cancel()
	for _, tp := range *p.topics.Load() {
		for _, ps := range *tp.parts.Load() {
			ps.stop()
		}
	}
	p.senders.Wait()
	close(p.deliveries)
	<-p.deliveryDone
	return err
}

// topic returns the producer state of name, loading its partition count
// from the metadata. A topic the cache lacks costs one refresh; when a
// trusted answer (from a node that sees the metadata quorum) does not list
// it either, it does not exist and the record fails at once. Untrusted
// answers are retried after the backoff, at most UnknownTopicRetriesMax
// times.
func (p *Producer) topic(ctx context.Context, name string) (*topicProducer, error) {
	if tp := (*p.topics.Load())[name]; tp != nil {
		return tp, nil
	}
	if err := wire.ValidateTopicName(name); err != nil {
		return nil, err
	}
	n, id, err := p.c.topicPartitions(ctx, name)
	if err != nil {
		return nil, err
	}
	p.topicsMu.Lock()
	defer p.topicsMu.Unlock()
	old := *p.topics.Load()
	if tp := old[name]; tp != nil {
		return tp, nil
	}
	tp := &topicProducer{name: name, id: id}
	parts := make([]*partSender, n)
	for i := range parts {
		parts[i] = newPartSender(p, name, int32(i))
	}
	tp.parts.Store(&parts)
	tp.sticky.Store(rand.Int32N(n)) // producers do not all start on partition 0
	tp.metaVersion.Store(p.c.meta.version.Load())
	m := make(map[string]*topicProducer, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = tp
	p.topics.Store(&m)
	return tp, nil
}

// partitions returns the topic's senders, growing them when the metadata
// shows more partitions (AddPartitions). Partitions never shrink.
func (tp *topicProducer) partitions(c *Client) []*partSender {
	parts := *tp.parts.Load()
	v := c.meta.version.Load()
	if tp.metaVersion.Load() == v {
		return parts
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.metaVersion.Store(v)
	n, _, ok := c.meta.partitions(tp.name)
	parts = *tp.parts.Load()
	if !ok || int(n) <= len(parts) {
		return parts
	}
	grown := append(parts[:len(parts):len(parts)], make([]*partSender, int(n)-len(parts))...)
	for i := len(parts); i < len(grown); i++ {
		grown[i] = newPartSender(parts[0].p, tp.name, int32(i))
	}
	tp.parts.Store(&grown)
	return grown
}

// advanceSticky moves AnyPartition records off partition from, whose batch
// was just cut.
func (tp *topicProducer) advanceSticky(from int32) {
	n := int32(len(*tp.parts.Load()))
	tp.sticky.CompareAndSwap(from, (from+1)%n)
}

// reserve takes n bytes of buffer, waiting under ctx while the producer is
// full. A record alone may exceed BufferedBytesMax when nothing else is
// buffered.
func (p *Producer) reserve(ctx context.Context, n int) error {
	for {
		p.bufMu.Lock()
		if p.bufUsed == 0 || p.bufUsed+n <= p.cfg.BufferedBytesMax {
			p.bufUsed += n
			p.bufMu.Unlock()
			return nil
		}
		wake := p.bufWake
		p.bufMu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.ctx.Done():
			return ErrClosed
		}
	}
}

// release returns n bytes of buffer and wakes waiters.
func (p *Producer) release(n int) {
	p.bufMu.Lock()
	p.bufUsed -= n
	close(p.bufWake)
	p.bufWake = make(chan struct{})
	p.bufMu.Unlock()
}

// batchCut counts a new batch as pending.
func (p *Producer) batchCut() {
	p.pendMu.Lock()
	if p.pending == 0 {
		p.idle = make(chan struct{})
	}
	p.pending++
	p.pendMu.Unlock()
}

// deliver runs callbacks for finished batches, in the order senders hand
// them over, and recycles their buffers.
func (p *Producer) deliver() {
	defer close(p.deliveryDone)
	for b := range p.deliveries {
		ps := b.ps
		p.deliverBatch(b)
		ps.undelivered.Add(-1) // after the callbacks: see partSender.undelivered
	}
}

// deliverBatch runs b's callbacks and recycles its buffer.
func (p *Producer) deliverBatch(b *prodBatch) {
	for i := range b.recs {
		r := &b.recs[i]
		if r.cb == nil {
			continue
		}
		pr := Produced{Topic: b.ps.topic, Partition: b.ps.partition, Offset: -1, Timestamp: time.UnixMilli(r.ts)}
		if b.err == nil && b.baseOffset >= 0 {
			pr.Offset = b.baseOffset + int64(i)
		}
		if b.err == nil && b.logAppendTimeMs >= 0 {
			pr.Timestamp = time.UnixMilli(b.logAppendTimeMs)
		}
		r.cb(pr, b.err)
	}
	p.release(b.bytes)
	p.putBuf(b)
	p.pendMu.Lock()
	if p.pending--; p.pending == 0 {
		close(p.idle)
	}
	p.pendMu.Unlock()
}

// getBuf returns an empty batch buffer.
func (p *Producer) getBuf() *[]byte {
	select {
	case b := <-p.freeBufs:
		return b
	default:
		b := make([]byte, 0, p.cfg.BatchBytesMax+batch.HeaderSize)
		return &b
	}
}

// putBuf recycles b's buffer. REQUIRES: no connection will read it again
// (every send of b has completed).
func (p *Producer) putBuf(b *prodBatch) {
	if b.buf != nil && cap(*b.buf) <= p.cfg.BatchBytesMax+batch.HeaderSize {
		*b.buf = (*b.buf)[:0]
		select {
		case p.freeBufs <- b.buf:
		default:
		}
	}
	b.buf, b.data, b.recs = nil, nil, nil
}

// setFatal fails the producer for good.
func (p *Producer) setFatal(err error) {
	p.fatal.CompareAndSwap(nil, &err)
}
