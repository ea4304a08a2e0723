package clienttest

import (
	"fmt"
	"strconv"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// checkRoute applies the broker's checks on a data request's partition
// reference, in the protocol's order, for a request received by node.
// REQUIRES: c.mu held.
func (c *Cluster) checkRoute(node int32, ref *wire.PartitionRef) (*partition, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	t := c.topics[ref.Topic]
	if t == nil || (!ref.TopicID.IsZero() && ref.TopicID != t.id) {
		return nil, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q with id %s does not exist", ref.Topic, ref.TopicID)
	}
	if n := c.node(node); n.cut != nil {
		return nil, c.cutOffRoute(n, ref)
	}
	if int(ref.Partition) >= len(t.parts) {
		return nil, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", ref.Topic, len(t.parts), ref.Partition)
	}
	p := t.parts[ref.Partition]
	hint := &wire.Hint{NodeID: p.primary, Address: c.node(p.primary).addr, Generation: p.gen}
	if p.primary != node || ref.Generation > p.gen {
		return nil, &wire.ErrorResponse{Err: wire.ErrNotPrimary, Hint: hint,
			Message: fmt.Sprintf("node %d is not the primary of %s/%d", node, ref.Topic, ref.Partition)}
	}
	if ref.Generation != wire.GenerationUnknown && ref.Generation < p.gen {
		return nil, &wire.ErrorResponse{Err: wire.ErrStaleGeneration, Hint: hint,
			Message: fmt.Sprintf("generation %d of %s/%d is older than %d", ref.Generation, ref.Topic, ref.Partition, p.gen)}
	}
	return p, nil
}

// produce appends one batch. REQUIRES: c.mu held.
func (c *Cluster) produce(node int32, r *wire.ProduceRequest) (wire.Response, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	p, err := c.checkRoute(node, &r.PartitionRef)
	if err != nil {
		return nil, err
	}
	if len(r.Records) > c.opts.BatchBytesMax {
		return nil, wire.Errorf(wire.ErrMessageTooLarge, "batch of %d bytes exceeds the maximum %d", len(r.Records), c.opts.BatchBytesMax)
	}
	var h batch.Header
	if c.opts.HeaderChecksOnly {
		h, err = batch.Validate(r.Records)
	} else {
		h, err = batch.ValidateRecords(r.Records)
	}
	if err != nil {
		return nil, wire.Errorf(wire.ErrCorruptMessage, "%v", err)
	}
	dup, err := p.checkIdempotence(&h)
	if err != nil {
		return nil, err
	}
	base := dup
	if dup < 0 {
		base = p.append(r.Records, &h, c.opts.RetainBytesMax, c.opts.DiscardRecords)
	}
	return &wire.ProduceResponse{BaseOffset: base, LogAppendTimeMs: -1, LogStartOffset: p.logStart}, nil
}

// fetchLocked reads from the requested offset: the first batch holding an
// offset at or after it (whole, even over max_bytes), more whole batches
// while they fit, and then a cut prefix of the next one up to max_bytes, as
// a broker reading a segment range would send. It also returns the
// partition, to wait on. REQUIRES: c.mu held.
func (c *Cluster) fetchLocked(node int32, r *wire.FetchRequest) (*wire.FetchResponse, *partition, error) {
	if err := r.Validate(); err != nil {
		return nil, nil, err
	}
	p, err := c.checkRoute(node, &r.PartitionRef)
	if err != nil {
		return nil, nil, err
	}
	if r.FetchOffset < p.logStart || r.FetchOffset > p.next {
		return nil, nil, wire.Errorf(wire.ErrOffsetOutOfRange, "offset %d is outside [%d, %d] of %s/%d",
			r.FetchOffset, p.logStart, p.next, r.Topic, r.Partition)
	}
	maxBytes := int(min(r.MaxBytes, wire.RecordsBytesMax))
	var recs []byte
	for i := p.find(r.FetchOffset); i < len(p.batches); i++ {
		d := p.batches[i].data
		if d == nil {
			continue // discarded
		}
		if len(recs) > 0 && len(recs)+len(d) > maxBytes {
			if room := maxBytes - len(recs); room > 0 {
				recs = append(recs, d[:room]...)
			}
			break
		}
		recs = append(recs, d...)
	}
	return &wire.FetchResponse{HighWatermark: p.next, LogStartOffset: p.logStart, Records: recs}, p, nil
}

// serveFetch answers a fetch at once when it has min_bytes or an error,
// and otherwise from a goroutine once data arrives or max_wait_ms passes.
func (c *Cluster) serveFetch(sc *serverConn, h wire.RequestHeader, r *wire.FetchRequest, flush bool) {
	c.mu.Lock()
	resp, p, err := c.fetchLocked(sc.node, r)
	var wake chan struct{}
	if p != nil {
		wake = p.wake
	}
	c.mu.Unlock()
	if err != nil || len(resp.Records) >= int(r.MinBytes) || r.MaxWaitMs == 0 {
		sc.respond(h, resp, err, flush)
		return
	}
	req := *r // the frame buffer is reused once we return
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		deadline := time.NewTimer(time.Duration(min(req.MaxWaitMs, wire.FetchWaitMsMax)) * time.Millisecond)
		defer deadline.Stop()
		for { // bounded by the deadline
			timedOut := false
			select {
			case <-wake:
			case <-deadline.C:
				timedOut = true
			case <-sc.done:
				return
			}
			c.mu.Lock()
			resp, p, err := c.fetchLocked(sc.node, &req)
			if p != nil {
				wake = p.wake
			}
			c.mu.Unlock()
			if err != nil || timedOut || len(resp.Records) >= int(req.MinBytes) {
				sc.respond(h, resp, err, true)
				return
			}
		}
	}()
}

// listOffsets resolves earliest, latest or a timestamp. REQUIRES: c.mu held.
func (c *Cluster) listOffsets(node int32, r *wire.ListOffsetsRequest) (wire.Response, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	p, err := c.checkRoute(node, &r.PartitionRef)
	if err != nil {
		return nil, err
	}
	resp := &wire.ListOffsetsResponse{Timestamp: -1, LogStartOffset: p.logStart, HighWatermark: p.next}
	switch r.Timestamp {
	case wire.TimestampEarliest:
		resp.Offset = p.logStart
	case wire.TimestampLatest:
		resp.Offset = p.next
	default:
		resp.Offset = wire.OffsetNone
		for _, b := range p.batches {
			if b.maxTS >= r.Timestamp {
				resp.Offset, resp.Timestamp = b.base, b.maxTS
				break
			}
		}
	}
	return resp, nil
}

// describePartition reports one partition. REQUIRES: c.mu held.
func (c *Cluster) describePartition(node int32, r *wire.DescribePartitionRequest) (wire.Response, error) {
	p, err := c.checkRoute(node, &r.PartitionRef)
	if err != nil {
		return nil, err
	}
	resp := &wire.DescribePartitionResponse{Route: c.routeOf(p), LogStartOffset: p.logStart, HighWatermark: p.next,
		LogEndOffset: p.next, SizeBytes: p.bytes, Segments: 1}
	now := time.Now().UnixMilli()
	for _, id := range p.replicas {
		alive := c.node(id).alive
		rp := wire.ReplicaProgress{NodeID: id, LogEndOffset: p.next, InSync: alive, LastCaughtUpMs: now}
		if !alive {
			rp.LogEndOffset, rp.LastCaughtUpMs = p.logStart, -1
		}
		resp.Replicas = append(resp.Replicas, rp)
	}
	return resp, nil
}

// routeOf renders p's route. REQUIRES: c.mu held.
func (c *Cluster) routeOf(p *partition) wire.PartitionRoute {
	r := wire.PartitionRoute{Partition: p.index, PrimaryID: p.primary, Generation: p.gen,
		PreferredPrimaryID: p.replicas[0], Replicas: append([]int32(nil), p.replicas...)}
	for _, id := range p.replicas {
		if c.node(id).up() {
			r.InSync = append(r.InSync, id)
		} else {
			r.Offline = append(r.Offline, id)
		}
	}
	if r.InSync == nil {
		r.InSync = []int32{}
	}
	if r.Offline == nil {
		r.Offline = []int32{}
	}
	return r
}

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }
