package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

// BenchmarkSyncProduce splits a synchronous one-message produce's latency
// between the SDK and the broker: the same produce against the SDK's
// in-process fake broker and against a real node, with the loopback round
// trip of this machine measured in the same run as the baseline.
//
//	go test ./bench -run '^$' -bench SyncProduce -benchtime 5000x
func BenchmarkSyncProduce(b *testing.B) {
	rtt, err := probeRTT(context.Background(), 500*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	fc, err := clienttest.NewCluster(clienttest.Options{HeaderChecksOnly: true, DiscardRecords: true})
	if err != nil {
		b.Fatal(err)
	}
	defer fc.Close()
	if _, err := fc.CreateTopic(clienttest.TopicSpec{Name: "sync", Partitions: 1}); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		addrs []string
	}{{"fake", fc.Addrs()}, {"node", []string{startNode(b)}}} {
		b.Run(tc.name, func(b *testing.B) {
			p50 := syncProduceP50(b, tc.addrs)
			b.ReportMetric(float64(p50)/1e3, "p50-µs")
			b.ReportMetric(float64(p50)/float64(rtt.P50Ns), "p50/rtt")
		})
	}
}

// syncProduceP50 produces b.N one-message batches one at a time (acks
// primary) and returns the median latency.
func syncProduceP50(b *testing.B, addrs []string) int64 {
	ctx := context.Background()
	c, err := client.Dial(ctx, addrs...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "sync", Partitions: 1}); err != nil && !errors.Is(err, wire.ErrTopicAlreadyExists) {
		b.Fatal(err)
	}
	p, err := c.NewProducer(ctx, client.ProducerConfig{Linger: -1, Acks: wire.AcksPrimary})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)
	v := make([]byte, 1<<10)
	for range 100 { // connections, pools, the partition's first commit
		if _, err := p.Produce(ctx, client.Record{Topic: "sync", Value: v}); err != nil {
			b.Fatal(err)
		}
	}
	lat := newLatencies()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		if _, err := p.Produce(ctx, client.Record{Topic: "sync", Value: v}); err != nil {
			b.Fatal(err)
		}
		lat.record(int64(time.Since(t)))
	}
	b.StopTimer()
	return lat.summary().P50Ns
}
