package node

import (
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
)

// A consumer in a follower's rack is sent there by the primary and reads
// every record from it: the follower counts the reads it served
// (corestream_follower_reads_served_total), the primary none.
func TestClusterFollowerReadServedInTheRack(t *testing.T) {
	racks := []string{"a", "b", "c"}
	tc := startCluster(t, 3, func(c *config.Config) {
		c.Node.Rack = racks[c.Node.ID-1]
		for i := range c.Cluster.Nodes {
			c.Cluster.Nodes[i].Rack = racks[c.Cluster.Nodes[i].ID-1]
		}
	})
	ctx, cl := tc.dial(t, 90*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "near", Partitions: 1, ReplicationFactor: 3})
	want := produceAll(t, ctx, cl, "near", 0, 200)
	md, err := cl.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range md.Nodes {
		if n.Rack != racks[n.ID-1] {
			t.Fatalf("metadata: node %d in rack %q, want %q", n.ID, n.Rack, racks[n.ID-1])
		}
	}
	d, err := cl.DescribeTopic(ctx, "near")
	if err != nil {
		t.Fatal(err)
	}
	primary := d.Topic.Partitions[0].PrimaryID
	near := d.Topic.Partitions[0].Replicas[0]
	if near == primary {
		near = d.Topic.Partitions[0].Replicas[1]
	}
	// The primary names a follower once its own route holds it in the
	// in-sync set, and the follower serves once its route (the primary's
	// last announcement) holds it too; the cluster status, answered by
	// the metadata primary, can say "in sync" before either. A follower
	// that refuses on a stale set sends the consumer back to the primary
	// for a second (client.followerRetryAfter), long enough here to read
	// all 200 records from the primary, so the test starts reading once
	// both routes agree.
	inSyncAt := func(n *Node) bool {
		rt, ok := n.routes.Get(shardKey(d.Topic.ID, 0))
		return ok && containsID(rt.InSync, near)
	}
	clusterWait(t, 30*time.Second, "the primary's and the follower's routes to hold the follower in sync", func() bool {
		st, err := cl.ClusterStatus(ctx)
		return err == nil && st.UnderReplicated == 0 && inSyncAt(tc.nodes[primary-1]) && inSyncAt(tc.nodes[near-1])
	})
	before := tc.nodes[primary-1].svc.FollowerReads()

	cs, err := cl.NewConsumer(client.ConsumerConfig{Rack: racks[near-1], FetchMaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Assign(ctx, "near", []int32{0}, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < len(want[0]) {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	sameValues(t, map[int32][]string{0: got}, want)
	// Where the consumer reads now is logged, not required: a follower
	// that answers one fetch with an error (its high watermark a moment
	// behind on a loaded machine) sends the consumer back to the primary
	// until the primary names the follower again. What proves the rule is
	// the follower's count of reads served, below.
	if id, _ := cs.ReadReplica("near", 0); id != near {
		t.Logf("reading from node %d now (the follower in rack %s is %d, the primary %d)", id, racks[near-1], near, primary)
	}
	served := tc.nodes[near-1].svc.FollowerReads()
	if served == 0 || tc.nodes[primary-1].svc.FollowerReads() != before {
		all := map[int]uint64{}
		for i, n := range tc.nodes {
			all[i+1] = uint64(n.svc.FollowerReads())
		}
		t.Fatalf("follower reads served: node %d (the follower) %d, node %d (the primary) %d more; every node's count: %v",
			near, served, primary, tc.nodes[primary-1].svc.FollowerReads()-before, all)
	}
	if m := tc.metricsSum(t); m["follower_reads_served_total"] < float64(served) {
		t.Fatalf("follower_reads_served_total %v, want at least %d", m["follower_reads_served_total"], served)
	}
}
