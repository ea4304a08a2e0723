package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio/wire"
)

// startNode runs a single node on a free port in a temporary directory.
func startNode(t *testing.T, dir string, mutate func(*config.Config)) *Node {
	t.Helper()
	cfg := config.Default()
	cfg.Node.DataDir = dir
	cfg.Node.ClientAddr = "127.0.0.1:0"
	cfg.Node.HTTPAddr = ""
	cfg.Shard.Count = 2
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := New(cfg, nil)
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
			t.Errorf("stop: %v", err)
		}
	})
	return n
}

func TestStartStop(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	if n.ClientAddr() == "" {
		t.Fatal("no address")
	}
}

// Retention deletes whole old segments past a topic's retention_bytes,
// and the log start moves forward.
func TestRetentionMovesTheLogStart(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *config.Config) {
		c.Storage.SegmentBytes = 1 << 20
		c.Storage.RetentionCheckIntervalMs = 100
		c.Storage.Fsync = "never"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, n.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "short", Partitions: 1, Configs: map[string]string{"retention_bytes": "2097152"}}); err != nil {
		t.Fatal(err)
	}
	p, err := cl.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 8<<10)
	for i := 0; i < 1024; i++ { // 8 MiB
		if err := p.ProduceAsync(ctx, client.Record{Topic: "short", Value: value}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		lo, err := cl.ListOffsets(ctx, "short", 0, wire.TimestampEarliest)
		if err == nil && lo.Offset > 0 {
			t.Logf("log start moved to %d of %d", lo.Offset, lo.HighWatermark)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log start still %d (%v)", lo.Offset, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A partition directory that a crash left half-deleted is swept at start.
func TestStartSweepsDeletedDirectories(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, "partitions", "00ff-0.deleted")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "00000000000000000000.log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	startNode(t, dir, nil)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("left-over directory still there: %v", err)
	}
}
