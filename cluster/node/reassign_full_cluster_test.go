package node

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio/wire"
)

// TestClusterReassignWholeTopicToNewNodes is the full-size move:
// every replica of a 12-partition factor-3 topic moves from nodes 1-3 to
// nodes 4-6 of a 6-node cluster (node i+3 takes node i's place, so each
// preferred primary follows) while an idempotent producer writes one
// record at a time: nothing acknowledged is lost, and nodes 1-3 hold
// nothing of the topic afterwards.
func TestClusterReassignWholeTopicToNewNodes(t *testing.T) {
	const parts = 12
	tc := startCluster(t, 6, nil)
	ctx, cl := tc.dial(t, 300*time.Second)
	// Nodes 4-6 are draining while the topic is created, so placement
	// puts it on 1-3 (stopping them would take the metadata group's
	// quorum: it spans all six).
	for id := int32(4); id <= 6; id++ {
		if _, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignDrain, Node: id}); err != nil {
			t.Fatal(err)
		}
	}
	createTopic(t, ctx, cl, client.TopicSpec{Name: "full", Partitions: parts, ReplicationFactor: 3})
	for id := int32(4); id <= 6; id++ {
		if _, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignUndrain, Node: id}); err != nil {
			t.Fatal(err)
		}
	}
	plan := &wire.ReassignRequest{Action: wire.ReassignStart}
	targets := make([][]metadata.NodeID, parts)
	for p := range parts {
		reps, _ := replicasOf(tc.nodes[0], "full", p)
		for _, id := range reps {
			if id > 3 {
				t.Fatalf("full/%d was placed on node %d: %v", p, id, reps)
			}
			targets[p] = append(targets[p], id+3)
		}
		plan.Moves = append(plan.Moves, wire.ReassignMove{Topic: "full", Partition: int32(p), Replicas: int32s(targets[p])})
	}

	load := startSteadyLoad(ctx, cl, "full", 1<<18)
	clusterWait(t, 30*time.Second, "the producer under way", func() bool { return len(load.acks) >= 200 })
	began := time.Now()
	if _, err := cl.Reassign(ctx, plan); err != nil {
		t.Fatal(err)
	}
	clusterWait(t, 240*time.Second, "every move complete on every node", func() bool {
		for p := range parts {
			for _, n := range tc.nodes {
				if reps, moving := replicasOf(n, "full", p); moving || fmt.Sprint(reps) != fmt.Sprint(targets[p]) {
					return false
				}
			}
		}
		return true
	})
	took := time.Since(began)
	clusterWait(t, 30*time.Second, "nodes 1-3 to close their replicas of the topic", func() bool {
		for i := range 3 {
			n := tc.nodes[i]
			tp := n.view.Load().Topics["full"]
			for _, h := range n.hosts {
				for p := range parts {
					if h.Get(shardKey(tp.ID, int32(p))) != nil {
						return false
					}
				}
			}
		}
		return true
	})
	n0 := len(load.acks)
	clusterWait(t, 30*time.Second, "the producer past the moves", func() bool { return len(load.acks) >= n0+100 })
	if err := load.stop(); err != nil {
		t.Fatal(err)
	}
	count := checkAckedRead(t, ctx, cl, "full", parts, load.acks)
	var during []time.Duration
	for _, s := range load.lat {
		if !s.at.Before(began) && s.at.Before(began.Add(took)) {
			during = append(during, s.d)
		}
	}
	sort.Slice(during, func(i, j int) bool { return during[i] < during[j] })
	var p50, p99 time.Duration
	if len(during) > 0 {
		p50, p99 = during[len(during)/2], during[len(during)*99/100]
	}
	t.Logf("%d partitions x 3 replicas moved from nodes 1-3 to 4-6 in %v; %d records acknowledged and read back; produce during the moves: %d records, p50 %v, p99 %v",
		parts, took, count, len(during), p50, p99)
}
