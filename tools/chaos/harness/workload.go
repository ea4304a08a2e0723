package harness

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/corestream/corestream/client"
)

// Bounds of the workload.
const (
	// failurePause is a writer's pause after a failed write, so that a
	// partition that refuses at once is not asked in a tight loop.
	failurePause = 20 * time.Millisecond
	// errorSamplesMax bounds the distinct error texts kept per writer.
	errorSamplesMax = 8
	// consumerErrorsMax bounds the poll errors a tailing consumer lists.
	consumerErrorsMax = 8
)

// part names one partition of the workload.
type part struct {
	Topic     string
	Partition int32
	Factor    int
}

func (p part) String() string { return fmt.Sprintf("%s/%d", p.Topic, p.Partition) }

// writer writes records 0, 1, 2, ... to one partition, through an
// idempotent producer shared by every writer, with at most inflight
// records unacknowledged: 1 sends each record only after the previous one
// has an outcome; more pipelines them (the producer batches and keeps
// several batches in flight, so its retries and sequence numbers are
// exercised under the faults). mu guards the fields below it.
type writer struct {
	part     part
	inflight int
	clock    func() int64 // ns since the run's start
	mu       sync.Mutex
	next     int64   // the next sequence number
	acked    []Acked // in acknowledgement order
	acks     []Ack   // times, in the same order
	fails    int
	// errs counts failures by error text (at most errorSamplesMax texts).
	errs map[string]int
	// failedNs is when the last failure was recorded.
	failedNs int64
}

// sender sends the workload's records through one client: the SDK's
// producer or a Kafka client's.
type sender interface {
	// send sends record seq of p; done is called once with the offset
	// the broker gave (-1: unknown) or the error, unless send itself
	// returns an error (the record was not taken).
	send(ctx context.Context, p part, seq int64, done func(offset int64, err error)) error
	// close waits for the records in flight (bounded by ctx), then
	// closes the client's producer.
	close(ctx context.Context) error
}

// sdkSender sends through the Go SDK's idempotent producer.
type sdkSender struct{ p *client.Producer }

func (s sdkSender) send(ctx context.Context, p part, seq int64, done func(int64, error)) error {
	return s.p.ProduceAsync(ctx, client.Record{Topic: p.Topic, Partition: p.Partition, Key: Key(seq), Value: Value(p.String(), seq)},
		func(pr client.Produced, err error) { done(pr.Offset, err) })
}

func (s sdkSender) close(ctx context.Context) error { return s.p.Close(ctx) }

// run writes until stop ends (the writes in flight finish first: each is
// bounded by the delivery timeout) or budget is spent.
func (w *writer) run(ctx, stop context.Context, p sender, budget *budget) {
	slots := make(chan struct{}, max(w.inflight, 1))
	var pending sync.WaitGroup
	defer pending.Wait()
	for stop.Err() == nil && ctx.Err() == nil && budget.take() {
		select { // a slot: at most inflight records unacknowledged
		case slots <- struct{}{}:
		case <-stop.Done():
			return
		}
		w.mu.Lock()
		seq, failed := w.next, w.failedNs
		w.next++
		w.mu.Unlock()
		if failed > 0 && w.clock()-failed < int64(failurePause) {
			select {
			case <-stop.Done():
			case <-time.After(failurePause):
			}
		}
		start := w.clock()
		pending.Add(1)
		err := p.send(ctx, w.part, seq, func(offset int64, err error) {
			w.record(ctx, seq, start, offset, err)
			<-slots
			pending.Done()
		})
		if err != nil { // not accepted: no callback comes
			w.record(ctx, seq, start, -1, err)
			<-slots
			pending.Done()
		}
	}
}

// record notes the outcome of write seq started at start.
func (w *writer) record(ctx context.Context, seq, start, offset int64, err error) {
	end := w.clock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.acked = append(w.acked, Acked{Seq: seq, Offset: offset})
		w.acks = append(w.acks, Ack{StartNs: start, AckNs: end})
		return
	}
	if ctx.Err() != nil {
		return
	}
	w.fails++
	w.failedNs = end
	text := errText(err)
	if _, ok := w.errs[text]; ok || len(w.errs) < errorSamplesMax {
		w.errs[text]++
	}
}

// errText is an error's text with its variable parts kept short.
func errText(err error) string {
	if errors.Is(err, client.ErrDeliveryTimeout) {
		return client.ErrDeliveryTimeout.Error()
	}
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// acksSince returns how many writes were acknowledged, and whether one
// that started at or after atNs has been.
func (w *writer) ackedSince(atNs int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.acks) - 1; i >= 0 && w.acks[i].AckNs >= atNs; i-- {
		if w.acks[i].StartNs >= atNs {
			return true
		}
	}
	return false
}

// snapshot copies the writer's record.
func (w *writer) snapshot() (acked []Acked, acks []Ack, sent int64, fails int, errs map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	errs = map[string]int{}
	for k, v := range w.errs {
		errs[k] = v
	}
	acks = append([]Ack(nil), w.acks...)
	sort.Slice(acks, func(i, j int) bool { return acks[i].AckNs < acks[j].AckNs })
	return append([]Acked(nil), w.acked...), acks, w.next, w.fails, errs
}

// budget counts down the writes a run may still attempt. It is safe for
// concurrent use.
type budget struct {
	clock func() int64
	mu    sync.Mutex
	left  int64
	// spentNs is when the last write was taken (0: not yet).
	spentNs int64
}

func (b *budget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left <= 0 {
		return false
	}
	b.left--
	if b.left == 0 {
		b.spentNs = b.clock()
	}
	return true
}

// spent returns when the budget ran out (0: it has not).
func (b *budget) spent() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spentNs
}

// tail is a consumer that follows a topic from its start while the
// faults run and checks, as it reads, that no record comes twice and that
// each partition's records come in sequence order. mu guards the fields
// below it.
type tail struct {
	topic string
	mu    sync.Mutex
	read  int64
	last  map[int32]int64 // partition -> last sequence read
	// dups and backwards count records read twice or after a later one
	// (an unacknowledged write may legitimately be missing, never these).
	dups, backwards int64
	errs            []string
	errCount        int
}

// polled is one record a consumer polled.
type polled struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
}

// poller reads a topic through one client: the SDK's consumer or a Kafka
// client's.
type poller interface {
	// poll returns the records of one poll, and an error when a fetch
	// failed (records may come with it).
	poll(ctx context.Context) ([]polled, error)
	close()
}

// sdkPoller polls through the Go SDK's consumer.
type sdkPoller struct{ cs *client.Consumer }

func (p sdkPoller) poll(ctx context.Context) ([]polled, error) {
	recs, err := p.cs.Poll(ctx)
	out := make([]polled, 0, len(recs))
	for _, r := range recs {
		out = append(out, polled{r.Topic, r.Partition, r.Offset, r.Key})
	}
	return out, err
}

func (p sdkPoller) close() { p.cs.Close() }

// run polls until ctx ends.
func (t *tail) run(ctx context.Context, cs poller) {
	for ctx.Err() == nil {
		recs, err := cs.poll(ctx)
		t.mu.Lock()
		if err != nil && ctx.Err() == nil {
			t.errCount++
			if len(t.errs) < consumerErrorsMax {
				t.errs = append(t.errs, errText(err))
			}
		}
		for _, r := range recs {
			t.read++
			if len(r.Key) != 8 {
				continue
			}
			seq := int64(binary.BigEndian.Uint64(r.Key))
			last, ok := t.last[r.Partition]
			switch {
			case ok && seq == last:
				t.dups++
			case ok && seq < last:
				t.backwards++
			}
			if !ok || seq > last {
				t.last[r.Partition] = seq
			}
		}
		t.mu.Unlock()
	}
}

// TailReport is what a tailing consumer saw: the records it read, how
// many came again (Dups) or after a later one of their partition
// (Backwards) — both should be 0 — and its poll errors (a partition whose
// primary is unreachable reports one per failed fetch).
type TailReport struct {
	Topic                 string
	Read, Dups, Backwards int64
	PollErrors            int
	FirstErrors           []string
}

func (t *tail) report() TailReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TailReport{t.topic, t.read, t.dups, t.backwards, t.errCount, append([]string(nil), t.errs...)}
}
