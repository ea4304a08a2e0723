package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

// smallBatches makes several batches in flight at once.
func smallBatches(cfg client.ProducerConfig) client.ProducerConfig {
	cfg.Partitioner = client.ManualPartitioner()
	cfg.BatchBytesMax = 256
	cfg.BufferedBytesMax = 1 << 20
	return cfg
}

// The broker applies a batch but the connection drops before the
// response: the producer resends the same batch (same sequence) on a new
// connection, the broker's deduplication acknowledges it with its original
// offset, and every record is stored exactly once, in order.
func TestIdempotentRetryAfterDroppedConnection(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	var produces atomic.Int32
	f := e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, CloseAfter: true,
		Match: func(clienttest.Request) bool { return produces.Add(1)%7 == 3 }})
	p := e.producer(smallBatches(client.ProducerConfig{}))
	const n = 400
	offsets := e.produceN(p, "t", 0, n)
	f.Remove()
	if f.Hits() == 0 {
		t.Fatal("no connection was dropped")
	}
	e.wantExactlyOnce("t", 0, n, offsets)
	t.Logf("%d responses lost, %d batches stored", f.Hits(), e.storedBatches("t", 0))
}

// The same faults without idempotence write duplicates: the test above
// can fail.
func TestNonIdempotentRetryDuplicates(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, CloseAfter: true, Times: 1})
	p := e.producer(smallBatches(client.ProducerConfig{DisableIdempotence: true}))
	e.produceN(p, "t", 0, 20)
	if got := len(e.values("t", 0)); got <= 20 {
		t.Fatalf("%d records stored; expected a duplicate from the retried batch", got)
	}
}

// Primary moves while batches are in flight: NOT_PRIMARY hints and
// STALE_GENERATION are retried in order, exactly once.
func TestIdempotentAcrossPrimaryMoves(t *testing.T) {
	e := newEnv(t, 3, map[string]int32{"t": 1})
	var produces atomic.Int32
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Then: func(clienttest.Request) {
		if k := produces.Add(1); k%7 == 0 {
			e.fc.MovePrimary("t", 0, int32(k%3)+1)
		} else if k%11 == 0 {
			e.fc.BumpGeneration("t", 0)
		}
	}})
	p := e.producer(smallBatches(client.ProducerConfig{}))
	const n = 300
	offsets := e.produceN(p, "t", 0, n)
	e.wantExactlyOnce("t", 0, n, offsets)
}

// UNKNOWN_PRODUCER_ID (the partition lost the producer's state) bumps the
// epoch and renumbers the batches from sequence 0.
func TestUnknownProducerIDBumpsEpoch(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(smallBatches(client.ProducerConfig{}))
	e.produceN(p, "t", 0, 10)
	_, epoch0 := p.ProducerID()
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Times: 1,
		Err: &wire.ErrorResponse{Err: wire.ErrUnknownProducerID, Message: "state expired"}})
	offsets := e.produceN(p, "t", 0, 10)
	if _, epoch1 := p.ProducerID(); epoch1 != epoch0+1 {
		t.Fatalf("epoch %d after UNKNOWN_PRODUCER_ID, want %d", epoch1, epoch0+1)
	}
	vals := e.values("t", 0)
	if len(vals) != 20 || offsets[0] != 10 || offsets[9] != 19 {
		t.Fatalf("stored %d records, offsets %v", len(vals), offsets)
	}
}

// A batch refused for good (MESSAGE_TOO_LARGE) fails its records; the
// batches behind it, refused with OUT_OF_ORDER_SEQUENCE because of the
// gap, are renumbered and written.
func TestFailedBatchClosesSequenceGap(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	hold := make(chan struct{})
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Times: 1,
		Err: &wire.ErrorResponse{Err: wire.ErrMessageTooLarge, Message: "too large"}})
	_ = hold
	p := e.producer(smallBatches(client.ProducerConfig{}))
	var failed, ok atomic.Int32
	done := make(chan struct{}, 100)
	for i := 0; i < 100; i++ {
		err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: []byte(fmt.Sprint(i))}, func(_ client.Produced, err error) {
			if errors.Is(err, wire.ErrMessageTooLarge) {
				failed.Add(1)
			} else if err == nil {
				ok.Add(1)
			} else {
				t.Errorf("unexpected error %v", err)
			}
			done <- struct{}{}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	if failed.Load() == 0 || ok.Load()+failed.Load() != 100 {
		t.Fatalf("%d failed, %d ok", failed.Load(), ok.Load())
	}
	if got := len(e.values("t", 0)); got != int(ok.Load()) {
		t.Fatalf("%d stored, %d acknowledged", got, ok.Load())
	}
}

// With StopOnFailure, a partition's written records stay a prefix of
// those produced to it: after a batch is refused for good, the batches
// behind it fail with ErrEarlierRecordFailed instead of being renumbered
// and written, and so does every record produced to it later.
func TestStopOnFailureKeepsAPrefix(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(smallBatches(client.ProducerConfig{StopOnFailure: true}))
	var mu sync.Mutex
	outcome := map[int]error{}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: []byte(fmt.Sprint(i))}, func(_ client.Produced, err error) {
				mu.Lock()
				outcome[i] = err
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 10)
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Times: 1,
		Err: &wire.ErrorResponse{Err: wire.ErrMessageTooLarge, Message: "too large"}})
	produce(10, 100)
	produce(100, 110) // after the failure: never sent
	stored := e.values("t", 0)
	if len(stored) != 10 {
		t.Fatalf("stored %q; want the 10 records before the failure", stored)
	}
	for i := 0; i < 110; i++ {
		err := outcome[i]
		switch {
		case i < 10 && err != nil:
			t.Errorf("record %d: %v; want acknowledged", i, err)
		case i == 10 && !errors.Is(err, wire.ErrMessageTooLarge):
			t.Errorf("record %d: %v; want MESSAGE_TOO_LARGE", i, err)
		case i > 10 && !errors.Is(err, wire.ErrMessageTooLarge) && !errors.Is(err, client.ErrEarlierRecordFailed):
			t.Errorf("record %d: %v; want its batch's MESSAGE_TOO_LARGE or ErrEarlierRecordFailed", i, err)
		}
	}
}

// INVALID_PRODUCER_EPOCH fences the producer for good.
func TestFencedProducer(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(client.ProducerConfig{})
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Times: 1,
		Err: &wire.ErrorResponse{Err: wire.ErrInvalidProducerEpoch, Message: "fenced"}})
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("x")}); !errors.Is(err, client.ErrProducerFenced) {
		t.Fatalf("got %v, want ErrProducerFenced", err)
	}
	if err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: []byte("y")}, nil); !errors.Is(err, client.ErrProducerFenced) {
		t.Fatalf("after fencing: %v", err)
	}
}

// Records buffered for a topic that is deleted and created again fail
// with ErrTopicRecreated instead of landing in the new topic; later
// records go to the new topic.
func TestTopicRecreatedFailsPendingRecords(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(client.ProducerConfig{})
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	e.fc.DeleteTopic("t")
	if _, err := e.fc.CreateTopic(clienttest.TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("pending")})
	if !errors.Is(err, client.ErrTopicRecreated) {
		t.Fatalf("got %v, want ErrTopicRecreated", err)
	}
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if vals := e.values("t", 0); len(vals) != 1 || vals[0] != "new" {
		t.Fatalf("new topic holds %q", vals)
	}
}

// With the buffer full (responses held), ProduceAsync blocks under its
// context; once responses flow it proceeds.
func TestBackpressureBlocksUnderContext(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	hold := make(chan struct{})
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Hold: hold})
	p := e.producer(client.ProducerConfig{BatchBytesMax: 1024, BufferedBytesMax: 4096, Linger: -1})
	val := make([]byte, 900)
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
		err = p.ProduceAsync(ctx, client.Record{Topic: "t", Value: val}, nil)
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want to block until the deadline", err)
	}
	e.fc.ClearFaults()
	close(hold)
	if err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: val}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// Close with an expired context fails what is still in flight with
// ErrClosed, runs every callback, and stops every goroutine.
func TestCloseAbortsPending(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	hold := make(chan struct{})
	defer close(hold)
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Hold: hold})
	p, err := e.c.NewProducer(e.ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	if err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: []byte("x")}, func(_ client.Produced, err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	if err := <-got; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("callback got %v, want ErrClosed", err)
	}
	if err := p.ProduceAsync(e.ctx, client.Record{Topic: "t"}, nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// Close failing what is left tells the batches that never left the client
// (ErrNeverSent: not written) from the one in flight (outcome unknown).
func TestCloseTellsUnsentBatches(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	hold := make(chan struct{})
	defer close(hold)
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Hold: hold})
	p, err := e.c.NewProducer(e.ctx, client.ProducerConfig{InFlightPerPartitionMax: 1, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 3)
	for i := 0; i < 3; i++ {
		if err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: []byte("x")}, func(_ client.Produced, err error) { got <- err }); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the first batch to be sent", func() bool { return e.fc.Requests(0, wire.APIProduce) >= 1 })
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	p.Close(ctx)
	for i := 0; i < 3; i++ {
		err := <-got
		if !errors.Is(err, client.ErrClosed) || errors.Is(err, client.ErrNeverSent) != (i > 0) {
			t.Errorf("record %d: %v; want ErrClosed, with ErrNeverSent unless it was sent", i, err)
		}
	}
}

// Batches respect BatchBytesMax and Linger cuts partial batches.
func TestBatchingBounds(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(client.ProducerConfig{BatchBytesMax: 4096, Linger: time.Hour})
	val := make([]byte, 1000)
	for i := 0; i < 10; i++ {
		if err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: val}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Three full batches of 3 records went out; the 10th waits for linger.
	waitFor(t, "full batches", func() bool { return e.storedBatches("t", 0) == 3 })
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	bs, _ := e.fc.Batches("t", 0)
	if len(bs) != 4 {
		t.Fatalf("%d batches, want 4", len(bs))
	}
	for _, b := range bs {
		if len(b) > 4096 {
			t.Fatalf("batch of %d bytes over the 4096 bound", len(b))
		}
	}
	// A record larger than a batch travels alone.
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: make([]byte, 10000)}); err != nil {
		t.Fatal(err)
	}
}

// Sync Produce returns the offset and the record's timestamp.
func TestProduceSync(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(client.ProducerConfig{Linger: -1})
	ts := time.UnixMilli(1_700_000_000_123)
	for i := 0; i < 3; i++ {
		pr, err := p.Produce(e.ctx, client.Record{Topic: "t", Key: []byte("k"), Value: []byte("v"), Timestamp: ts,
			Headers: []client.Header{{Key: []byte("h"), Value: []byte("1")}}})
		if err != nil || pr.Offset != int64(i) || !pr.Timestamp.Equal(ts) || pr.Topic != "t" {
			t.Fatalf("Produce %d: %+v, %v", i, pr, err)
		}
	}
	if _, err := p.Produce(e.ctx, client.Record{Topic: "missing", Value: []byte("v")}); !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Partition: 5, Value: []byte("v")}); err == nil {
		// the default partitioner ignores Partition: this is fine
	}
}

// AddPartitions is picked up by a running producer.
func TestProducerSeesNewPartitions(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(clientProducerManual())
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Partition: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.AddPartitions(e.ctx, "t", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Partition: 2}); err != nil {
		t.Fatal(err)
	}
}
