package node

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
)

// logBuf collects a node's log lines for a test to inspect. mu guards b.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the log lines containing every one of the substrings.
func (l *logBuf) lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// testNode is a node started by runNode, with its log.
type testNode struct {
	*Node
	log *logBuf
}

// runNode starts a single node on a free port in dir with two shards,
// logging at debug level into a buffer that is printed when the test
// fails. The node is stopped at the end of the test (or earlier by stop).
func runNode(tb testing.TB, dir string, mutate func(*config.Config)) *testNode {
	tb.Helper()
	cfg := config.Default()
	cfg.Node.DataDir = dir
	cfg.Node.ClientAddr = "127.0.0.1:0"
	cfg.Node.HTTPAddr = "" // tests run in parallel: no fixed port
	cfg.Node.KafkaAddr = ""
	cfg.Shard.Count = 2
	if mutate != nil {
		mutate(&cfg)
	}
	lb := &logBuf{}
	n, err := New(cfg, slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		tb.Fatal(err)
	}
	tn := &testNode{Node: n, log: lb}
	if err := n.Start(); err != nil {
		n.Stop(context.Background())
		tb.Fatalf("start: %v\n%s", err, lb)
	}
	tb.Cleanup(func() {
		tn.stop(tb)
		if tb.Failed() {
			tb.Logf("node log:\n%s", lb)
		}
	})
	return tn
}

// stop stops the node gracefully (at most once).
func (tn *testNode) stop(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.Stop(ctx); err != nil {
		tb.Errorf("stop: %v", err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
