package node

import (
	"context"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
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
