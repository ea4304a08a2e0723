package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/segment/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every test's context: a hang fails instead of
// stalling the suite.
const testTimeout = 20 * time.Second

// env is a fake cluster with a client on it.
type env struct {
	t   *testing.T
	fc  *clienttest.Cluster
	c   *client.Client
	ctx context.Context
}

// fastConfig keeps retries quick so tests spend no time backing off.
func fastConfig(brokers ...string) client.Config {
	return client.Config{Brokers: brokers, RetryBackoffMin: time.Millisecond, RetryBackoffMax: 20 * time.Millisecond,
		ReconnectBackoffMin: time.Millisecond, ReconnectBackoffMax: 20 * time.Millisecond, DialTimeout: 5 * time.Second}
}

// newEnv starts a fake cluster of nodes nodes with the given topics
// ("name" -> partitions) and dials it. cfg, when given, adjusts the
// client's configuration.
func newEnv(t *testing.T, nodes int, topics map[string]int32, cfg ...func(*client.Config)) *env {
	t.Helper()
	fc, err := clienttest.NewCluster(clienttest.Options{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	for name, n := range topics {
		if _, err := fc.CreateTopic(clienttest.TopicSpec{Name: name, Partitions: n}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	conf := fastConfig(fc.Addrs()[0])
	for _, f := range cfg {
		f(&conf)
	}
	c, err := client.DialConfig(ctx, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &env{t: t, fc: fc, c: c, ctx: ctx}
}

// producer returns a producer closed at the end of the test.
func (e *env) producer(cfg client.ProducerConfig) *client.Producer {
	e.t.Helper()
	p, err := e.c.NewProducer(e.ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// produceN sends values "0".."n-1" to topic/partition asynchronously,
// flushes, and returns the offsets the callbacks reported, by value.
func (e *env) produceN(p *client.Producer, topic string, partition int32, n int) []int64 {
	e.t.Helper()
	offsets := make([]int64, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		i := i
		rec := client.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprint(i))}
		err := p.ProduceAsync(e.ctx, rec, func(pr client.Produced, err error) {
			offsets[i] = pr.Offset
			errs <- err
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	if err := p.Flush(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			e.t.Fatalf("record failed: %v", err)
		}
	}
	return offsets
}

// values returns the stored values of topic/partition, in offset order.
func (e *env) values(topic string, partition int32) []string {
	e.t.Helper()
	recs, err := e.fc.Records(topic, partition)
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
		if r.Offset != int64(i) {
			e.t.Fatalf("record %d has offset %d: offsets not contiguous", i, r.Offset)
		}
	}
	return out
}

// wantExactlyOnce checks that topic/partition holds "0".."n-1" once each,
// in order, and that the callbacks saw offsets 0..n-1.
func (e *env) wantExactlyOnce(topic string, partition int32, n int, offsets []int64) {
	e.t.Helper()
	vals := e.values(topic, partition)
	if len(vals) != n {
		e.t.Fatalf("%d records stored, want %d (duplicates or losses): %v", len(vals), n, vals)
	}
	for i, v := range vals {
		if v != fmt.Sprint(i) {
			e.t.Fatalf("record at offset %d is %q, want %q", i, v, fmt.Sprint(i))
		}
	}
	for i, off := range offsets {
		if off != int64(i) {
			e.t.Fatalf("callback for record %d reported offset %d", i, off)
		}
	}
}

// waitFor polls cond until it holds or the deadline passes (no sleeping
// for synchronisation: a bounded wait on a condition).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// storedBatches returns how many batches topic/partition holds.
func (e *env) storedBatches(topic string, partition int32) int {
	bs, err := e.fc.Batches(topic, partition)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(bs)
}

var _ = batch.CodecNone

// clientProducerManual is a producer configuration that honours each
// record's Partition.
func clientProducerManual() client.ProducerConfig {
	return client.ProducerConfig{Partitioner: client.ManualPartitioner()}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
