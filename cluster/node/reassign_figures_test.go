package node

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio/wire"
)

// TestClusterReassignThrottleFigures (run with
// CORESTREAM_REASSIGN_FIGURES=1) moves a partition holding 32 MiB to a
// new node without a throttle and back with one, under a steady producer
// writing one record at a time to it: the catch-up rate of each move and
// the producer's p99 during each (BENCHMARKS.md).
func TestClusterReassignThrottleFigures(t *testing.T) {
	if os.Getenv("CORESTREAM_REASSIGN_FIGURES") == "" {
		t.Skip("a measurement: set CORESTREAM_REASSIGN_FIGURES=1")
	}
	const valueBytes, records = 16 << 10, 2048
	const throttleBps = 8 << 20
	tc, ctx, cl, targets := startMoveCluster(t, 1, nil)
	from, _ := replicasOf(tc.nodes[0], "move", 0)
	from = append([]metadata.NodeID(nil), from...)
	fillMovePartition(t, ctx, cl, records, valueBytes)
	mib := float64(valueBytes*records) / (1 << 20)

	load := startSteadyLoad(ctx, cl, "move", 1<<18)
	clusterWait(t, 30*time.Second, "the producer under way", func() bool { return len(load.acks) >= 100 })
	move := func(target []metadata.NodeID, throttle int64) (time.Time, time.Duration) {
		t.Helper()
		began := time.Now()
		req := &wire.ReassignRequest{Action: wire.ReassignStart, ThrottleBytesPerSecond: throttle,
			Moves: []wire.ReassignMove{{Topic: "move", Partition: 0, Replicas: int32s(target)}}}
		if _, err := cl.Reassign(ctx, req); err != nil {
			t.Fatal(err)
		}
		clusterWait(t, 240*time.Second, "the move complete", func() bool {
			for _, n := range tc.nodes {
				if reps, moving := replicasOf(n, "move", 0); moving || fmt.Sprint(reps) != fmt.Sprint(target) {
					return false
				}
			}
			return true
		})
		return began, time.Since(began)
	}
	b1, d1 := move(targets[0], 0)
	b2, d2 := move(from, throttleBps)
	if err := load.stop(); err != nil {
		t.Fatal(err)
	}
	// The partition holds the bulk records, then every acknowledged
	// write once.
	count := 0
	for range load.acks {
		count++
	}
	if got := len(consumeAll(t, ctx, cl, "move", 1)[0]); got != records+count {
		t.Fatalf("read %d records back, want %d bulk and %d acknowledged", got, records, count)
	}
	p99 := func(from time.Time, d time.Duration) (time.Duration, int) {
		var during []time.Duration
		for _, s := range load.lat {
			if !s.at.Before(from) && s.at.Before(from.Add(d)) {
				during = append(during, s.d)
			}
		}
		sort.Slice(during, func(i, j int) bool { return during[i] < during[j] })
		if len(during) == 0 {
			return 0, 0
		}
		return during[len(during)*99/100], len(during)
	}
	q1, n1 := p99(b1, d1)
	q2, n2 := p99(b2, d2)
	t.Logf("%.0f MiB moved without a throttle in %v (%.1f MiB/s), producer p99 %v over %d writes", mib, d1.Round(time.Millisecond), mib/d1.Seconds(), q1, n1)
	t.Logf("%.0f MiB moved back with --throttle %d MiB/s in %v (%.1f MiB/s), producer p99 %v over %d writes", mib, throttleBps>>20, d2.Round(time.Millisecond), mib/d2.Seconds(), q2, n2)
	t.Logf("%d records acknowledged and read back", count)
	if rate := mib / d2.Seconds(); rate > 1.5*float64(throttleBps>>20) {
		t.Errorf("the throttled move ran at %.1f MiB/s, above its %d MiB/s throttle", rate, throttleBps>>20)
	}
}

// TestClusterReassignThrottled moves a partition holding 3 MiB with
// --throttle 1M: every node applies the plan's rate while the move runs
// (the configured none again after), and the copy takes at least the
// throttle's time (a loaded machine only makes it slower).
func TestClusterReassignThrottled(t *testing.T) {
	const valueBytes, records = 16 << 10, 192 // 3 MiB
	const throttleBps = 1 << 20
	tc, ctx, cl, targets := startMoveCluster(t, 1, nil)
	fillMovePartition(t, ctx, cl, records, valueBytes)
	began := time.Now()
	req := &wire.ReassignRequest{Action: wire.ReassignStart, ThrottleBytesPerSecond: throttleBps,
		Moves: []wire.ReassignMove{{Topic: "move", Partition: 0, Replicas: int32s(targets[0])}}}
	if _, err := cl.Reassign(ctx, req); err != nil {
		t.Fatal(err)
	}
	clusterWait(t, 30*time.Second, "every node throttled while the move runs", func() bool {
		for _, n := range tc.nodes {
			if _, moving := replicasOf(n, "move", 0); moving && n.throttle.Rate() != throttleBps {
				return false
			}
		}
		return true
	})
	clusterWait(t, 120*time.Second, "the move complete", func() bool {
		for _, n := range tc.nodes {
			if reps, moving := replicasOf(n, "move", 0); moving || fmt.Sprint(reps) != fmt.Sprint(targets[0]) {
				return false
			}
		}
		return true
	})
	took := time.Since(began)
	for _, n := range tc.nodes {
		if r := n.throttle.Rate(); r != 0 {
			t.Fatalf("node %d still throttles at %d bytes/s after the move", n.self, r)
		}
	}
	// 3 MiB at 1 MiB/s: the first append (up to 1 MiB) goes at once and
	// puts the bucket in debt, so the copy takes 2 s at least (0.2 s
	// without a throttle here).
	if min := 1500 * time.Millisecond; took < min {
		t.Fatalf("the 3 MiB move took %v with a 1 MiB/s throttle, under %v", took, min)
	}
	if got := len(consumeAll(t, ctx, cl, "move", 1)[0]); got != records {
		t.Fatalf("read %d records back after the move, want %d", got, records)
	}
	t.Logf("3 MiB moved in %v with --throttle 1M", took)
}
