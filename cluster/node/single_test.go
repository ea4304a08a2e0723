package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio/wire"
)

// A node listening on port 0 advertises the port it got: the roster still
// says ":0", which no client can dial.
func TestMetadataAdvertisesBoundAddress(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	rc := dialHandshaken(t, n.ClientAddr())
	md := rc.metadata()
	if len(md.Nodes) != 1 || md.Nodes[0].ClientAddr != n.ClientAddr() {
		t.Fatalf("metadata nodes %+v, listening on %s", md.Nodes, n.ClientAddr())
	}
	var st wire.ClusterStatusResponse
	if err := rc.call(&wire.ClusterStatusRequest{}, &st); err != nil || st.Nodes[0].ClientAddr != n.ClientAddr() {
		t.Fatalf("cluster status %+v: %v", st.Nodes, err)
	}
	// The SDK routes by that address: a produce works end to end.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, n.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.Produce(ctx, client.Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatalf("produce through the SDK: %v", err)
	}
}

// A topic deleted and created again under the same name gets a new id;
// requests routed with the old id are refused, and the new topic's data
// is untouched by them.
func TestRecreatedTopicRefusesOldID(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	rc := dialHandshaken(t, n.ClientAddr())
	oldID := rc.createTopic("orders", 2)
	old := wire.PartitionRef{Topic: "orders", TopicID: oldID, Partition: 1, Generation: wire.GenerationUnknown}
	if _, err := rc.produce(old, "first life"); err != nil {
		t.Fatal(err)
	}
	var del wire.DeleteTopicResponse
	if err := rc.call(&wire.DeleteTopicRequest{Name: "orders"}, &del); err != nil || del.TopicID != oldID {
		t.Fatalf("delete: %+v %v", del, err)
	}
	newID := rc.createTopic("orders", 2)
	if newID == oldID {
		t.Fatal("the recreated topic kept its id")
	}
	cur := old
	cur.TopicID = newID
	if _, err := rc.produce(cur, "second life"); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.produce(old, "stale"); !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("produce with the old id: %v", err)
	}
	if _, _, err := rc.fetch(old, 0); !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("fetch with the old id: %v", err)
	}
	var lo wire.ListOffsetsResponse
	if err := rc.call(&wire.ListOffsetsRequest{PartitionRef: old, Timestamp: wire.TimestampLatest}, &lo); !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("list offsets with the old id: %v", err)
	}
	var dp wire.DescribePartitionResponse
	if err := rc.call(&wire.DescribePartitionRequest{PartitionRef: old}, &dp); !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("describe partition with the old id: %v", err)
	}
	var co wire.CommitOffsetsResponse
	// The first commit of the node creates and loads __groups, which
	// holds the consumer's offsets (COORDINATOR_LOADING meanwhile).
	clusterWait(t, 30*time.Second, "the consumer's coordinator", func() bool {
		err := rc.call(&wire.CommitOffsetsRequest{Consumer: "g", Offsets: []wire.OffsetCommit{{Topic: "orders", TopicID: oldID, Partition: 1, Offset: 1}}}, &co)
		if err != nil && !errors.Is(err, wire.ErrCoordinatorLoading) && !errors.Is(err, wire.ErrCoordinatorNotAvailable) {
			t.Fatal(err)
		}
		return err == nil
	})
	if len(co.Results) != 1 || co.Results[0].ErrorCode != wire.ErrUnknownTopicOrPartition.Code {
		t.Fatalf("commit with the old id: %+v", co.Results)
	}
	vals, _, err := rc.fetch(cur, 0)
	if err != nil || len(vals) != 1 || vals[0] != "second life" {
		t.Fatalf("the new topic holds %q (%v)", vals, err)
	}
}

// A single node refuses a replication factor above its roster size, and
// "all" (0: the default) resolves to 1.
func TestReplicationFactorOverRoster(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	rc := dialHandshaken(t, n.ClientAddr())
	for _, rf := range []int16{2, 3, 32} {
		var resp wire.CreateTopicResponse
		err := rc.call(&wire.CreateTopicRequest{Name: "rf", Partitions: 1, ReplicationFactor: rf}, &resp)
		if !errors.Is(err, wire.ErrInvalidReplicationFactor) {
			t.Fatalf("factor %d: %v", rf, err)
		}
	}
	var resp wire.CreateTopicResponse
	if err := rc.call(&wire.CreateTopicRequest{Name: "rf", Partitions: 1}, &resp); err != nil || resp.ReplicationFactor != 1 {
		t.Fatalf("default factor: %+v %v", resp, err)
	}
	if md := rc.metadata(); len(md.Topics) != 1 {
		t.Fatalf("refused creations left topics: %+v", md.Topics)
	}
}

// network.max_inflight_per_conn: with the bound reached by long polls,
// the server reads nothing more from the connection, so a request behind
// them is answered only once a long poll ends. With one slot more it is
// answered at once.
func TestInflightBackpressure(t *testing.T) {
	const inflight, pollMs = 3, 1500
	n := runNode(t, t.TempDir(), func(cfg *config.Config) { cfg.Network.MaxInflightPerConn = inflight })
	setup := dialHandshaken(t, n.ClientAddr())
	id := setup.createTopic("quiet", 1)
	ref := wire.PartitionRef{Topic: "quiet", TopicID: id, Generation: wire.GenerationUnknown}
	var lo wire.ListOffsetsResponse
	waitFor(t, 10*time.Second, "the partition readable", func() bool {
		return setup.call(&wire.ListOffsetsRequest{PartitionRef: ref, Timestamp: wire.TimestampLatest}, &lo) == nil
	})
	hw := lo.Offset // after the primary's no-op: long polls there wait

	for _, polls := range []int{inflight, inflight - 1} {
		rc := dialHandshaken(t, n.ClientAddr()) // the handshake's slot is free again
		start := time.Now()
		var pollIDs []uint32
		for i := 0; i < polls; i++ {
			pollIDs = append(pollIDs, rc.send(&wire.FetchRequest{PartitionRef: ref, FetchOffset: hw, MaxBytes: 1 << 10, MinBytes: 1, MaxWaitMs: pollMs}))
		}
		mdID := rc.send(&wire.MetadataRequest{})
		h, _, err := rc.read()
		if err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		switch {
		case polls == inflight && (h.CorrelationID == mdID || elapsed < pollMs*time.Millisecond*8/10):
			t.Fatalf("%d long polls fill %d slots, yet response %d came after %v", polls, inflight, h.CorrelationID, elapsed)
		case polls < inflight && (h.CorrelationID != mdID || elapsed > pollMs*time.Millisecond/2):
			t.Fatalf("a free slot left, yet the metadata waited: response %d after %v", h.CorrelationID, elapsed)
		}
		// Drain the rest: every request is answered in the end.
		got := map[uint32]bool{h.CorrelationID: true}
		for len(got) < polls+1 {
			h, _, err := rc.read()
			if err != nil {
				t.Fatal(err)
			}
			got[h.CorrelationID] = true
		}
		for _, id := range append(pollIDs, mdID) {
			if !got[id] {
				t.Fatalf("request %d never answered", id)
			}
		}
		rc.c.Close()
	}
}

// A deleted topic's partition directories go (closed without a clean
// close's syncs, removed by the node's background remover); another
// topic's stay.
func TestDeletedTopicDirectoriesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, nil)
	rc := dialHandshaken(t, n.ClientAddr())
	id := rc.createTopic("gone", 8)
	keptID := rc.createTopic("kept", 1)
	for p := int32(0); p < 8; p++ {
		if _, err := rc.produce(wire.PartitionRef{Topic: "gone", TopicID: id, Partition: p, Generation: wire.GenerationUnknown}, "v"); err != nil {
			t.Fatal(err)
		}
	}
	dirsOf := func(id [16]byte) []string {
		m, _ := filepath.Glob(filepath.Join(dir, "partitions", fmt.Sprintf("%x-*", id)))
		return m
	}
	if got := dirsOf(id); len(got) != 8 {
		t.Fatalf("before the deletion: %v", got)
	}
	var del wire.DeleteTopicResponse
	if err := rc.call(&wire.DeleteTopicRequest{Name: "gone"}, &del); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the deleted topic's directories removed", func() bool { return len(dirsOf(id)) == 0 })
	if got := dirsOf(keptID); len(got) != 1 {
		t.Fatalf("the other topic's directories: %v", got)
	}
}
