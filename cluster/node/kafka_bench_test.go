package node

import (
	"context"
	"sync"
	"syscall"
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
// sub-benchmarks' records/s compare the two front ends on one node.
// Client and node share the process, so each sub-benchmark also reports
// the process's CPU time per record (cpu-ns/record, user and system,
// client and node together): on a loaded machine wall-clock throughput
// follows the scheduler, while CPU per record follows the work done.
// make bench-kafka runs it three times and prints medians and ratios:
//
//	go test ./cluster/node -run '^$' -bench KafkaVsNative -benchtime 1000000x -count 3
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
		cpu0, calls0 := processCPU(), n.svc.Meter().Calls()
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
		reportRate(b, n, cpu0, calls0)
	})
	b.Run("produce/native", func(b *testing.B) {
		p, err := ncl.NewProducer(ctx, client.ProducerConfig{Linger: 5 * time.Millisecond, BatchBytesMax: 64 << 10})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		produced += b.N
		b.ResetTimer()
		cpu0, calls0 := processCPU(), n.svc.Meter().Calls()
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
		reportRate(b, n, cpu0, calls0)
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
		b.ResetTimer()
		cpu0, calls0 := processCPU(), n.svc.Meter().Calls()
		for got := 0; got < b.N; {
			got += len(cl.PollFetches(ctx).Records())
		}
		reportRate(b, n, cpu0, calls0)
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
		b.ResetTimer()
		cpu0, calls0 := processCPU(), n.svc.Meter().Calls()
		for got := 0; got < b.N; {
			recs, err := cs.Poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got += len(recs)
		}
		reportRate(b, n, cpu0, calls0)
	})
}

// processCPU is the process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRate reports b's records/s, the process's CPU time per record
// since cpu0, and the records per produce or fetch call the node served
// since calls0 (a front end whose client sends smaller batches makes the
// node do more calls for the same records).
func reportRate(b *testing.B, n *testNode, cpu0 time.Duration, calls0 int64) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/record")
	calls := n.svc.Meter().Calls() - calls0
	b.ReportMetric(float64(b.N)/float64(max(calls, 1)), "records/call")
}
