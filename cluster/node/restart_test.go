package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// After a graceful stop the next start opens every log without a recovery
// scan, and its start-up log says so, partition by partition.
func TestGracefulStopNeedsNoRecovery(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, nil)
	rc := dialHandshaken(t, n.ClientAddr())
	id := rc.createTopic("logs", 3)
	for p := int32(0); p < 3; p++ {
		ref := wire.PartitionRef{Topic: "logs", TopicID: id, Partition: p, Generation: wire.GenerationUnknown}
		for i := 0; i < 5; i++ {
			if _, err := rc.produce(ref, fmt.Sprintf("p%d-%d", p, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	n.stop(t)
	// The partitions were closed into the node's one clean-stop record,
	// each without a record (and syncs) of its own.
	if _, err := os.Stat(filepath.Join(dir, "clean-stop.checkpoint")); err != nil {
		t.Fatalf("no clean-stop record after a graceful stop: %v", err)
	}
	if own, _ := filepath.Glob(filepath.Join(dir, "partitions", "*", "clean-shutdown.checkpoint")); len(own) != 0 {
		t.Fatalf("partitions wrote their own records: %v", own)
	}

	n = runNode(t, dir, nil)
	// __meta and the three partitions; the partitions open as the shards
	// reconcile, just after Start returns.
	waitFor(t, 10*time.Second, "four partitions opened", func() bool { return len(n.log.lines(`msg="partition opened"`)) >= 4 })
	for _, line := range n.log.lines(`msg="partition opened"`) {
		if !strings.Contains(line, "clean=true") || !strings.Contains(line, ", clean") || strings.Contains(line, "scanned") {
			t.Errorf("not a clean open: %s", line)
		}
	}
	rc = dialHandshaken(t, n.ClientAddr())
	for p := int32(0); p < 3; p++ {
		ref := wire.PartitionRef{Topic: "logs", TopicID: id, Partition: p, Generation: wire.GenerationUnknown}
		var vals []string
		waitFor(t, 10*time.Second, "the partition's primary", func() bool {
			var err error
			vals, _, err = rc.fetch(ref, 0)
			return err == nil
		})
		if len(vals) != 5 || vals[0] != fmt.Sprintf("p%d-0", p) || vals[4] != fmt.Sprintf("p%d-4", p) {
			t.Fatalf("partition %d after restart: %q", p, vals)
		}
	}
}

// Consumer offsets committed through the SDK survive a restart: they are
// commands of the metadata log.
func TestCommittedOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, n.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	created, err := c.CreateTopic(ctx, client.TopicSpec{Name: "orders", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	commits := []wire.OffsetCommit{
		{Topic: "orders", TopicID: created.TopicID, Partition: 0, Offset: 7, Metadata: "seven"},
		{Topic: "orders", TopicID: created.TopicID, Partition: 1, Offset: 3},
	}
	if err := c.CommitOffsets(ctx, "billing", commits); err != nil {
		t.Fatal(err)
	}
	// A later commit replaces an earlier one.
	commits[1].Offset = 4
	if err := c.CommitOffsets(ctx, "billing", commits[1:]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	n.stop(t)

	n = runNode(t, dir, nil)
	c, err = client.Dial(ctx, n.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.FetchOffsets(ctx, "billing", []wire.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 5}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		off  int64
		meta string
	}{{7, "seven"}, {4, ""}, {-1, ""}}
	if len(got) != 3 {
		t.Fatalf("fetched %+v", got)
	}
	for i, w := range want {
		if got[i].Offset != w.off || got[i].Metadata != w.meta {
			t.Errorf("partition %d: %+v, want offset %d metadata %q", got[i].Partition, got[i], w.off, w.meta)
		}
		if w.off >= 0 && got[i].TopicID != created.TopicID {
			t.Errorf("partition %d: topic id %v, want %v", got[i].Partition, got[i].TopicID, created.TopicID)
		}
	}
	other, err := c.FetchOffsets(ctx, "nobody", nil)
	if err != nil || len(other) != 0 {
		t.Fatalf("a consumer that never committed: %+v %v", other, err)
	}
}

// After a whole-cluster restart a node answers metadata reads only from
// metadata it has loaded up to the commit point the metadata primary
// taught it: alone (no quorum) it says METADATA_NOT_READY, never an
// answer without the topics; once a quorum is back every node lists
// them.
func TestWholeClusterRestartServesNoPartialMetadata(t *testing.T) {
	httpPorts := freePorts(t, 3)
	tc := startCluster(t, 3, func(c *config.Config) { c.Node.HTTPAddr = httpPorts[c.Node.ID-1] })
	ctx, cl := tc.dial(t, 90*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 3})
	cl.Close()
	for i := range tc.nodes {
		tc.stopNode(i)
	}

	tc.startNode(0)
	rc := dialHandshaken(t, tc.nodes[0].ClientAddr())
	reads := []struct {
		what string
		req  wire.Request
		resp wire.Response
	}{
		{"metadata", &wire.MetadataRequest{}, &wire.MetadataResponse{}},
		{"metadata of orders", &wire.MetadataRequest{Topics: []string{"orders"}}, &wire.MetadataResponse{}},
		{"list topics", &wire.ListTopicsRequest{}, &wire.ListTopicsResponse{}},
		{"describe topic", &wire.DescribeTopicRequest{Name: "orders"}, &wire.DescribeTopicResponse{}},
		{"cluster status", &wire.ClusterStatusRequest{}, &wire.ClusterStatusResponse{}},
		{"fetch offsets", &wire.FetchOffsetsRequest{Consumer: "billing"}, &wire.FetchOffsetsResponse{}},
		{"fetch", &wire.FetchRequest{PartitionRef: wire.PartitionRef{Topic: "orders", Generation: wire.GenerationUnknown},
			MaxBytes: 1 << 20}, &wire.FetchResponse{}},
	}
	for _, r := range reads {
		err := rc.call(r.req, r.resp)
		if code(err) != "METADATA_NOT_READY" || !wire.IsRetriable(err) {
			t.Errorf("%s from a lone restarted node: %v (%+v), want a retriable METADATA_NOT_READY", r.what, err, r.resp)
		} else if !strings.Contains(err.Error(), "quorum") {
			t.Errorf("%s: the error does not say what the node waits for: %v", r.what, err)
		}
	}
	// HTTP answers the same way: 503 with the retriable code.
	for _, path := range []string{"/v1/topics", "/v1/topics/orders", "/v1/topics/orders/partitions/0/records?offset=0"} {
		resp, err := http.Get("http://" + httpPorts[0] + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if c, _, retriable := errorOf(t, raw); resp.StatusCode != http.StatusServiceUnavailable || c != "METADATA_NOT_READY" || !retriable {
			t.Errorf("GET %s from a lone restarted node: %d %s, want 503 METADATA_NOT_READY", path, resp.StatusCode, raw)
		}
	}

	tc.startNode(1)
	for i := 0; i < 2; i++ {
		rc := dialHandshaken(t, tc.nodes[i].ClientAddr())
		clusterWait(t, 60*time.Second, fmt.Sprintf("node %d to list the topic", i+1), func() bool {
			var resp wire.ListTopicsResponse
			err := rc.call(&wire.ListTopicsRequest{}, &resp)
			if err != nil {
				if code(err) != "METADATA_NOT_READY" {
					t.Fatalf("node %d: list topics: %v", i+1, err)
				}
				return false
			}
			if len(resp.Topics) != 1 || resp.Topics[0].Name != "orders" {
				t.Fatalf("node %d answered with %+v, want the topic orders", i+1, resp.Topics)
			}
			return true
		})
	}
}

// A client that bootstraps while no node has loaded the metadata (a
// whole cluster restarting, no quorum yet) waits for one that has,
// within its context, rather than failing at once with
// METADATA_NOT_READY.
func TestClientDialWaitsForLoadedMetadata(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 90*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "orders", Partitions: 2, ReplicationFactor: 3})
	cl.Close()
	for i := range tc.nodes {
		tc.stopNode(i)
	}
	tc.startNode(0)
	dialed := make(chan error, 1)
	go func() {
		c, err := client.Dial(ctx, tc.cfgs[0].Node.ClientAddr)
		if err == nil {
			var topics []wire.TopicSummary
			topics, err = c.ListTopics(ctx)
			if err == nil && (len(topics) != 1 || topics[0].Name != "orders") {
				err = fmt.Errorf("topics after the dial: %+v", topics)
			}
			c.Close()
		}
		dialed <- err
	}()
	// The dial waits while node 1 is alone (the select does not block:
	// a dial that already failed is reported).
	select {
	case err := <-dialed:
		t.Fatalf("the dial ended before a quorum was back: %v", err)
	default:
	}
	tc.startNode(1)
	if err := <-dialed; err != nil {
		t.Fatalf("dial once a quorum is back: %v", err)
	}
}

// A follower restarted from a metadata snapshot that covers everything
// committed loads its metadata once it follows the primary, without a
// new metadata write. It used to wait for an entry of the current term to
// apply, and in a quiet cluster answered METADATA_NOT_READY for ever
// (control-plane simulator, seed 146).
func TestRestartFromCompleteSnapshotLoads(t *testing.T) {
	old := metaSnapshotEvery
	metaSnapshotEvery = 1 // every apply writes a snapshot
	t.Cleanup(func() { metaSnapshotEvery = old })
	tc := startCluster(t, 3, func(c *config.Config) { c.Cluster.AutoLeaderRebalance = false })
	ctx, cl := tc.dial(t, 60*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "quiet", Partitions: 1, ReplicationFactor: 3})
	cl.Close()
	lead, _ := tc.nodes[0].metaRoute()
	if lead <= 0 {
		t.Fatal("no metadata primary after creating a topic")
	}
	f := 0
	for f+1 == int(lead) {
		f++
	}
	applied := func(n *Node) (a, snap int64) {
		n.group.Shard(metaShard).Do(func(*shard.Shard) { a, snap = n.ctrl.Applied(), n.ctrl.snapshotAt })
		return a, snap
	}
	clusterWait(t, 30*time.Second, fmt.Sprintf("node %d's snapshot to cover what the primary applied", f+1), func() bool {
		want, _ := applied(tc.nodes[lead-1])
		a, snap := applied(tc.nodes[f])
		return a == want && snap == a
	})
	tc.stopNode(f)
	tc.startNode(f)
	clusterWait(t, 20*time.Second, fmt.Sprintf("the restarted node %d to load its metadata", f+1), func() bool {
		return tc.nodes[f].metaLoaded.Load()
	})
}
