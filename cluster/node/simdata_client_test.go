package node

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// dsClient is an idempotent producer: one batch in flight, retried with
// the same sequence (on another node after an error or a silence) until
// it is acknowledged, as the client SDK does.
type dsClient struct {
	s     *dsSim
	id    int
	pid   int64
	rng   *rand.Rand
	seq   []int32 // next sequence per partition
	guess []int32 // the node believed to lead each partition
	cur   *dsBatch
	ops   uint64
}

// dsBatch is one batch and its attempts.
type dsBatch struct {
	p       int32
	seq, n  int32
	data    []byte
	attempt int
}

// at schedules one of the client's own events after d; the order key is
// the client and its operation count.
func (c *dsClient) at(d time.Duration, fn func()) {
	c.ops++
	c.s.pushKeyed(d, 1<<62|uint64(c.id), c.ops, fn)
}

func (s *dsSim) pushKeyed(d time.Duration, k1, k2 uint64, fn func()) {
	heap.Push(&s.q, &dsEvent{at: s.nowNs + int64(d), k1: k1, k2: k2, fn: fn})
}

// randomReplica is a node of p's replica set.
func (s *dsSim) randomReplica(rng *rand.Rand, p int32) int32 {
	reps := s.topic.Replicas[p]
	return int32(reps[rng.IntN(len(reps))])
}

func (c *dsClient) next() {
	s := c.s
	if c.cur != nil || !s.producing || s.err != nil {
		return
	}
	p := int32(c.rng.IntN(s.p.parts))
	n := int32(1 + c.rng.IntN(3))
	b, err := batch.NewBuilder(batch.Options{Idempotent: true, ProducerID: c.pid, BaseSequence: c.seq[p]})
	if err != nil {
		s.fail("builder: %v", err)
		return
	}
	for i := int32(0); i < n; i++ {
		if err := b.AppendKV(s.now().Milliseconds(), nil, fmt.Appendf(nil, "c%d-p%d-s%d", c.id, p, c.seq[p]+i)); err != nil {
			s.fail("append: %v", err)
			return
		}
	}
	data, err := b.Build()
	if err != nil {
		s.fail("build: %v", err)
		return
	}
	c.cur = &dsBatch{p: p, seq: c.seq[p], n: n, data: data}
	c.try()
}

// try sends the current batch's next attempt to the node the client
// believes leads its partition, through that node's service as a front
// end calls it (from the connection's shard, 0).
func (c *dsClient) try() {
	s, b := c.s, c.cur
	b.attempt++
	a := b.attempt
	nd := s.node(c.guess[b.p])
	s.stats.Produced++
	if a > 1 {
		s.stats.Retries++
	}
	if !nd.up {
		c.guess[b.p] = s.randomReplica(c.rng, b.p) // connection refused
		c.at(time.Duration(5+c.rng.IntN(20))*time.Millisecond, c.retry(b, a))
		return
	}
	sh := nd.group.Shard(0)
	req := &service.ProduceRequest{PartitionRef: service.PartitionRef{Topic: s.topic.Name, Partition: b.p, TopicID: s.topic.ID,
		Generation: service.GenerationUnknown}, Acks: service.AcksQuorum, Timeout: 2 * time.Second, Records: b.data}
	if err := sh.Post(func() {
		nd.svc.Produce(sh, req, func(res service.ProduceResult, err error) { c.answer(b, a, res, err) })
	}); err != nil {
		s.fail("posting a produce: %v", err)
	}
	c.at(dsAttemptMax, c.retry(b, a)) // silence: the node died or the answer was lost
}

// retry returns the retry of attempt a of b, if that attempt is still the
// current one when it runs.
func (c *dsClient) retry(b *dsBatch, a int) func() {
	return func() {
		if c.cur == b && b.attempt == a {
			if c.rng.IntN(2) == 0 {
				c.guess[b.p] = c.s.randomReplica(c.rng, b.p)
			}
			c.try()
		}
	}
}

// answer handles attempt a of b's answer. An acknowledgement counts
// whichever attempt it answers (a late one included); an error matters
// only for the current attempt.
func (c *dsClient) answer(b *dsBatch, a int, res service.ProduceResult, err error) {
	s := c.s
	if err == nil {
		s.acks.ack(c.pid, b, res.BaseOffset)
		if c.cur == b {
			c.cur = nil
			c.seq[b.p] += b.n
			c.at(time.Duration(1+c.rng.IntN(s.p.thinkMaxMs+1))*time.Millisecond, c.next) // at least a round trip
		}
		return
	}
	if c.cur != b || b.attempt != a {
		return
	}
	for _, k := range []error{partition.ErrOutOfOrderSequence, partition.ErrUnknownProducer, partition.ErrDuplicateSequence,
		partition.ErrCorruptBatch, partition.ErrInvalidBatch} {
		if errors.Is(err, k) {
			s.lost("client %d: batch p%d seq %d refused: %v", c.id, b.p, b.seq, err)
			if s.lossy {
				// The partition lost the producer's state: start over
				// as a new producer.
				c.pid += 100
				clear(c.seq)
				c.cur = nil
				c.at(time.Millisecond, c.next)
			}
			return
		}
	}
	var se *service.Error
	delay := time.Duration(5+c.rng.IntN(30)) * time.Millisecond
	if errors.As(err, &se) {
		if se.Hint != nil && se.Hint.NodeID > 0 {
			c.guess[b.p] = se.Hint.NodeID
		} else {
			c.guess[b.p] = s.randomReplica(c.rng, b.p)
		}
		if se.RetryAfterMs > 0 {
			delay = time.Duration(se.RetryAfterMs) * time.Millisecond
		}
	}
	c.at(delay, c.retry(b, a))
}

// dsAckKey names one acknowledged batch.
type dsAckKey struct {
	p   int32
	pid int64
	seq int32
}

// dsAcks is every acknowledgement clients received.
type dsAcks struct {
	s  *dsSim
	at map[dsAckKey]int64 // base offset
	n  map[dsAckKey]int32 // records
}

func newDsAcks(s *dsSim) *dsAcks {
	return &dsAcks{s: s, at: map[dsAckKey]int64{}, n: map[dsAckKey]int32{}}
}

// ack records that pid's batch b was acknowledged at base; two
// acknowledgements of one batch at different offsets mean it was written
// twice.
func (a *dsAcks) ack(pid int64, b *dsBatch, base int64) {
	k := dsAckKey{p: b.p, pid: pid, seq: b.seq}
	if prev, ok := a.at[k]; ok {
		if prev != base {
			a.s.fail("partition %d: producer %d's batch seq %d acknowledged at offsets %d and %d", b.p, pid, b.seq, prev, base)
		}
		return
	}
	a.at[k], a.n[k] = base, b.n
	a.s.stats.Acked++
	a.s.tracef("ack p%d pid %d seq %d at %d", b.p, pid, b.seq, base)
}

// dsSeen is a committed batch a reader read.
type dsSeen struct {
	pid    int64
	seq, n int32
	crc    uint32
	last   int64
}

// dsReader consumes one partition from its primary through the service,
// checking as it goes: offsets without holes, committed batches that
// never change once read, and every producer's sequences in order with
// neither a gap nor a repeat.
type dsReader struct {
	s     *dsSim
	p     int32
	rng   *rand.Rand
	pos   int64
	guess int32
	seen  map[int64]dsSeen
	next  map[int64]int32 // next sequence per producer
	busy  int             // the attempt in flight, 0 when none
	tries int
	ops   uint64
}

func (r *dsReader) at(d time.Duration, fn func()) {
	r.ops++
	r.s.pushKeyed(d, 1<<61|uint64(r.p), r.ops, fn)
}

func (r *dsReader) poll() {
	s := r.s
	if s.err != nil || r.busy != 0 {
		return
	}
	r.tries++
	a := r.tries
	nd := s.node(r.guess)
	if !nd.up {
		r.guess = s.randomReplica(r.rng, r.p)
		r.at(10*time.Millisecond, r.poll)
		return
	}
	r.busy = a
	sh := nd.group.Shard(0)
	req := &service.FetchRequest{PartitionRef: service.PartitionRef{Topic: s.topic.Name, Partition: r.p, TopicID: s.topic.ID,
		Generation: service.GenerationUnknown}, Offset: r.pos, MaxBytes: 64 << 10}
	if r.rng.IntN(2) == 0 {
		// A long poll: parked on the replica until a batch commits or
		// the wait ends.
		req.MinBytes, req.MaxWait = 1, time.Duration(10+r.rng.IntN(500))*time.Millisecond
	}
	if err := sh.Post(func() {
		nd.svc.Fetch(sh, req, func(res service.FetchResult, err error) { r.answer(a, res, err) })
	}); err != nil {
		s.fail("posting a fetch: %v", err)
	}
	r.at(dsAttemptMax, func() {
		if r.busy == a {
			r.busy = 0
			r.guess = s.randomReplica(r.rng, r.p)
			r.poll()
		}
	})
}

func (r *dsReader) answer(a int, res service.FetchResult, err error) {
	s := r.s
	var data []byte
	if err == nil {
		data, err = res.Records.AppendTo(nil)
		segment.ReleaseSpans(res.Records.Spans)
	}
	if r.busy != a {
		return
	}
	r.busy = 0
	delay := time.Duration(1+r.rng.IntN(40)) * time.Millisecond
	if err != nil {
		var se *service.Error
		if errors.As(err, &se) && se.Hint != nil && se.Hint.NodeID > 0 {
			r.guess = se.Hint.NodeID
		} else {
			r.guess = s.randomReplica(r.rng, r.p)
		}
		r.at(delay, r.poll)
		return
	}
	s.stats.Fetches++
	r.check(data, res.HighWatermark)
	r.at(delay, r.poll)
}

// lost fails the run, or, in a lossy run, counts the loss and starts
// reading the partition over from its start.
func (r *dsReader) lost(format string, args ...any) {
	r.s.lost(format, args...)
	r.pos = 0
	clear(r.seen)
	clear(r.next)
}

// check reads the batches of one fetch answer.
func (r *dsReader) check(data []byte, hw int64) {
	s := r.s
	for len(data) > 0 && s.err == nil {
		h, err := batch.ReadHeader(data)
		if err != nil || h.Size() > len(data) {
			s.fail("partition %d: a fetch returned a broken batch at %d: %v", r.p, r.pos, err)
			return
		}
		data = data[h.Size():]
		if h.LastOffset() < r.pos {
			continue
		}
		if h.BaseOffset != r.pos {
			r.lost("partition %d: read batch %d..%d where offset %d was expected", r.p, h.BaseOffset, h.LastOffset(), r.pos)
			return
		}
		if h.LastOffset() >= hw {
			r.lost("partition %d: read offset %d at or above the high watermark %d", r.p, h.LastOffset(), hw)
			return
		}
		got := dsSeen{pid: h.ProducerID, seq: h.BaseSequence, n: h.RecordCount, crc: h.CRC, last: h.LastOffset()}
		if h.IsControl() {
			got.pid, got.seq = -1, -1
		}
		if prev, ok := r.seen[h.BaseOffset]; ok && prev != got {
			r.lost("partition %d: the committed batch at %d changed: %+v, then %+v", r.p, h.BaseOffset, prev, got)
			return
		}
		r.seen[h.BaseOffset] = got
		r.pos = h.LastOffset() + 1
		if got.pid < 0 {
			continue
		}
		if want := r.next[got.pid]; got.seq != want {
			r.lost("partition %d: producer %d's sequence %d at offset %d where %d was next: a batch repeated or lost", r.p, got.pid, got.seq, h.BaseOffset, want)
			return
		}
		r.next[got.pid] = got.seq + got.n
		s.stats.RecordsChecked += int(got.n)
	}
}

// checkAcked holds every acknowledged batch in what the readers read, at
// its acknowledged offset.
func (s *dsSim) checkAcked() {
	for k, base := range s.acks.at {
		seen, ok := s.readers[k.p].seen[base]
		if !ok || seen.pid != k.pid || seen.seq != k.seq || seen.n != s.acks.n[k] {
			s.fail("partition %d: producer %d's batch seq %d, acknowledged at %d, is not there (read %+v, found %v)", k.p, k.pid, k.seq, base, seen, ok)
			return
		}
	}
}

// checkReplicas holds every replica's log identical to the primary's
// below its high watermark.
func (s *dsSim) checkReplicas(p int32, prim *dsNode) {
	pr := prim.replica(p)
	want, ok := dsReadLog(pr.Log(), 0, pr.CommitEnd()-1)
	if !ok {
		s.fail("partition %d: cannot read the primary's log below %d", p, pr.CommitEnd())
		return
	}
	if err := dsCheckDense(pr.Log(), pr.CommitEnd()); err != nil {
		s.fail("partition %d: primary %d's offsets: %v", p, prim.id, err)
		return
	}
	for _, id := range s.topic.Replicas[p] {
		r := s.node(int32(id)).replica(p)
		got, ok := dsReadLog(r.Log(), 0, r.CommitEnd()-1)
		if !ok || !bytes.HasPrefix(want, got) {
			s.fail("partition %d: node %d's log below its high watermark %d differs from primary %d's", p, id, r.CommitEnd(), prim.id)
			return
		}
	}
}
