package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// e2eMessage is message i of a run: an 8-byte big-endian key holding i
// and a value of 8..39 bytes derived from i, so that every byte read back
// can be checked.
func e2eMessage(i int) (key, value []byte) {
	key = binary.BigEndian.AppendUint64(nil, uint64(i))
	x := uint64(i)*0x9e3779b97f4a7c15 + 1
	n := 8 + int(x>>59)
	value = make([]byte, n)
	for j := range value {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		value[j] = byte(x)
	}
	return key, value
}

// TestE2EMillionMessages produces 1,000,000 small messages over eight
// partitions through the SDK and reads them all back, checking every key
// and value byte and the order within each partition. -short does 100,000.
func TestE2EMillionMessages(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	const partitions = 8
	s := startServer(t, serverOpts{})
	c := s.dial(client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "bulk", Partitions: partitions}); err != nil {
		t.Fatal(err)
	}

	p, err := c.NewProducer(ctx, client.ProducerConfig{Partitioner: client.ManualPartitioner(), BatchBytesMax: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		failed  error
		lastOff = make([]int64, partitions)
	)
	for i := range lastOff {
		lastOff[i] = -1
	}
	start := time.Now()
	for i := 0; i < total; i++ {
		k, v := e2eMessage(i)
		rec := client.Record{Topic: "bulk", Partition: int32(i % partitions), Key: k, Value: v}
		err := p.ProduceAsync(ctx, rec, func(pr client.Produced, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && failed == nil:
				failed = err
			case err == nil && pr.Offset <= lastOff[pr.Partition]:
				failed = fmt.Errorf("partition %d acknowledged offset %d after %d", pr.Partition, pr.Offset, lastOff[pr.Partition])
			case err == nil:
				lastOff[pr.Partition] = pr.Offset
			}
		})
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	produceTook := time.Since(start)
	if failed != nil {
		t.Fatal(failed)
	}

	cs, err := c.NewConsumer(client.ConsumerConfig{FetchMaxBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	start = time.Now()
	if err := cs.Assign(ctx, "bulk", nil, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	next := make([]int, partitions) // the next message index expected per partition
	for i := range next {
		next[i] = i
	}
	for got := 0; got < total; {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d messages: %v", got, err)
		}
		for _, r := range recs {
			i := next[r.Partition]
			if i >= total {
				t.Fatalf("partition %d: more messages than produced (offset %d)", r.Partition, r.Offset)
			}
			k, v := e2eMessage(i)
			if !bytes.Equal(r.Key, k) || !bytes.Equal(r.Value, v) {
				t.Fatalf("partition %d offset %d: key %x value %x, want message %d (key %x value %x)", r.Partition, r.Offset, r.Key, r.Value, i, k, v)
			}
			next[r.Partition] += partitions
			got++
		}
	}
	consumeTook := time.Since(start)
	t.Logf("%d messages over %d partitions (provisional, shared machine): produce %.0f msg/s (%v), consume %.0f msg/s (%v)",
		total, partitions, float64(total)/produceTook.Seconds(), produceTook.Round(time.Millisecond),
		float64(total)/consumeTook.Seconds(), consumeTook.Round(time.Millisecond))
}

// ackLog records what a producer had acknowledged. mu guards the fields.
type ackLog struct {
	mu     sync.Mutex
	offset map[int]int64 // message index -> offset acknowledged
	errs   []error
}

func (a *ackLog) snapshot() map[int]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[int]int64, len(a.offset))
	for k, v := range a.offset {
		out[k] = v
	}
	return out
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.offset)
}

// TestE2EKillDuringProduce is kill -9 under a produce load with
// fsync=always, three times. An idempotent producer keeps sending while
// the broker is killed and restarted on the same address; it retries what
// was in flight. After each restart every message acknowledged before the
// kill is at the offset it was acknowledged with; at the end every message
// of the run is in its partition exactly once, in the order produced.
func TestE2EKillDuringProduce(t *testing.T) {
	const (
		partitions = 4
		total      = 300_000
	)
	killAt := []int{total / 5, total * 9 / 20, total * 7 / 10} // acknowledgements before each kill
	// The producer may run ahead of each kill point by a margin only, and
	// past it once that kill's recovery has been checked: a producer that
	// resumes quickly after a restart would otherwise send everything
	// while the test reads the log back, leaving nothing to kill under.
	const margin = total / 10
	gates := make([]chan struct{}, len(killAt))
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	s := startServer(t, serverOpts{config: "[storage]\nfsync = \"always\"\n"})
	c := s.dial(client.Config{RetryAttemptsMax: 1000, ReconnectBackoffMax: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "durable", Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: time.Millisecond,
		BatchBytesMax: 8 << 10, BufferedBytesMax: 1 << 20, DeliveryTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	acks := &ackLog{offset: map[int]int64{}}
	produceDone := make(chan error, 1)
	go func() {
		gate := 0
		for i := 0; i < total; i++ {
			if gate < len(killAt) && i == killAt[gate]+margin {
				select {
				case <-gates[gate]:
				case <-ctx.Done():
					produceDone <- ctx.Err()
					return
				}
				gate++
			}
			k, v := e2eMessage(i)
			i := i
			err := p.ProduceAsync(ctx, client.Record{Topic: "durable", Partition: int32(i % partitions), Key: k, Value: v},
				func(pr client.Produced, err error) {
					acks.mu.Lock()
					defer acks.mu.Unlock()
					if err != nil {
						acks.errs = append(acks.errs, fmt.Errorf("message %d: %w", i, err))
						return
					}
					acks.offset[i] = pr.Offset
				})
			if err != nil {
				produceDone <- err
				return
			}
		}
		produceDone <- p.Flush(ctx)
	}()

	for k, n := range killAt {
		eventually(t, 2*time.Minute, fmt.Sprintf("%d acknowledgements", n), func() bool { return acks.count() >= n })
		s.kill()
		before := acks.snapshot()
		t.Logf("killed the broker with %d of %d messages acknowledged", len(before), total)
		if len(before) >= n+margin {
			t.Fatalf("all %d messages released before the kill were acknowledged: no load to kill under", n+margin)
		}
		s = s.restart()
		t.Logf("the restart after kill -9 served clients after %v (provisional)", s.ready.Round(time.Millisecond))
		for _, line := range s.stderr.lines(`msg="partition opened"`, "durable") {
			t.Log(line)
		}
		checkAcked(t, s, "durable", partitions, before)
		close(gates[k])
	}

	if err := <-produceDone; err != nil {
		t.Fatalf("producing: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	after := acks.snapshot()
	if len(acks.errs) > 0 || len(after) != total {
		t.Fatalf("%d of %d acknowledged; %d failed, first: %v", len(after), total, len(acks.errs), acks.errs)
	}

	if seen := checkAcked(t, s, "durable", partitions, after); len(seen) != total {
		t.Fatalf("%d distinct messages read back, %d produced", len(seen), total)
	}
}

// checkAcked reads topic back on a fresh client and checks that the
// messages (e2eMessage, index = partition mod partitions) are whole, each
// at most once, in index order per partition, and that every message in
// acked is at its acknowledged offset. It returns every message's offset.
func checkAcked(t *testing.T, s *server, topic string, partitions int, acked map[int]int64) map[int]int64 {
	t.Helper()
	seen := map[int]int64{}
	for part, recs := range readAll(t, s.dial(client.Config{}), topic, partitions) {
		prev := -1
		for _, r := range recs {
			i := int(binary.BigEndian.Uint64(r.Key))
			if _, v := e2eMessage(i); !bytes.Equal(r.Value, v) || i%partitions != part {
				t.Fatalf("partition %d offset %d: message %d with a wrong value or partition", part, r.Offset, i)
			}
			if off, dup := seen[i]; dup {
				t.Fatalf("message %d at offsets %d and %d of partition %d", i, off, r.Offset, part)
			}
			if i < prev {
				t.Fatalf("partition %d: message %d at offset %d after message %d", part, i, r.Offset, prev)
			}
			seen[i], prev = r.Offset, i
		}
	}
	for i, off := range acked {
		if got, ok := seen[i]; !ok || got != off {
			t.Fatalf("message %d was acknowledged at offset %d; read back at %d (present %v)", i, off, got, ok)
		}
	}
	return seen
}

// readAll reads every partition of topic from the start to its high
// watermark now, data records only.
func readAll(t *testing.T, c *client.Client, topic string, partitions int) [][]client.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends := make([]int64, partitions)
	for p := range ends {
		lo, err := c.ListOffsets(ctx, topic, int32(p), wire.TimestampLatest)
		if err != nil {
			t.Fatal(err)
		}
		ends[p] = lo.Offset
	}
	cs, err := c.NewConsumer(client.ConsumerConfig{FetchMaxBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Assign(ctx, topic, nil, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	out := make([][]client.Record, partitions)
	done := func() bool {
		for p := range ends {
			if pos, _ := cs.Position(topic, int32(p)); pos < ends[p] {
				return false
			}
		}
		return true
	}
	for !done() {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatalf("reading %s back: %v", topic, err)
		}
		for _, r := range recs {
			out[r.Partition] = append(out[r.Partition], r)
		}
	}
	return out
}
