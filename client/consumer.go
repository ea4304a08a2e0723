package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// Consumer reads records from explicitly assigned partitions. Each assigned
// partition has a fetcher goroutine that long-polls its primary and keeps
// up to PrefetchMax results ready; Poll returns what is ready. It is safe
// for concurrent use, but records are returned to one Poll at a time in
// offset order per partition.
type Consumer struct {
	c   *Client
	cfg ConsumerConfig
	wg  sync.WaitGroup

	mu sync.Mutex
	// fetchers are the assigned partitions. Guarded by mu.
	fetchers map[partKey]*fetcher
	// queue holds fetch results in arrival order. Guarded by mu.
	queue  []*fetchResult
	closed bool
	// notify wakes a waiting Poll (capacity 1).
	notify chan struct{}
}

type partKey struct {
	topic     string
	partition int32
}

// fetcher is one assigned partition.
type fetcher struct {
	cs        *Consumer
	topic     string
	partition int32
	ctx       context.Context
	cancel    context.CancelFunc
	// tokens bounds the results this partition has queued.
	tokens chan struct{}
	// topicID is the history read; owned by the fetch goroutine.
	topicID wire.TopicID

	// position is the next offset Poll returns; hwm the last high watermark
	// seen; readReplica the follower fetched from instead of the primary
	// (0: none; consumer_follow.go). Guarded by cs.mu.
	position    int64
	hwm         int64
	readReplica int32
	// replicaFailedAt is when the last read replica failed; owned by the
	// fetch goroutine.
	replicaFailedAt time.Time
}

// fetchResult is one fetch's records, or an error, for one partition.
type fetchResult struct {
	f    *fetcher
	recs []Record
	// next is the position after this result's records.
	next int64
	hwm  int64
	err  error
}

// NewConsumer returns a consumer on c with nothing assigned.
func (c *Client) NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Name != "" {
		if err := wire.ValidateConsumerName(cfg.Name); err != nil {
			return nil, err
		}
	}
	return &Consumer{c: c, cfg: cfg, fetchers: map[partKey]*fetcher{}, notify: make(chan struct{}, 1)}, nil
}

// Assign starts reading topic's partitions (nil: every partition it has
// now) from start, resolved now under ctx (ListOffsets, FetchOffsets). A
// partition already assigned restarts from start.
func (cs *Consumer) Assign(ctx context.Context, topic string, partitions []int32, start Start) error {
	if partitions == nil {
		n, err := cs.c.Partitions(ctx, topic)
		if err != nil {
			return err
		}
		for i := int32(0); i < n; i++ {
			partitions = append(partitions, i)
		}
	}
	for _, p := range partitions {
		off, id, err := cs.resolve(ctx, topic, p, start)
		if err != nil {
			return &PartitionError{Topic: topic, Partition: p, Err: err}
		}
		cs.mu.Lock()
		if cs.closed {
			cs.mu.Unlock()
			return ErrClosed
		}
		if old := cs.fetchers[partKey{topic, p}]; old != nil {
			old.cancel()
		}
		f := &fetcher{cs: cs, topic: topic, partition: p, topicID: id, position: off, hwm: -1,
			tokens: make(chan struct{}, cs.cfg.PrefetchMax)}
		f.ctx, f.cancel = context.WithCancel(context.Background())
		cs.fetchers[partKey{topic, p}] = f
		cs.wg.Add(1)
		cs.mu.Unlock()
		go f.run(off)
	}
	return nil
}

// Unassign stops reading the given partitions of topic (none: all of them).
// Records already fetched for them are dropped.
func (cs *Consumer) Unassign(topic string, partitions ...int32) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for k, f := range cs.fetchers {
		if k.topic == topic && (len(partitions) == 0 || contains(partitions, k.partition)) {
			f.cancel()
			delete(cs.fetchers, k)
		}
	}
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// resolve turns start into an offset for topic/partition, and returns the
// topic id the offset belongs to.
func (cs *Consumer) resolve(ctx context.Context, topic string, p int32, start Start) (int64, wire.TopicID, error) {
	n, id, ok := cs.c.meta.partitions(topic)
	if !ok {
		if _, err := cs.c.Partitions(ctx, topic); err != nil {
			return 0, id, err
		}
		n, id, _ = cs.c.meta.partitions(topic)
	}
	if p < 0 || p >= n {
		return 0, id, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", topic, n, p)
	}
	switch start.kind {
	case startOffset:
		if start.offset < 0 {
			return 0, id, wire.Errorf(wire.ErrInvalidOffset, "start offset %d is negative", start.offset)
		}
		return start.offset, id, nil
	case startEarliest, startLatest, startTime:
		ts := wire.TimestampEarliest
		switch start.kind {
		case startLatest:
			ts = wire.TimestampLatest
		case startTime:
			ts = start.time.UnixMilli()
		}
		r, err := cs.c.ListOffsets(ctx, topic, p, ts)
		if err != nil {
			return 0, id, err
		}
		if r.Offset < 0 {
			return r.HighWatermark, id, nil
		}
		return r.Offset, id, nil
	case startCommitted:
		if cs.cfg.Name == "" {
			return 0, id, ErrNoConsumerName
		}
		offs, err := cs.c.FetchOffsets(ctx, cs.cfg.Name, []wire.TopicPartition{{Topic: topic, Partition: p}})
		if err != nil {
			return 0, id, err
		}
		if len(offs) == 1 && offs[0].Offset >= 0 && offs[0].ErrorCode == wire.CodeNone && (offs[0].TopicID.IsZero() || offs[0].TopicID == id) {
			return offs[0].Offset, id, nil
		}
		return cs.resolve(ctx, topic, p, *start.fallback)
	}
	return 0, id, fmt.Errorf("client: no start position given for %s/%d", topic, p)
}

// Poll returns the records ready, waiting under ctx until there are some.
// Records of one partition come in offset order; the returned slices are
// the caller's (never reused by the consumer). When a partition reports an
// error, Poll returns the records gathered before it and a
// *PartitionError; the partition keeps fetching (a lost primary is retried,
// a position out of range is reset per OutOfRange). Poll also returns, with
// no records and no error, when positions advanced over batches that hold
// no data (control batches, such as the no-op a new primary appends), so
// that a caller waiting for a position sees it move.
func (cs *Consumer) Poll(ctx context.Context) ([]Record, error) {
	for {
		recs, err, ok := cs.take(cs.cfg.PollRecordsMax)
		if ok {
			return recs, err
		}
		select {
		case <-cs.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// take gathers ready results; ok is false when there was nothing (no
// record, no error, no position moved).
// At most recordsMax records are taken; a partition's position moves
// past those taken only.
func (cs *Consumer) take(recordsMax int) (recs []Record, err error, ok bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, ErrClosed, true
	}
	moved := false
	for len(cs.queue) > 0 && len(recs) < recordsMax {
		r := cs.queue[0]
		if cs.fetchers[partKey{r.f.topic, r.f.partition}] != r.f {
			cs.popLocked() // unassigned or reassigned since
			continue
		}
		if r.err != nil {
			if len(recs) > 0 {
				break // report it on the next Poll
			}
			cs.popLocked()
			r.f.release()
			return nil, &PartitionError{Topic: r.f.topic, Partition: r.f.partition, Err: r.err}, true
		}
		n := min(len(r.recs), recordsMax-len(recs))
		recs = append(recs, r.recs[:n]...)
		r.f.hwm = r.hwm
		if n < len(r.recs) {
			r.f.position = r.recs[n-1].Offset + 1
			r.recs = r.recs[n:]
			break
		}
		moved = moved || r.f.position != r.next
		r.f.position = r.next
		cs.popLocked()
		r.f.release()
	}
	return recs, nil, len(recs) > 0 || moved
}

func (cs *Consumer) popLocked() {
	cs.queue[0] = nil
	cs.queue = cs.queue[1:]
}

// push queues a result and wakes Poll.
func (cs *Consumer) push(r *fetchResult) {
	cs.mu.Lock()
	cs.queue = append(cs.queue, r)
	cs.mu.Unlock()
	select {
	case cs.notify <- struct{}{}:
	default:
	}
}

// Position returns the next offset Poll will return for topic/partition.
func (cs *Consumer) Position(topic string, partition int32) (int64, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	f := cs.fetchers[partKey{topic, partition}]
	if f == nil {
		return 0, ErrNotAssigned
	}
	return f.position, nil
}

// HighWatermark returns the last high watermark seen for topic/partition
// (-1 before the first fetch answered).
func (cs *Consumer) HighWatermark(topic string, partition int32) (int64, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	f := cs.fetchers[partKey{topic, partition}]
	if f == nil {
		return 0, ErrNotAssigned
	}
	return f.hwm, nil
}

// Commit stores the position of every assigned partition under the
// consumer's Name: a restarted consumer using StartCommitted resumes after
// the records Poll has returned.
func (cs *Consumer) Commit(ctx context.Context) error {
	if cs.cfg.Name == "" {
		return ErrNoConsumerName
	}
	cs.mu.Lock()
	offsets := make([]wire.OffsetCommit, 0, len(cs.fetchers))
	for _, f := range cs.fetchers {
		offsets = append(offsets, wire.OffsetCommit{Topic: f.topic, TopicID: f.topicID, Partition: f.partition, Offset: f.position})
	}
	cs.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	return cs.c.CommitOffsets(ctx, cs.cfg.Name, offsets)
}

// Close stops every fetcher and waits for them.
func (cs *Consumer) Close() error {
	cs.mu.Lock()
	cs.closed = true
	for k, f := range cs.fetchers {
		f.cancel()
		delete(cs.fetchers, k)
	}
	cs.queue = nil
	cs.mu.Unlock()
	cs.wg.Wait()
	return nil
}

// release returns a result's prefetch token.
func (f *fetcher) release() {
	select {
	case <-f.tokens:
	default:
	}
}

// run is the partition's fetch loop: fetch from pos, decode, queue, repeat.
func (f *fetcher) run(pos int64) {
	defer f.cs.wg.Done()
	defer f.cancel()
	cfg := &f.cs.cfg
	maxBytes := cfg.FetchMaxBytes
	failures := 0
	var req wire.FetchRequest
	var it batch.Records
	for f.ctx.Err() == nil { // bounded by the context: one fetch per turn
		select {
		case f.tokens <- struct{}{}:
		case <-f.ctx.Done():
			return
		}
		req = wire.FetchRequest{FetchOffset: pos, MaxBytes: uint32(maxBytes), MinBytes: uint32(cfg.FetchMinBytes),
			MaxWaitMs: uint32(cfg.FetchMaxWait.Milliseconds()), Rack: f.rack()}
		var resp wire.FetchResponse
		if id := f.readReplicaOf(); id > 0 {
			if err := f.fetchFromReplica(id, &req, &resp); err != nil {
				if f.ctx.Err() != nil {
					return
				}
				// Back to the primary at once, whatever the follower
				// said (consumer_follow.go), by its hint when it gave one.
				f.replicaFailed(err)
				f.setReadReplica(0)
				f.replicaFailedAt = time.Now()
				f.release()
				continue
			}
		} else {
			build := func(ref wire.PartitionRef) wire.Request { req.PartitionRef = ref; return &req }
			err := f.cs.c.doPartition(f.ctx, f.topic, f.partition, build, &resp, partitionOpts{ownFrame: true, topicID: f.topicID})
			if f.ctx.Err() != nil {
				return
			}
			if err == nil && resp.PreferredReadReplica > 0 {
				f.setReadReplica(resp.PreferredReadReplica)
				f.release() // no records: the primary sent this partition to its rack's replica
				continue
			}
			if err != nil {
				if !f.handleErr(err, &pos, &failures) {
					return
				}
				continue
			}
		}
		failures = 0
		recs, next, whole, derr := decodeRecords(&it, f.topic, f.partition, resp.Records, pos)
		if derr != nil && len(recs) == 0 {
			// A corrupt batch at pos: report it, then fetch it again.
			f.cs.push(&fetchResult{f: f, err: derr, next: pos})
			failures++
			sleepCtx(f.ctx, backoff(f.cs.c.cfg.RetryBackoffMin, f.cs.c.cfg.RetryBackoffMax, failures))
			continue
		}
		if whole == 0 && len(resp.Records) > 0 {
			maxBytes = min(2*maxBytes, wire.RecordsBytesMax) // a batch larger than the bound: ask for more
		}
		if len(recs) == 0 && next == pos {
			f.release()
			f.cs.mu.Lock()
			f.hwm = resp.HighWatermark
			f.cs.mu.Unlock()
			continue
		}
		f.cs.push(&fetchResult{f: f, recs: recs, next: next, hwm: resp.HighWatermark})
		pos = next
	}
}

// handleErr handles a primary's fetch error: a reset position (out of
// range, reset silently as OutOfRange says) or a recreated topic
// (reported: the history read has ended) moves *pos; others are reported
// and retried after a backoff. It reports false when the fetcher should
// stop (its context ended).
func (f *fetcher) handleErr(err error, pos *int64, failures *int) bool {
	next, rerr := f.recoverFrom(err, *pos)
	if rerr == nil {
		if errors.Is(err, ErrTopicRecreated) {
			f.cs.push(&fetchResult{f: f, err: err, next: next})
		} else {
			f.release()
		}
		*pos = next
		return f.ctx.Err() == nil
	}
	f.cs.push(&fetchResult{f: f, err: err, next: *pos})
	*failures++
	sleepCtx(f.ctx, backoff(f.cs.c.cfg.RetryBackoffMin, f.cs.c.cfg.RetryBackoffMax, *failures))
	return f.ctx.Err() == nil
}

// recoverFrom handles a fetch error: a position out of range or a
// recreated topic restarts per OutOfRange (with the new topic id); it
// returns the new position, or an error when the fetch should just be
// retried after a backoff.
func (f *fetcher) recoverFrom(err error, pos int64) (int64, error) {
	if !errors.Is(err, wire.ErrOffsetOutOfRange) && !errors.Is(err, ErrTopicRecreated) {
		return pos, err
	}
	ctx, cancel := context.WithTimeout(f.ctx, f.cs.c.cfg.RequestTimeout)
	defer cancel()
	if errors.Is(err, ErrTopicRecreated) {
		if rerr := f.cs.c.refreshMetadata(ctx); rerr != nil {
			return pos, rerr
		}
	}
	off, id, rerr := f.cs.resolve(ctx, f.topic, f.partition, f.cs.cfg.OutOfRange)
	if rerr != nil {
		return pos, rerr
	}
	f.topicID = id
	return off, nil
}

// decodeRecords turns a fetch's records into Records at or after pos.
// The last batch may be cut short (ignored) and the first may start before
// pos (its earlier records skipped). It returns the position after the
// last whole batch and how many whole batches there were. Records alias
// the fetch buffer, or a fresh decompression buffer per compressed batch.
func decodeRecords(it *batch.Records, topic string, partition int32, data []byte, pos int64) (recs []Record, next int64, whole int, err error) {
	next = pos
	for { // bounded: each turn consumes one whole batch of data
		b, rest, cerr := batch.Cut(data)
		if cerr != nil {
			return recs, next, whole, fmt.Errorf("client: fetch of %s/%d at %d: %w", topic, partition, next, cerr)
		}
		if b == nil {
			return recs, next, whole, nil
		}
		data = rest
		whole++
		h, herr := batch.ReadHeader(b)
		if herr != nil {
			return recs, next, whole, fmt.Errorf("client: fetch of %s/%d at %d: %w", topic, partition, next, herr)
		}
		if h.LastOffset() < next {
			continue
		}
		if h.IsControl() {
			next = h.LastOffset() + 1
			continue
		}
		iter := it
		if h.Codec() != batch.CodecNone {
			iter = new(batch.Records) // its buffer outlives this call
		}
		if err := iter.Reset(b); err != nil {
			return recs, next, whole, fmt.Errorf("client: fetch of %s/%d at %d: %w", topic, partition, next, err)
		}
		for iter.Next() {
			r := iter.Record()
			if r.Offset < next {
				continue
			}
			rec := Record{Topic: topic, Partition: partition, Offset: r.Offset, Timestamp: time.UnixMilli(r.Timestamp),
				Key: r.Key, Value: r.Value}
			if len(r.Headers) > 0 {
				rec.Headers = append([]Header(nil), r.Headers...)
			}
			recs = append(recs, rec)
		}
		if err := iter.Err(); err != nil {
			return recs, next, whole, fmt.Errorf("client: fetch of %s/%d at %d: %w", topic, partition, next, err)
		}
		next = h.LastOffset() + 1
	}
}
