package clienttest

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// topic is one topic's state. Guarded by Cluster.mu.
type topic struct {
	name    string
	id      wire.TopicID
	rf      int16
	parts   []*partition
	configs []wire.Config
}

// partition is one partition's log and routing state. Guarded by Cluster.mu.
type partition struct {
	index    int32
	primary  int32
	gen      int32
	replicas []int32
	// batches are the stored batches in offset order, stamped.
	batches []stored
	// logStart is the first offset kept; next is the log end offset, which
	// is also the high watermark (everything acknowledged is committed).
	logStart, next int64
	bytes          int64
	producers      map[int64]*producerState
	// wake is closed and replaced on every append, waking long polls.
	wake chan struct{}
}

// stored is one appended batch.
type stored struct {
	base, last int64
	maxTS      int64
	data       []byte
}

// producerWindow is how many recent batches per producer a partition
// remembers for deduplication (the protocol's).
const producerWindow = wire.IdempotentWindow

// producerState is what a partition remembers of one idempotent producer.
type producerState struct {
	epoch int16
	// recent holds the last batches' sequence ranges, oldest first.
	recent []seqRange
}

type seqRange struct {
	first, last int32
	base        int64
}

// TopicSpec describes a topic for CreateTopic.
type TopicSpec struct {
	Name       string
	Partitions int32
	// ReplicationFactor 0 means every node.
	ReplicationFactor int16
	Configs           map[string]string
}

// CreateTopic creates a topic directly (not through the protocol) and
// returns its id. Partition i's primary is node (i mod nodes)+1; its
// replicas follow it in id order.
func (c *Cluster) CreateTopic(spec TopicSpec) (wire.TopicID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := wire.CreateTopicRequest{Name: spec.Name, Partitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor}
	for k, v := range spec.Configs {
		req.Configs = append(req.Configs, wire.Config{Key: k, Value: v})
	}
	t, err := c.createTopicLocked(&req)
	if err != nil {
		return wire.TopicID{}, err
	}
	return t.id, nil
}

func (c *Cluster) createTopicLocked(req *wire.CreateTopicRequest) (*topic, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if _, ok := c.topics[req.Name]; ok {
		return nil, wire.Errorf(wire.ErrTopicAlreadyExists, "topic %q already exists", req.Name)
	}
	rf := req.ReplicationFactor
	if rf == 0 {
		rf = int16(len(c.nodes))
	}
	if int(rf) > len(c.nodes) {
		return nil, wire.Errorf(wire.ErrInvalidReplicationFactor, "replication factor %d exceeds the %d nodes of the roster", rf, len(c.nodes))
	}
	t := &topic{name: req.Name, rf: rf, configs: append([]wire.Config(nil), req.Configs...)}
	if _, err := rand.Read(t.id[:]); err != nil {
		return nil, err
	}
	sort.Slice(t.configs, func(i, j int) bool { return t.configs[i].Key < t.configs[j].Key })
	if req.ValidateOnly {
		return &topic{name: req.Name, rf: rf, parts: make([]*partition, req.Partitions)}, nil
	}
	c.addPartitionsLocked(t, req.Partitions)
	c.topics[req.Name] = t
	return t, nil
}

// addPartitionsLocked grows t to total partitions.
func (c *Cluster) addPartitionsLocked(t *topic, total int32) {
	for i := int32(len(t.parts)); i < total; i++ {
		p := &partition{index: i, gen: 1, producers: map[int64]*producerState{}, wake: make(chan struct{})}
		first := int(i) % len(c.nodes)
		for r := 0; r < int(t.rf); r++ {
			p.replicas = append(p.replicas, c.nodes[(first+r)%len(c.nodes)].id)
		}
		p.primary = p.replicas[0]
		t.parts = append(t.parts, p)
		c.newGenerationLocked(p)
	}
}

// newGenerationLocked appends the no-op control batch a new primary writes,
// when Options.NoOpBatches asks for it. REQUIRES: c.mu held.
func (c *Cluster) newGenerationLocked(p *partition) {
	if !c.opts.NoOpBatches {
		return
	}
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		panic(err)
	}
	b.AppendKV(time.Now().UnixMilli(), nil, nil)
	data, err := b.Build()
	if err != nil {
		panic(err)
	}
	// Field offsets from package batch's layout (attributes 21, crc 17).
	const offAttributes, offCRC = 21, 17
	attrs := binary.BigEndian.Uint16(data[offAttributes:]) | batch.ControlBit
	binary.BigEndian.PutUint16(data[offAttributes:], attrs)
	binary.BigEndian.PutUint32(data[offCRC:], batch.Checksum(data))
	h, err := batch.ReadHeader(data)
	if err != nil {
		panic(err)
	}
	p.append(data, &h, c.opts.RetainBytesMax, false)
}

// DeleteTopic deletes a topic directly.
func (c *Cluster) DeleteTopic(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleteTopicLocked(name)
}

func (c *Cluster) deleteTopicLocked(name string) {
	t := c.topics[name]
	if t == nil {
		return
	}
	for _, p := range t.parts {
		close(p.wake)
		p.wake = make(chan struct{})
	}
	delete(c.topics, name)
}

// part returns topic/partition. REQUIRES: c.mu held.
func (c *Cluster) part(topicName string, partition int32) (*partition, error) {
	t := c.topics[topicName]
	if t == nil || partition < 0 || int(partition) >= len(t.parts) {
		return nil, fmt.Errorf("clienttest: no partition %s/%d", topicName, partition)
	}
	return t.parts[partition], nil
}

// MovePrimary makes node the primary of topic/partition and bumps its
// generation, as an election or a leadership transfer would. Clients with
// the old route get NOT_PRIMARY (with a hint) from the old primary.
func (c *Cluster) MovePrimary(topicName string, partition, node int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.part(topicName, partition)
	if err != nil {
		return err
	}
	c.node(node)
	p.primary = node
	p.gen++
	c.newGenerationLocked(p)
	return nil
}

// BumpGeneration raises topic/partition's generation without moving its
// primary (a re-election of the same node): clients with the old
// generation get STALE_GENERATION.
func (c *Cluster) BumpGeneration(topicName string, partition int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.part(topicName, partition)
	if err != nil {
		return err
	}
	p.gen++
	c.newGenerationLocked(p)
	return nil
}

// Primary returns topic/partition's primary node and generation.
func (c *Cluster) Primary(topicName string, partition int32) (node, generation int32, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.part(topicName, partition)
	if err != nil {
		return 0, 0, err
	}
	return p.primary, p.gen, nil
}

// Batches returns copies of topic/partition's stored batches, in offset
// order, as the broker stamped them.
func (c *Cluster) Batches(topicName string, partition int32) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.part(topicName, partition)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(p.batches))
	for i, b := range p.batches {
		out[i] = append([]byte(nil), b.data...)
	}
	return out, nil
}

// Records returns copies of every stored record of topic/partition, in
// offset order, with their absolute offsets.
func (c *Cluster) Records(topicName string, partition int32) ([]batch.Record, error) {
	bs, err := c.Batches(topicName, partition)
	if err != nil {
		return nil, err
	}
	var out []batch.Record
	var it batch.Records
	for _, b := range bs {
		if err := it.Reset(b); err != nil {
			return nil, err
		}
		for it.Next() {
			out = append(out, it.Record().Clone())
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// HighWatermark returns topic/partition's high watermark (its log end).
func (c *Cluster) HighWatermark(topicName string, partition int32) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.part(topicName, partition)
	if err != nil {
		return 0, err
	}
	return p.next, nil
}

// checkIdempotence applies the broker's idempotent-producer rules
// (docs/protocol.md) to a batch with header h. It returns dup >= 0, the
// original base offset, for a retry of a recent batch (acknowledge, do not
// append), or -1 to append; or the error to answer.
func (p *partition) checkIdempotence(h *batch.Header) (dup int64, err error) {
	if !h.HasProducerID() {
		return -1, nil
	}
	ps := p.producers[h.ProducerID]
	first, last := h.BaseSequence, h.LastSequence()
	switch {
	case ps == nil:
		if first != 0 {
			return 0, wire.Errorf(wire.ErrUnknownProducerID, "producer %d has no state on this partition and base sequence %d is not 0", h.ProducerID, first)
		}
		return -1, nil
	case h.ProducerEpoch < ps.epoch:
		return 0, wire.Errorf(wire.ErrInvalidProducerEpoch, "producer %d epoch %d is older than epoch %d", h.ProducerID, h.ProducerEpoch, ps.epoch)
	case h.ProducerEpoch > ps.epoch:
		if first != 0 {
			return 0, wire.Errorf(wire.ErrOutOfOrderSequence, "producer %d new epoch %d must start at sequence 0, not %d", h.ProducerID, h.ProducerEpoch, first)
		}
		return -1, nil
	}
	for _, r := range ps.recent {
		if r.first == first && r.last == last {
			return r.base, nil
		}
	}
	lastSeq := ps.recent[len(ps.recent)-1].last
	if first == batch.IncrementSequence(lastSeq, 1) {
		return -1, nil
	}
	if first < ps.recent[0].first {
		return 0, wire.Errorf(wire.ErrDuplicateSequence, "producer %d sequence %d is older than the last %d batches", h.ProducerID, first, producerWindow)
	}
	return 0, wire.Errorf(wire.ErrOutOfOrderSequence, "producer %d base sequence %d, expected %d", h.ProducerID, first, batch.IncrementSequence(lastSeq, 1))
}

// recordProducer remembers an appended idempotent batch.
func (p *partition) recordProducer(h *batch.Header, base int64) {
	if !h.HasProducerID() {
		return
	}
	ps := p.producers[h.ProducerID]
	if ps == nil || h.ProducerEpoch > ps.epoch {
		ps = &producerState{epoch: h.ProducerEpoch}
		p.producers[h.ProducerID] = ps
	}
	ps.recent = append(ps.recent, seqRange{first: h.BaseSequence, last: h.LastSequence(), base: base})
	if len(ps.recent) > producerWindow {
		ps.recent = append(ps.recent[:0], ps.recent[1:]...)
	}
}

// append stores a validated batch and returns its base offset. With
// discard set it stores the offsets only.
func (p *partition) append(data []byte, h *batch.Header, retainBytesMax int64, discard bool) int64 {
	base := p.next
	var b []byte
	if !discard {
		b = append([]byte(nil), data...)
		batch.SetBaseOffset(b, base)
		batch.SetPartitionLeaderEpoch(b, p.gen)
	}
	p.batches = append(p.batches, stored{base: base, last: base + int64(h.LastOffsetDelta), maxTS: h.MaxTimestamp, data: b})
	p.next = base + int64(h.LastOffsetDelta) + 1
	p.bytes += int64(len(b))
	for p.bytes > retainBytesMax && len(p.batches) > 1 {
		p.bytes -= int64(len(p.batches[0].data))
		p.batches[0] = stored{}
		p.batches = p.batches[1:]
		p.logStart = p.batches[0].base
	}
	p.recordProducer(h, base)
	close(p.wake)
	p.wake = make(chan struct{})
	return base
}

// find returns the index of the first batch whose last offset is >= off.
func (p *partition) find(off int64) int {
	return sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= off })
}
