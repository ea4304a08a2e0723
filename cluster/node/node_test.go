package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/native"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// startNode runs a single node on a free port in a temporary directory.
func startNode(t *testing.T, dir string, mutate func(*config.Config)) *Node {
	t.Helper()
	cfg := config.Default()
	cfg.Node.DataDir = dir
	cfg.Node.ClientAddr = "127.0.0.1:0"
	cfg.Node.HTTPAddr = ""
	cfg.Node.KafkaAddr = ""
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

// The metadata log is compacted after snapshots, and a restart starts
// from the snapshot with every topic and committed offset intact.
func TestMetadataSnapshotAndCompaction(t *testing.T) {
	old := metaSnapshotEvery
	metaSnapshotEvery = 50
	t.Cleanup(func() { metaSnapshotEvery = old })
	dir := t.TempDir()
	n := startNode(t, dir, func(c *config.Config) { c.Storage.SegmentBytes = 1 << 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, n.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "kept", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	// Enough commits into the metadata group (one entry each, about 3.5
	// KiB with their metadata string) to fill several 1 MiB segments of
	// the metadata log.
	md := strings.Repeat("m", 3500)
	for i := 0; i < 1200; i++ {
		err := commitMetaOffsets(n, "c", []service.OffsetCommit{{Topic: "kept", Partition: int32(i % 2), Offset: int64(i), Metadata: md}})
		if err != nil {
			t.Fatal(err)
		}
	}
	var start int64
	n.group.Shard(metaShard).Do(func(*shard.Shard) { start = n.ctrl.r.Log().LogStartOffset() })
	if start == 0 {
		t.Fatal("the metadata log was never compacted")
	}
	cl.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := n.Stop(ctx2); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, nil)
	cl, err = client.Dial(ctx, n.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got, err := cl.FetchOffsets(ctx, "c", []wire.TopicPartition{{Topic: "kept", Partition: 0}, {Topic: "kept", Partition: 1}})
	if err != nil || got[0].Offset != 1198 || got[1].Offset != 1199 {
		t.Fatalf("offsets after restart from a snapshot (log start %d): %+v %v", start, got, err)
	}
	if ts, err := cl.ListTopics(ctx); err != nil || len(ts) != 1 {
		t.Fatalf("topics after restart: %v %v", ts, err)
	}
}

// A connection whose requests all go to partitions of another shard moves
// to that shard, and keeps being served correctly there.
func TestConnectionMovesToItsPartitionsShard(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	rc := dialHandshaken(t, n.ClientAddr())
	id := rc.createTopic("moving", 8)
	// One partition owned by each shard.
	parts := map[int]int32{}
	for p := int32(0); p < 8; p++ {
		parts[n.shardOf(id, p)] = p
	}
	if len(parts) != 2 {
		t.Fatalf("partitions cover shards %v", parts)
	}
	for _, sh := range []int{0, 1} {
		ref := wire.PartitionRef{Topic: "moving", TopicID: id, Partition: parts[sh], Generation: wire.GenerationUnknown}
		for i := 0; i < 2*native.MigrateAfter; i++ {
			resp, err := rc.produce(ref, fmt.Sprintf("s%d-%d", sh, i))
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(i); resp.BaseOffset != want { // the primary's no-op takes no offset
				t.Fatalf("shard %d partition %d: base offset %d, want %d", sh, parts[sh], resp.BaseOffset, want)
			}
		}
	}
	if n.migrations.Load() == 0 {
		t.Fatal("the connection never moved, though its requests went to the other shard")
	}
}
