package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/node"
)

// startNode runs a real single node in this process (one shard, fsync
// never) and returns its client address.
func startNode(t testing.TB) string {
	t.Helper()
	cfg, err := config.Parse(nodeConfig(filepath.Join(t.TempDir(), "data"), 1, "never"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		n.Stop(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
	})
	return n.ClientAddr()
}

// A tiny workload of each mode against a real node: every message
// produced is acknowledged and received, and the figures add up.
func TestCorestreamWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	addr := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(s Spec) *Report {
		t.Helper()
		s.Brokers, s.Warmup, s.Duration, s.MessageBytes = []string{addr}, 0, 0, 256
		sys := NewCorestream()
		defer sys.Close()
		rep, err := Run(ctx, sys, s, Options{PrepareTimeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("%s on %s: %v", s.Mode, s.Topic, err)
		}
		return rep
	}

	e2e := DefaultSpec(ModeE2E)
	e2e.Topic, e2e.Partitions, e2e.Producers, e2e.Consumers, e2e.Messages = "e2e", 4, 2, 2, 2000
	rep := run(e2e)
	if rep.Produce.Messages != 2000 || rep.Consume.Messages != 2000 || rep.Lost != 0 || rep.Consume.Latency == nil {
		t.Fatalf("e2e: produced %d, consumed %d, lost %d", rep.Produce.Messages, rep.Consume.Messages, rep.Lost)
	}
	if rep.Settings["idempotence"] != "on" || rep.Produce.Latency.P50Ns <= 0 {
		t.Fatalf("e2e report %+v", rep)
	}

	sync := DefaultSpec(ModeProduce)
	sync.Topic, sync.Sync, sync.Acks, sync.Messages = "sync", true, "primary", 50
	if rep := run(sync); rep.Produce.Messages != 50 || rep.Produce.Latency.Count != 50 {
		t.Fatalf("sync produce: %+v", rep.Produce)
	}

	consume := DefaultSpec(ModeConsume)
	consume.Topic, consume.Partitions, consume.Messages = "consume", 2, 1000
	if rep := run(consume); rep.Consume.Messages != 1000 || rep.Produce != nil {
		t.Fatalf("consume: %+v", rep.Consume)
	}
}

// LaunchNode runs the real binary: it must find the address serve prints
// and stop the node gracefully.
func TestLaunchNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "corestream")
	build := exec.Command("go", "build", "-o", bin, "github.com/corestream/corestream/cmd/corestream")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building corestream: %v\n%s", err, out)
	}
	d, err := LaunchNode(t.Context(), NodeOptions{Bin: bin, Dir: filepath.Join(dir, "node"), Shards: 1, Fsync: "never"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Brokers) != 1 || !strings.HasPrefix(d.Brokers[0], "127.0.0.1:") || strings.HasSuffix(d.Brokers[0], ":0") {
		t.Fatalf("brokers %v", d.Brokers)
	}
	if _, err := d.CPU(); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node", "data")); err != nil {
		t.Fatalf("the node had no data directory: %v", err)
	}
}
