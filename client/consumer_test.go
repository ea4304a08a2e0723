package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// consumeN polls until n records arrived.
func consumeN(t *testing.T, e *env, cs *client.Consumer, n int) []client.Record {
	t.Helper()
	var out []client.Record
	for len(out) < n {
		recs, err := cs.Poll(e.ctx)
		if err != nil {
			t.Fatalf("Poll after %d records: %v", len(out), err)
		}
		out = append(out, recs...)
	}
	if len(out) != n {
		t.Fatalf("got %d records, want %d", len(out), n)
	}
	return out
}

func (e *env) consumer(cfg client.ConsumerConfig) *client.Consumer {
	e.t.Helper()
	cs, err := e.c.NewConsumer(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

// Every codec round-trips through produce and consume, headers and null
// keys included.
func TestCompressionRoundTrip(t *testing.T) {
	for _, codec := range []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			e := newEnv(t, 1, map[string]int32{"t": 1})
			p := e.producer(client.ProducerConfig{Compression: codec, BatchBytesMax: 8 << 10})
			const n = 200
			for i := 0; i < n; i++ {
				rec := client.Record{Topic: "t", Value: bytes.Repeat([]byte(fmt.Sprint(i)), 50),
					Timestamp: time.UnixMilli(int64(1000 + i))}
				if i%2 == 0 {
					rec.Key = []byte(fmt.Sprint("k", i))
					rec.Headers = []client.Header{{Key: []byte("i"), Value: []byte(fmt.Sprint(i))}}
				}
				if err := p.ProduceAsync(e.ctx, rec, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Flush(e.ctx); err != nil {
				t.Fatal(err)
			}
			bs, _ := e.fc.Batches("t", 0)
			if h, _ := batch.ReadHeader(bs[0]); h.Codec() != codec {
				t.Fatalf("stored batch codec %v, want %v", h.Codec(), codec)
			}
			cs := e.consumer(client.ConsumerConfig{})
			if err := cs.Assign(e.ctx, "t", nil, client.StartEarliest); err != nil {
				t.Fatal(err)
			}
			for i, r := range consumeN(t, e, cs, n) {
				if r.Offset != int64(i) || !bytes.Equal(r.Value, bytes.Repeat([]byte(fmt.Sprint(i)), 50)) ||
					r.Timestamp.UnixMilli() != int64(1000+i) {
					t.Fatalf("record %d: %+v", i, r)
				}
				if (i%2 == 0) != (r.Key != nil) || (i%2 == 0 && (len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(i))) {
					t.Fatalf("record %d key/headers: %q %v", i, r.Key, r.Headers)
				}
			}
		})
	}
}

// produceBatches writes n records in batches of per records each.
func produceBatches(t *testing.T, e *env, topic string, n, per int) {
	t.Helper()
	p := e.producer(client.ProducerConfig{Linger: time.Hour})
	for i := 0; i < n; i++ {
		if err := p.ProduceAsync(e.ctx, client.Record{Topic: topic, Value: []byte(fmt.Sprint(i)),
			Timestamp: time.UnixMilli(int64(10_000 + i/per*1000))}, nil); err != nil {
			t.Fatal(err)
		}
		if (i+1)%per == 0 {
			if err := p.Flush(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
}

func TestConsumerStartPositions(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	produceBatches(t, e, "t", 50, 10) // batch k has timestamps 10000+k*1000
	for _, tc := range []struct {
		name  string
		start client.Start
		first int64
	}{
		{"earliest", client.StartEarliest, 0},
		{"offset", client.StartAt(17), 17}, // mid-batch: records 10..16 are skipped
		{"time", client.StartAtTime(time.UnixMilli(12_500)), 30},
		{"time-exact", client.StartAtTime(time.UnixMilli(12_000)), 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := e.consumer(client.ConsumerConfig{})
			if err := cs.Assign(e.ctx, "t", []int32{0}, tc.start); err != nil {
				t.Fatal(err)
			}
			recs := consumeN(t, e, cs, int(50-tc.first))
			for i, r := range recs {
				if r.Offset != tc.first+int64(i) || string(r.Value) != fmt.Sprint(tc.first+int64(i)) {
					t.Fatalf("record %d: offset %d value %q", i, r.Offset, r.Value)
				}
			}
		})
	}
	t.Run("latest", func(t *testing.T) {
		cs := e.consumer(client.ConsumerConfig{})
		if err := cs.Assign(e.ctx, "t", []int32{0}, client.StartLatest); err != nil {
			t.Fatal(err)
		}
		if pos, _ := cs.Position("t", 0); pos != 50 {
			t.Fatalf("latest starts at %d, want 50", pos)
		}
		p := e.producer(client.ProducerConfig{})
		if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("new")}); err != nil {
			t.Fatal(err)
		}
		if recs := consumeN(t, e, cs, 1); recs[0].Offset != 50 || string(recs[0].Value) != "new" {
			t.Fatalf("latest got %+v", recs[0])
		}
	})
}

// Small fetches make the broker cut the last batch of every response;
// the consumer reads each record once, in order.
func TestConsumerPartialTrailingBatches(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	produceBatches(t, e, "t", 300, 7)
	cs := e.consumer(client.ConsumerConfig{FetchMaxBytes: 300, PollRecordsMax: 13})
	if err := cs.Assign(e.ctx, "t", nil, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	for i, r := range consumeN(t, e, cs, 300) {
		if r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.Offset)
		}
	}
}

// A position below the log start (retention) restarts at OutOfRange.
func TestConsumerOutOfRangeResets(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	produceBatches(t, e, "t", 10, 5)
	cs := e.consumer(client.ConsumerConfig{OutOfRange: client.StartEarliest})
	if err := cs.Assign(e.ctx, "t", nil, client.StartAt(1000)); err != nil {
		t.Fatal(err)
	}
	if recs := consumeN(t, e, cs, 10); recs[0].Offset != 0 {
		t.Fatalf("reset to %d, want 0", recs[0].Offset)
	}
}

// The consumer follows a moved primary.
func TestConsumerFollowsPrimaryMove(t *testing.T) {
	e := newEnv(t, 2, map[string]int32{"t": 1})
	produceBatches(t, e, "t", 10, 5)
	cs := e.consumer(client.ConsumerConfig{FetchMaxWait: 20 * time.Millisecond})
	if err := cs.Assign(e.ctx, "t", nil, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	consumeN(t, e, cs, 10)
	e.fc.MovePrimary("t", 0, 2)
	produceBatches(t, e, "t", 5, 5)
	if recs := consumeN(t, e, cs, 5); recs[0].Offset != 10 {
		t.Fatalf("after the move got offset %d", recs[0].Offset)
	}
}

// Commit stores positions under the consumer's name; a new consumer with
// StartCommitted resumes there.
func TestConsumerCommitAndResume(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 2})
	produceBatches(t, e, "t", 20, 10)
	cs := e.consumer(client.ConsumerConfig{Name: "app", PollRecordsMax: 7})
	if err := cs.Assign(e.ctx, "t", nil, client.StartCommitted(client.StartEarliest)); err != nil {
		t.Fatal(err)
	}
	got := consumeN(t, e, cs, 7)
	if err := cs.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	offs, err := e.c.FetchOffsets(e.ctx, "app", nil)
	if err != nil {
		t.Fatal(err)
	}
	committed := map[int32]int64{}
	for _, o := range offs {
		committed[o.Partition] = o.Offset
	}
	cs2 := e.consumer(client.ConsumerConfig{Name: "app"})
	if err := cs2.Assign(e.ctx, "t", nil, client.StartCommitted(client.StartEarliest)); err != nil {
		t.Fatal(err)
	}
	rest := consumeN(t, e, cs2, 20-len(got))
	for _, r := range rest {
		if r.Offset < committed[r.Partition] {
			t.Fatalf("resumed below the committed offset: %+v (committed %v)", r, committed)
		}
	}
	anon := e.consumer(client.ConsumerConfig{})
	if err := anon.Commit(e.ctx); !errors.Is(err, client.ErrNoConsumerName) {
		t.Fatalf("commit without a name: %v", err)
	}
}

// FetchOffsets answers -1 for partitions with nothing committed; commits to
// unknown partitions fail per entry.
func TestOffsetsCommitFetch(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 2})
	err := e.c.CommitOffsets(e.ctx, "g", []wire.OffsetCommit{{Topic: "t", Partition: 0, Offset: 5, Metadata: "m"},
		{Topic: "t", Partition: 9, Offset: 1}})
	var pe *client.PartitionError
	if !errors.As(err, &pe) || pe.Partition != 9 || !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("commit: %v", err)
	}
	offs, err := e.c.FetchOffsets(e.ctx, "g", []wire.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}})
	if err != nil || len(offs) != 2 || offs[0].Offset != 5 || offs[0].Metadata != "m" || offs[1].Offset != -1 {
		t.Fatalf("fetch offsets: %+v, %v", offs, err)
	}
}

// A real primary starts each generation with a one-record control batch.
// The consumer skips it, and its position moves past it — also when a
// partition holds nothing else, which Poll reports by returning.
func TestConsumerSkipsControlBatches(t *testing.T) {
	fc, err := clienttest.NewCluster(clienttest.Options{Nodes: 2, NoOpBatches: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	fc.CreateTopic(clienttest.TopicSpec{Name: "t", Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := client.DialConfig(ctx, fastConfig(fc.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e := &env{t: t, fc: fc, c: c, ctx: ctx}
	p := e.producer(clientProducerManual())
	e.produceN(p, "t", 0, 3)
	fc.MovePrimary("t", 0, 2) // another no-op in the middle of partition 0
	e.produceN(p, "t", 0, 2)
	cs := e.consumer(client.ConsumerConfig{})
	if err := cs.Assign(ctx, "t", nil, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	recs := consumeN(t, e, cs, 5)
	for i, want := range []int64{1, 2, 3, 5, 6} {
		if recs[i].Offset != want || recs[i].Partition != 0 {
			t.Fatalf("record %d: %d/%d, want 0/%d", i, recs[i].Partition, recs[i].Offset, want)
		}
	}
	waitPos := func(part int32, want int64) {
		for {
			if pos, _ := cs.Position("t", part); pos == want {
				return
			}
			if _, err := cs.Poll(ctx); err != nil {
				t.Fatalf("waiting for partition %d to reach %d: %v", part, want, err)
			}
		}
	}
	waitPos(1, 1) // partition 1 holds only its no-op
	waitPos(0, 7)
}
