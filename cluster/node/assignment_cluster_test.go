package node

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
)

// metaPrimaryNode is the running node that leads the metadata group,
// waited for.
func metaPrimaryNode(t *testing.T, tc *testCluster) *Node {
	t.Helper()
	var n *Node
	clusterWait(t, 30*time.Second, "a metadata primary", func() bool { n = tc.metaPrimary(t); return n != nil })
	return n
}

// assignedOn waits until every node's metadata lists want as topic's
// replica sets, and each partition's primary, as this node's routes show
// it, is one of its replicas with the whole set in sync (so the
// partition's group runs on exactly those nodes).
func assignedOn(t *testing.T, tc *testCluster, topic string, want [][]metadata.NodeID) {
	t.Helper()
	clusterWait(t, 30*time.Second, "the replica sets "+topic+" was given, in sync", func() bool {
		for _, n := range tc.nodes {
			tp := n.view.Load().Topics[topic]
			if tp == nil || !slices.EqualFunc(tp.Replicas, want, slices.Equal) {
				return false
			}
			for p, set := range want {
				rt, ok := n.routes.Get(shardKey(tp.ID, int32(p)))
				if !ok || !slices.Contains(set, rt.Leader) {
					return false
				}
				in := slices.Sorted(slices.Values(rt.InSync))
				if !slices.Equal(in, slices.Sorted(slices.Values(set))) {
					return false
				}
			}
		}
		return true
	})
}

// A topic created with a manual replica assignment on three nodes has
// exactly the replica sets given, on every node, each partition's group
// running on its set; partitions added with one get theirs; a set naming
// a node outside the roster, or one longer than the roster (so a node
// twice), is INVALID_REPLICA_ASSIGNMENT naming the partition and node, as
// Kafka answers, and nothing is created.
func TestClusterManualAssignment(t *testing.T) {
	tc := startCluster(t, 3, nil)
	want := [][]metadata.NodeID{{3, 1}, {2, 3}, {1, 2}}
	var res service.CreateTopicResult
	clusterWait(t, 30*time.Second, "the create accepted", func() bool {
		n := metaPrimaryNode(t, tc)
		var err error
		res, err = await(func(done func(service.CreateTopicResult, error)) {
			n.svc.CreateTopic(nil, &service.CreateTopicRequest{Name: "hand",
				Assignment: [][]int32{{3, 1}, {2, 3}, {1, 2}}, Timeout: 20 * time.Second}, done)
		})
		if err != nil && !errors.Is(err, service.ErrNotMetadataPrimary) && !errors.Is(err, service.ErrMetadataNotReady) {
			t.Fatalf("create: %v", err)
		}
		return err == nil
	})
	if res.Partitions != 3 || res.ReplicationFactor != 2 {
		t.Fatalf("created %d partitions of factor %d; want 3 of 2", res.Partitions, res.ReplicationFactor)
	}
	assignedOn(t, tc, "hand", want)

	n := metaPrimaryNode(t, tc)
	total, err := await(func(done func(int32, error)) {
		n.svc.AddPartitions(nil, &service.AddPartitionsRequest{Name: "hand", Partitions: 5,
			Assignment: [][]int32{{1, 3}, {3, 2}}, Timeout: 20 * time.Second}, done)
	})
	if err != nil || total != 5 {
		t.Fatalf("add partitions: %d %v", total, err)
	}
	assignedOn(t, tc, "hand", append(want, []metadata.NodeID{1, 3}, []metadata.NodeID{3, 2}))

	for _, bad := range []struct {
		name   string
		assign [][]int32
		says   string
	}{
		{"unknown node", [][]int32{{1, 2}, {2, 4}}, "partition 1 names node 4, which is not in the roster"},
		{"longer than the roster", [][]int32{{1, 2, 3, 1}}, "partition 0 lists node 1 twice"},
		{"uneven", [][]int32{{1, 2}, {3}}, "partition 1 lists 1 replicas"},
	} {
		_, err := await(func(done func(service.CreateTopicResult, error)) {
			n.svc.CreateTopic(nil, &service.CreateTopicRequest{Name: "bad", Assignment: bad.assign}, done)
		})
		if !errors.Is(err, service.ErrInvalidReplicaAssignment) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: %v; want INVALID_REPLICA_ASSIGNMENT saying %q", bad.name, err, bad.says)
		}
	}
	_, err = await(func(done func(int32, error)) {
		n.svc.AddPartitions(nil, &service.AddPartitionsRequest{Name: "hand", Partitions: 7,
			Assignment: [][]int32{{1, 2}}}, done)
	})
	if !errors.Is(err, service.ErrInvalidReplicaAssignment) || !strings.Contains(err.Error(), "2 partitions added (5 to 7), but the assignment lists 1") {
		t.Errorf("add with too few sets: %v", err)
	}
	for _, node := range tc.nodes {
		if v := node.view.Load(); v.Topics["bad"] != nil || v.Topics["hand"].Partitions() != 5 {
			t.Errorf("node %d: a refused request changed the topics", node.self)
		}
	}
}
