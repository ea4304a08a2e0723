package bench

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkKafkaPort measures corestream's Kafka port against its native
// port with the node in a process of its own (`corestream serve`, one
// shard, fsync never, one partition, RF 1) and the clients in this one:
// franz-go through the Kafka port and the Go SDK through the native port,
// the same workload both ways (Spec's defaults: 1 KiB records, 64 KiB
// batches, 5 ms linger, acks from a quorum, idempotent, no compression;
// b.N records, no warm-up). The consume runs both read the records the
// native produce run wrote, from the start.
//
// Besides records/s, each run reports the node's CPU time per record
// (node-cpu-ns/record, user and system, read from /proc/PID/stat of the
// server process), which is what the port costs the node, and this
// process's (client-cpu-ns/record), which is what each client library
// costs. make bench-kafka runs it:
//
//	go test ./bench -run '^$' -bench KafkaPort -benchtime 200000x -count 3
//
// CORESTREAM_BENCH_BIN names the corestream binary (else it is built);
// CORESTREAM_BENCH_SHARDS the node's shards (1 when empty: with 2, a
// connection accepted on the shard that does not own the partition pays
// the cross-shard hop until it moves, docs/kafka.md "The data path");
// CORESTREAM_BENCH_PARTITIONS the topic's partitions (1 when empty: with
// more, one Kafka produce request carries a batch for each);
// CORESTREAM_BENCH_CPUPROFILE, when set, is a file for a CPU profile of
// the whole node process (the node then runs under `corestream bench
// node`). The node's pid is logged for `perf record -g -p PID`.
func BenchmarkKafkaPort(b *testing.B) {
	bin := os.Getenv("CORESTREAM_BENCH_BIN")
	dir := b.TempDir()
	if bin == "" {
		bin = filepath.Join(dir, "corestream")
		build := exec.Command("go", "build", "-o", bin, "github.com/corestream/corestream/cmd/corestream")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("building corestream: %v\n%s", err, out)
		}
	}
	shards, partitions := envCount(b, "CORESTREAM_BENCH_SHARDS"), envCount(b, "CORESTREAM_BENCH_PARTITIONS")
	kafkaAddr := freeLoopbackAddr(b)
	d, err := LaunchNode(b.Context(), NodeOptions{Bin: bin, Dir: filepath.Join(dir, "node"), Shards: shards, Fsync: "never",
		KafkaAddr: kafkaAddr, CPUProfile: os.Getenv("CORESTREAM_BENCH_CPUPROFILE")})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := d.Stop(); err != nil {
			b.Error(err)
		}
	}()
	b.Logf("node pid %d, native port %s, Kafka port %s", d.Pids[0], d.Brokers[0], kafkaAddr)
	ports := []struct {
		name  string
		sys   func() System
		addr  string
		topic string
	}{
		{"kafka", func() System { return NewKafka() }, kafkaAddr, "kafka"},
		{"native", func() System { return NewCorestream() }, d.Brokers[0], "native"},
	}
	produced := 0 // records in topic "native", for the consume runs
	for _, p := range ports {
		b.Run("produce/"+p.name, func(b *testing.B) {
			spec := DefaultSpec(ModeProduce)
			spec.Brokers, spec.Topic, spec.Messages, spec.Warmup, spec.Partitions = []string{p.addr}, p.topic, int64(b.N), 0, partitions
			rep := runMeasured(b, d, p.sys(), spec)
			if p.name == "native" {
				produced += int(rep.Produce.Messages)
			}
			b.ReportMetric(rep.Produce.MessagesPerSec, "records/s")
		})
	}
	for _, p := range ports {
		b.Run("consume/"+p.name, func(b *testing.B) {
			if b.N > produced {
				b.Skipf("%d records to consume, %d produced: run with -benchtime Nx", b.N, produced)
			}
			spec := DefaultSpec(ModeConsume)
			spec.Brokers, spec.Topic, spec.Messages, spec.Warmup, spec.Preload = []string{p.addr}, "native", int64(b.N), 0, false
			spec.Partitions = partitions
			rep := runMeasured(b, d, p.sys(), spec)
			b.ReportMetric(rep.Consume.MessagesPerSec, "records/s")
		})
	}
}

// envCount is the count environment variable name sets, 1 when unset.
func envCount(b *testing.B, name string) int {
	v := os.Getenv(name)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a count of at least 1", name, v)
	}
	return n
}

// runMeasured runs spec against sys and reports the node's and this
// process's CPU time per record over the run.
func runMeasured(b *testing.B, d *Deployment, sys System, spec Spec) *Report {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	defer sys.Close()
	node0, err := d.CPU()
	if err != nil {
		b.Fatal(err)
	}
	self0 := selfCPU()
	b.ResetTimer()
	rep, err := Run(ctx, sys, spec, Options{})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	node1, err := d.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(node1-node0)/float64(b.N), "node-cpu-ns/record")
	b.ReportMetric(float64(selfCPU()-self0)/float64(b.N), "client-cpu-ns/record")
	return rep
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// freeLoopbackAddr is a loopback address no listener holds now (the
// node binds it a moment later).
func freeLoopbackAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
