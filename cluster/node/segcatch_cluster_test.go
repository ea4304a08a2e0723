package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio/wire"
)

// segFigureMiB is the size of the partition the segment tests move
// (CORESTREAM_SEGMENT_MOVE_MIB overrides it for the figures).
func segFigureMiB() int {
	if v, err := strconv.Atoi(os.Getenv("CORESTREAM_SEGMENT_MOVE_MIB")); err == nil && v > 0 {
		return v
	}
	return 64
}

// fillMove writes mib MiB of 16 KiB records to partition 0 of "move".
func fillMove(t *testing.T, ctx context.Context, cl *client.Client, mib int) {
	t.Helper()
	const valueBytes = 16 << 10
	fillMovePartition(t, ctx, cl, mib<<20/valueBytes, valueBytes)
}

// moveAndWait moves partition 0 of "move" to target and waits until
// every node applied the move's end; it returns how long that took.
func moveAndWait(t *testing.T, ctx context.Context, cl *client.Client, tc *testCluster, target []metadata.NodeID) time.Duration {
	t.Helper()
	began := time.Now()
	req := &wire.ReassignRequest{Action: wire.ReassignStart,
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
	return time.Since(began)
}

func segmentBytesSent(tc *testCluster) int64 {
	var sum int64
	for _, n := range tc.nodes {
		if n != nil {
			sum += n.SegmentBytesSent()
		}
	}
	return sum
}

// TestClusterMoveSendsSegments moves a partition holding 64 MiB (4 MiB
// segments) to a new node: most of its bytes go as whole segments
// (corestream_replication_segment_bytes_total), and every sealed segment
// of the new copy below the high watermark is the other copies' file
// byte for byte.
func TestClusterMoveSendsSegments(t *testing.T) {
	mib := segFigureMiB()
	tc, ctx, cl, targets := startMoveCluster(t, 1, func(c *config.Config) { c.Storage.SegmentBytes = 4 << 20 })
	fillMove(t, ctx, cl, mib)
	d := moveAndWait(t, ctx, cl, tc, targets[0])
	sent := segmentBytesSent(tc)
	t.Logf("%d MiB moved in %v (%.1f MiB/s), %.1f MiB of it as whole segments", mib, d.Round(time.Millisecond),
		float64(mib)/d.Seconds(), float64(sent)/(1<<20))
	if sent < int64(mib)<<20*3/4 {
		t.Fatalf("%d bytes went as segments, want most of the %d MiB", sent, mib)
	}
	tp := tc.nodes[3].view.Load().Topics["move"]
	n4 := tc.nodes[3]
	// Every replica's log is the same bytes (the primary's, stamped once):
	// node 2 kept its copy through the move.
	other := tc.nodes[1]
	names, err := filepath.Glob(filepath.Join(n4.partitionDir(tp.ID, 0), "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for _, name := range names[:max(len(names)-2, 0)] { // the last ones may still be active somewhere
		a, err1 := os.ReadFile(name)
		b, err2 := os.ReadFile(filepath.Join(other.partitionDir(tp.ID, 0), filepath.Base(name)))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v, %v", filepath.Base(name), err1, err2)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("segment %s of node 4 differs from node 2's", filepath.Base(name))
		}
		same++
	}
	if same < mib/4/2 {
		t.Fatalf("only %d sealed segments compared for %d MiB", same, mib)
	}
	if got := len(consumeAll(t, ctx, cl, "move", 1)[0]); got != mib<<20/(16<<10) {
		t.Fatalf("read %d records back, want %d", got, mib<<20/(16<<10))
	}
}

// TestClusterSegmentCatchUpFigures (run with CORESTREAM_REASSIGN_FIGURES=1,
// CORESTREAM_SEGMENT_MOVE_MIB=64 or 256) moves a partition to a new node
// with catch-up by appends only, then in a fresh cluster by whole
// segments: the catch-up rate of each and the process's CPU time during
// the move (all four nodes run in this process: sender and receiver
// together) (BENCHMARKS.md).
func TestClusterSegmentCatchUpFigures(t *testing.T) {
	if os.Getenv("CORESTREAM_REASSIGN_FIGURES") == "" {
		t.Skip("a measurement: set CORESTREAM_REASSIGN_FIGURES=1")
	}
	mib := segFigureMiB()
	for _, appends := range []bool{true, false} {
		t.Run(fmt.Sprintf("appendsOnly=%v", appends), func(t *testing.T) {
			appendsOnly = appends
			defer func() { appendsOnly = false }()
			tc, ctx, cl, targets := startMoveCluster(t, 1, func(c *config.Config) { c.Storage.SegmentBytes = 16 << 20 })
			fillMove(t, ctx, cl, mib)
			cpu0 := processCPU()
			d := moveAndWait(t, ctx, cl, tc, targets[0])
			cpu := processCPU() - cpu0
			sent := segmentBytesSent(tc)
			t.Logf("%d MiB, appends only %v: %v (%.1f MiB/s), process CPU %v (%.2f CPU-s per GiB), %.1f MiB as segments",
				mib, appends, d.Round(time.Millisecond), float64(mib)/d.Seconds(), cpu.Round(time.Millisecond),
				cpu.Seconds()*1024/float64(mib), float64(sent)/(1<<20))
			if appends != (sent == 0) {
				t.Fatalf("appends only %v, but %d bytes went as segments", appends, sent)
			}
		})
	}
}
