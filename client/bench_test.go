package client_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
)

// Benchmarks of the producer against the fake broker over loopback TCP,
// with the raw TCP speed of the same machine measured in the same run as
// the baseline (BENCHMARKS.md: figures are ratios against a baseline).
//
//	go test ./client -run '^$' -bench Throughput -benchtime 3x

const (
	benchValueBytes = 1 << 10  // 1 KiB messages
	benchBatchBytes = 64 << 10 // 64 KiB batches
	benchTotalBytes = 64 << 20 // bytes of values moved per iteration
)

// rawBlast writes total bytes in benchBatchBytes writes to a loopback
// server that reads and discards them, and returns the time taken.
func rawBlast(b *testing.B, total int) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- 0
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		done <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, benchBatchBytes)
	start := time.Now()
	for sent := 0; sent < total; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	if n := <-done; n != int64(total) {
		b.Fatalf("server read %d of %d bytes", n, total)
	}
	return time.Since(start)
}

// produceBlast produces total bytes of benchValueBytes records to one
// partition and waits for every acknowledgement.
func produceBlast(b *testing.B, p *client.Producer, total int) time.Duration {
	ctx := context.Background()
	val := make([]byte, benchValueBytes)
	start := time.Now()
	for sent := 0; sent < total; sent += len(val) {
		if err := p.ProduceAsync(ctx, client.Record{Topic: "bench", Value: val}, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchEnv starts a fake broker tuned for throughput (header checks only,
// a small retained log) with one partition, and an idempotent producer.
func benchEnv(b *testing.B, cfg client.ProducerConfig) (*client.Producer, func()) {
	fc, err := clienttest.NewCluster(clienttest.Options{HeaderChecksOnly: true, DiscardRecords: true, BatchBytesMax: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fc.CreateTopic(clienttest.TopicSpec{Name: "bench", Partitions: 1}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, fc.Addrs()...)
	if err != nil {
		b.Fatal(err)
	}
	cfg.BatchBytesMax = benchBatchBytes
	p, err := c.NewProducer(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return p, func() { p.Close(ctx); c.Close(); fc.Close() }
}

// BenchmarkThroughput moves benchTotalBytes per iteration, first as a raw
// TCP blast, then as 1 KiB records through the producer, and reports both
// rates and their ratio.
func BenchmarkThroughput(b *testing.B) {
	p, stop := benchEnv(b, client.ProducerConfig{})
	defer stop()
	produceBlast(b, p, 4<<20) // warm up connections and pools
	var raw, prod time.Duration
	b.SetBytes(benchTotalBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		raw += rawBlast(b, benchTotalBytes)
		prod += produceBlast(b, p, benchTotalBytes)
	}
	b.StopTimer()
	mb := float64(b.N) * benchTotalBytes / 1e6
	b.ReportMetric(mb/raw.Seconds(), "raw-MB/s")
	b.ReportMetric(mb/prod.Seconds(), "producer-MB/s")
	b.ReportMetric(raw.Seconds()/prod.Seconds(), "producer/raw")
}

// BenchmarkProduceAsync measures the per-record cost of ProduceAsync
// (accumulation, batching, sending) with allocations.
func BenchmarkProduceAsync(b *testing.B) {
	p, stop := benchEnv(b, client.ProducerConfig{})
	defer stop()
	ctx := context.Background()
	val := make([]byte, benchValueBytes)
	b.SetBytes(benchValueBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.ProduceAsync(ctx, client.Record{Topic: "bench", Value: val}, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}
