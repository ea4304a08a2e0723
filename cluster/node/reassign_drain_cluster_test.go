package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio/wire"
)

// drainOf lists the metadata primary's view of node id's drain.
func drainOf(t *testing.T, cl *client.Client, id int32) (wire.DrainStatus, bool) {
	t.Helper()
	resp, err := cl.Reassign(t.Context(), &wire.ReassignRequest{Action: wire.ReassignList})
	if err != nil {
		return wire.DrainStatus{}, false
	}
	for _, d := range resp.Drains {
		if d.Node == id {
			return d, true
		}
	}
	return wire.DrainStatus{}, false
}

// TestClusterDrainUnderProduce drains node 1 of a 4-node cluster while an
// idempotent producer writes: the node ends with no replica and no
// primary, nothing acknowledged is lost, a topic created meanwhile avoids
// it, and the refusals name what is wrong.
func TestClusterDrainUnderProduce(t *testing.T) {
	const parts = 8
	tc := startCluster(t, 4, nil)
	ctx, cl := tc.dial(t, 240*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "drain", Partitions: parts, ReplicationFactor: 3})
	on1 := 0
	for p := range parts {
		if reps, _ := replicasOf(tc.nodes[0], "drain", p); slices.Contains(reps, 1) {
			on1++
		}
	}
	if on1 == 0 {
		t.Fatal("node 1 holds no replica to drain")
	}
	refused := []struct {
		req  wire.ReassignRequest
		text string
	}{
		{wire.ReassignRequest{Action: wire.ReassignDrain, Node: 9}, "node 9 is not in the roster"},
		{wire.ReassignRequest{Action: wire.ReassignReplace, Node: 1, Replacement: 1}, "cannot replace itself"},
		{wire.ReassignRequest{Action: wire.ReassignReplace, Node: 1}, "replace names no new node"},
		{wire.ReassignRequest{Action: wire.ReassignUndrain, Node: 2}, "not draining"},
	}
	for _, r := range refused {
		if _, err := cl.Reassign(ctx, &r.req); err == nil || !strings.Contains(err.Error(), r.text) {
			t.Fatalf("%+v: %v, want an error with %q", r.req, err, r.text)
		}
	}

	load := startSteadyLoad(ctx, cl, "drain", 1<<18)
	clusterWait(t, 30*time.Second, "the producer under way", func() bool { return len(load.acks) >= 200 })
	began := time.Now()
	if _, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignDrain, Node: 1}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		node int32
		text string
	}{{1, "node 1 has been draining since"}, {2, "leaves 2 nodes not draining, and topic drain keeps 3 copies"}} {
		if _, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignDrain, Node: r.node}); err == nil || !strings.Contains(err.Error(), r.text) {
			t.Fatalf("drain node %d while node 1 drains: %v, want %q", r.node, err, r.text)
		}
	}
	// Placement avoids the draining node.
	createTopic(t, ctx, cl, client.TopicSpec{Name: "placed", Partitions: 4, ReplicationFactor: 3})
	for p := range 4 {
		if reps, _ := replicasOf(tc.nodes[1], "placed", p); slices.Contains(reps, 1) {
			t.Fatalf("placed/%d went to the draining node: %v", p, reps)
		}
	}
	var st wire.DrainStatus
	clusterWait(t, 180*time.Second, "node 1 drained", func() bool {
		var ok bool
		st, ok = drainOf(t, cl, 1)
		return ok && st.Done
	})
	took := time.Since(began)
	clusterWait(t, 30*time.Second, "every node's metadata without node 1", func() bool {
		for _, n := range tc.nodes {
			v := n.view.Load()
			for _, tp := range v.Sorted {
				for p, reps := range tp.Replicas {
					if len(reps) != 3 {
						t.Fatalf("node %d: %s/%d has replicas %v after the drain", n.self, tp.Name, p, reps)
					}
					if slices.Contains(reps, 1) {
						return false
					}
				}
			}
		}
		return true
	})
	cs, err := cl.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cs.Nodes {
		if n.ID == 1 && (!n.Draining || n.Replicas != 0 || n.Primaries != 0) {
			t.Fatalf("cluster status of node 1 after its drain: %+v", n)
		}
	}
	n0 := len(load.acks)
	clusterWait(t, 30*time.Second, "the producer past the drain", func() bool { return len(load.acks) >= n0+100 })
	if err := load.stop(); err != nil {
		t.Fatal(err)
	}
	count := checkAckedRead(t, ctx, cl, "drain", parts, load.acks)
	t.Logf("drained %d replicas of node 1 in %v under produce; %d records acknowledged and read back", on1, took, count)

	if _, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignUndrain, Node: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := drainOf(t, cl, 1); ok {
		t.Fatal("node 1 still draining after undrain")
	}
}

// TestClusterReplaceGoneNode replaces node 3, stopped for good, by node 4:
// node 4 takes node 3's place in every replica list (the order kept), and
// every record written before is there.
func TestClusterReplaceGoneNode(t *testing.T) {
	const parts = 4
	tc, ctx, cl, _ := startMoveCluster(t, parts, nil)
	want := produceAll(t, ctx, cl, "move", 0, 2000)
	before := make([][]metadata.NodeID, parts)
	for p := range parts {
		reps, _ := replicasOf(tc.nodes[0], "move", p)
		for _, id := range reps {
			if id == 3 {
				id = 4
			}
			before[p] = append(before[p], id)
		}
	}
	tc.stopNode(2)
	clusterWait(t, 30*time.Second, "node 3 seen down", func() bool {
		n := tc.metaPrimary(t)
		return n != nil && !n.alive(3)
	})
	if _, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignReplace, Node: 3, Replacement: 4}); err != nil {
		t.Fatal(err)
	}
	clusterWait(t, 180*time.Second, "node 4 in node 3's place everywhere", func() bool {
		for _, i := range []int{0, 1, 3} {
			for p := range parts {
				reps, moving := replicasOf(tc.nodes[i], "move", p)
				if moving || fmt.Sprint(reps) != fmt.Sprint(before[p]) {
					return false
				}
			}
		}
		st, ok := drainOf(t, cl, 3)
		return ok && st.Done && st.Replacement == 4
	})
	sameValues(t, consumeAll(t, ctx, cl, "move", parts), want)
}

// TestClusterDrainResumesAfterMetaFailover stops the metadata primary
// while a drain's moves run one at a time: the next metadata primary
// plans the rest from the metadata, the node ends holding nothing, and
// every record is there.
func TestClusterDrainResumesAfterMetaFailover(t *testing.T) {
	const parts = 6
	tc := startCluster(t, 4, func(c *config.Config) { c.Cluster.ReassignConcurrency = 1 })
	ctx, cl := tc.dial(t, 240*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "dr", Partitions: parts, ReplicationFactor: 3})
	want := produceAll(t, ctx, cl, "dr", 0, 1000)
	meta := tc.metaPrimary(t)
	if meta == nil {
		t.Fatal("no metadata primary")
	}
	node := int32(1)
	if meta.self == 1 {
		node = 2
	}
	held := func(n *Node) int {
		c := 0
		for p := range parts {
			if reps, _ := replicasOf(n, "dr", p); slices.Contains(reps, node) {
				c++
			}
		}
		return c
	}
	before := held(meta)
	if before < 2 {
		t.Fatalf("node %d holds %d replicas: too few to stop the drain half way", node, before)
	}
	if _, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignDrain, Node: node}); err != nil {
		t.Fatal(err)
	}
	clusterWait(t, 60*time.Second, "the drain's first move done", func() bool { return held(meta) < before })
	if held(meta) == 0 {
		t.Fatal("the whole drain finished before the metadata primary stopped: nothing to resume")
	}
	stopped := int(meta.self) - 1
	tc.stopNode(stopped)
	clusterWait(t, 60*time.Second, "a new metadata primary", func() bool { return tc.metaPrimary(t) != nil })
	tc.startNode(stopped)
	tc.waitLoaded()
	clusterWait(t, 120*time.Second, "the drain finished on every node", func() bool {
		for _, n := range tc.nodes {
			if held(n) != 0 {
				return false
			}
		}
		st, ok := drainOf(t, cl, node)
		return ok && st.Done
	})
	sameValues(t, consumeAll(t, ctx, cl, "dr", parts), want)
}
