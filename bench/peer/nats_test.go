package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corestream/corestream/bench"
)

// launchNATS starts the nats-server that make bench-peer installs, or
// skips the test when it is not there.
func launchNATS(t *testing.T, nodes int) []string {
	t.Helper()
	bin, err := filepath.Abs("../.bin/nats-server")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skip("no nats-server: run make bench-peer")
	}
	d, err := bench.LaunchNATS(t.Context(), bench.NATSOptions{Bin: bin, Dir: t.TempDir(), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	return d.Brokers
}

// The driver delivers every message of each mode, and its completions
// add up: nothing acknowledged is lost, nothing is counted twice.
func TestNATSWorkloads(t *testing.T) {
	brokers := launchNATS(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(s bench.Spec) *bench.Report {
		t.Helper()
		s.Brokers, s.Warmup, s.Duration, s.MessageBytes = brokers, 0, 0, 200
		sys := &natsJS{}
		defer sys.Close()
		rep, err := bench.Run(ctx, sys, s, bench.Options{})
		if err != nil {
			t.Fatalf("%s: %v", s.Mode, err)
		}
		return rep
	}
	e2e := bench.DefaultSpec(bench.ModeE2E)
	e2e.Topic, e2e.Partitions, e2e.Producers, e2e.Consumers, e2e.Messages = "e2e", 4, 2, 2, 2000
	if rep := run(e2e); rep.Produce.Messages != 2000 || rep.Consume.Messages != 2000 || rep.Lost != 0 {
		t.Fatalf("e2e: produced %d, consumed %d, lost %d", rep.Produce.Messages, rep.Consume.Messages, rep.Lost)
	}
	sync := bench.DefaultSpec(bench.ModeProduce)
	sync.Topic, sync.Sync, sync.Messages = "sync", true, 100
	if rep := run(sync); rep.Produce.Messages != 100 || rep.Produce.Latency.Count != 100 {
		t.Fatalf("sync: %+v", rep.Produce)
	}
	consume := bench.DefaultSpec(bench.ModeConsume)
	consume.Topic, consume.Partitions, consume.Consumers, consume.Messages = "consume", 3, 2, 1500
	if rep := run(consume); rep.Consume.Messages != 1500 {
		t.Fatalf("consume: %+v", rep.Consume)
	}
}
