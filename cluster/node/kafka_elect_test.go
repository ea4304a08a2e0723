package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/service"
)

// kafkaLeader is partition p of topic's leader as Metadata lists it (-1:
// none, or not listed).
func kafkaLeader(ctx context.Context, adm *kadm.Client, topic string, p int32) int32 {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return -1
	}
	pm, ok := md.Topics[topic].Partitions[p]
	if !ok || pm.Err != nil {
		return -1
	}
	return pm.Leader
}

// createTopicsRequest is a CreateTopics request of topics, with a
// timeout that lets a cluster's controller answer.
func createTopicsRequest(topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis, req.Topics = 20000, topics
	return req
}

// ElectLeaders through the Kafka port of a 3-node cluster whose balancer
// is off: a partition led away from its preferred replica is led by it
// again after a PREFERRED election (kadm), a second one is
// ELECTION_NOT_NEEDED, as is an UNCLEAN one of a partition with a
// primary; an unknown partition is UNKNOWN_TOPIC_OR_PARTITION; every
// partition asked for (null) leaves out those that need nothing.
func TestKafkaElectLeaders(t *testing.T) {
	tc, kports := startKafkaCluster(t, func(c *config.Config) { c.Cluster.AutoLeaderRebalance = false })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := kafkaClient(t, kports)
	adm := kadm.NewClient(cl)
	kafkaCreateRetrying(t, ctx, adm, "warmup", 1, 3) // the controller is up
	resp, err := createTopicsRequest(kafkaAssignedTopic("pref", -1, -1, []int32{1, 2, 3}, []int32{2, 3, 1})).RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %+v, %v", resp, err)
	}
	kafkaReplicas(t, ctx, adm, "pref", [][]int32{{1, 2, 3}, {2, 3, 1}})
	clusterWait(t, 30*time.Second, "pref/0 led by node 1, every replica in sync", func() bool {
		md, err := adm.Metadata(ctx, "pref")
		p := md.Topics["pref"].Partitions[0]
		return err == nil && p.Leader == 1 && len(p.ISR) == 3
	})
	// Lead pref/0 away from its preferred replica.
	clusterWait(t, 30*time.Second, "pref/0 moved to node 3", func() bool {
		n := metaPrimaryNode(t, tc)
		_, err := await(func(done func(service.MovePrimaryResult, error)) {
			n.svc.MovePrimary(nil, &service.MovePrimaryRequest{Topic: "pref", Partition: 0, TargetNodeID: 3, Timeout: 10 * time.Second}, done)
		})
		return err == nil && kafkaLeader(ctx, adm, "pref", 0) == 3
	})

	// Every partition asked for: pref/0 is moved back, the others need
	// nothing and are left out.
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res["pref"][0]; !ok || r.Err != nil || len(res) != 1 || len(res["pref"]) != 1 {
		t.Fatalf("elect every partition: %+v; want pref/0 alone, elected", res)
	}
	clusterWait(t, 30*time.Second, "pref/0 led by its preferred replica again", func() bool { return kafkaLeader(ctx, adm, "pref", 0) == 1 })

	named := kadm.TopicsSet{"pref": {0: {}, 1: {}, 7: {}}}
	res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, named)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]error{0: kerr.ElectionNotNeeded, 1: kerr.ElectionNotNeeded, 7: kerr.UnknownTopicOrPartition} {
		if r := res["pref"][p]; !errors.Is(r.Err, want) || r.ErrMessage == "" {
			t.Fatalf("preferred election of pref/%d: %v (%q), want %v", p, r.Err, r.ErrMessage, want)
		}
	}
	res, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{"pref": {0: {}}})
	if err != nil || !errors.Is(res["pref"][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean election of a partition with a primary: %+v, %v", res, err)
	}
	if l := kafkaLeader(ctx, adm, "pref", 0); l != 1 {
		t.Fatalf("pref/0 is led by %d after the elections that were not needed, want 1", l)
	}

	// pref/1's preferred replica, node 2, stopped: once another replica
	// leads, its election is PREFERRED_LEADER_NOT_AVAILABLE.
	tc.stopNode(1)
	clusterWait(t, 60*time.Second, "pref/1 led by another replica", func() bool {
		l := kafkaLeader(ctx, adm, "pref", 1)
		return l > 0 && l != 2
	})
	clusterWait(t, 30*time.Second, "the election of pref/1 refused", func() bool {
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"pref": {1: {}}})
		return err == nil && errors.Is(res["pref"][1].Err, kerr.PreferredLeaderNotAvailable)
	})
	if l := kafkaLeader(ctx, adm, "pref", 1); l == 2 || l <= 0 {
		t.Fatalf("pref/1 is led by %d after the refused election", l)
	}
}
