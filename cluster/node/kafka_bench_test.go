package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/client"
)

// BenchmarkKafkaVsNative produces b.N records of 100 bytes to one
// partition (acks from a quorum, idempotent, 5 ms linger, 64 KiB batches,
// no compression on both) through the Kafka port with franz-go and through the native
// port with the Go SDK, then consumes them back the same way; the
// sub-benchmarks' records/s compare the two front ends on one node:
//
//	go test ./cluster/node -run '^$' -bench KafkaVsNative -benchtime 200000x
func BenchmarkKafkaVsNative(b *testing.B) {
	n := runNode(b, b.TempDir(), withKafka)
	ctx := context.Background()
	value := make([]byte, 100)
	kcl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.DefaultProduceTopic("bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer kcl.Close()
	if _, err := kadm.NewClient(kcl).CreateTopic(ctx, 1, 1, nil, "bench"); err != nil {
		b.Fatal(err)
	}
	ncl, err := client.Dial(ctx, n.ClientAddr())
	if err != nil {
		b.Fatal(err)
	}
	defer ncl.Close()

	produced := 0 // records in the partition, for the consume runs
	b.Run("produce/kafka", func(b *testing.B) {
		produced += b.N
		var wg sync.WaitGroup
		wg.Add(b.N)
		for i := 0; i < b.N; i++ {
			kcl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("produce/native", func(b *testing.B) {
		p, err := ncl.NewProducer(ctx, client.ProducerConfig{Linger: 5 * time.Millisecond, BatchBytesMax: 64 << 10})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		produced += b.N
		var wg sync.WaitGroup
		wg.Add(b.N)
		for i := 0; i < b.N; i++ {
			err := p.ProduceAsync(ctx, client.Record{Topic: "bench", Partition: 0, Value: value}, func(_ client.Produced, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("consume/kafka", func(b *testing.B) {
		if b.N > produced {
			b.Skipf("%d records to consume, %d produced: run with -benchtime Nx", b.N, produced)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumeTopics("bench"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		for got := 0; got < b.N; {
			got += len(cl.PollFetches(ctx).Records())
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("consume/native", func(b *testing.B) {
		if b.N > produced {
			b.Skipf("%d records to consume, %d produced: run with -benchtime Nx", b.N, produced)
		}
		cs, err := ncl.NewConsumer(client.ConsumerConfig{})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		if err := cs.Assign(ctx, "bench", []int32{0}, client.StartEarliest); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < b.N; {
			recs, err := cs.Poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got += len(recs)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
