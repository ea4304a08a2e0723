package node

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
)

// AlterPartitionReassignments and ListPartitionReassignments through the
// Kafka port of a 3-node cluster (kadm): a move to a node that is down
// waits for it and is listed meanwhile with Kafka's replica sets (every
// replica, the one being added, the one being removed); a second target
// is REASSIGNMENT_IN_PROGRESS; a cancel ends the move; once the node is
// back the move completes and Metadata lists the new replicas; each bad
// assignment is Kafka's code, with nothing moved.
func TestKafkaReassignments(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := kafkaClient(t, kports)
	adm := kadm.NewClient(cl)
	kafkaCreateRetrying(t, ctx, adm, "warmup", 1, 3) // the controller is up
	create := kafkaAssignedTopic("mv", -1, -1, []int32{1, 2})
	req := createTopicsRequest(create)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %+v, %v", resp, err)
	}
	kafkaReplicas(t, ctx, adm, "mv", [][]int32{{1, 2}})

	alter := func(replicas []int32) (kadm.AlterPartitionAssignmentsResponse, error) {
		var r kadm.AlterPartitionAssignmentsReq
		r.Assign("mv", 0, replicas)
		res, err := adm.AlterPartitionAssignments(ctx, r)
		if err != nil {
			return kadm.AlterPartitionAssignmentsResponse{}, err
		}
		return res["mv"][0], nil
	}
	// The refusals, each with nothing moved.
	var bad kadm.AlterPartitionAssignmentsReq
	bad.Assign("mv", 5, []int32{1, 2})
	bad.Assign("nope", 0, []int32{1, 2})
	res, err := adm.AlterPartitionAssignments(ctx, bad)
	if err != nil || !errors.Is(res["mv"][5].Err, kerr.UnknownTopicOrPartition) || !errors.Is(res["nope"][0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown partitions: %+v, %v", res, err)
	}
	for _, c := range []struct {
		replicas []int32
		want     error
	}{
		{nil, kerr.NoReassignmentInProgress},
		{[]int32{}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 2, 3}, kerr.InvalidReplicaAssignment},
		{[]int32{3, 3}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 9}, kerr.InvalidReplicaAssignment},
	} {
		r, err := alter(c.replicas)
		if err != nil || !errors.Is(r.Err, c.want) || r.ErrMessage == "" {
			t.Fatalf("assign %v: %+v, %v; want %v with a message", c.replicas, r, err, c.want)
		}
	}
	if r, err := alter([]int32{1, 2}); err != nil || r.Err != nil {
		t.Fatalf("the current replicas: %+v, %v; want no error, as Kafka", r, err)
	}
	if l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"mv": {0: {}}}); err != nil || len(l) != 0 {
		t.Fatalf("list after the refusals: %+v, %v; want nothing moving", l, err)
	}

	// A move to node 3, which is down, waits for it.
	tc.stopNode(2)
	clusterWait(t, 30*time.Second, "the move to [1 3] started", func() bool {
		r, err := alter([]int32{1, 3})
		return err == nil && r.Err == nil
	})
	var listed kadm.ListPartitionReassignmentsResponse
	clusterWait(t, 30*time.Second, "the move listed", func() bool {
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"mv": {0: {}}, "warmup": {0: {}}})
		if err != nil || len(l) != 1 {
			return false
		}
		listed = l["mv"][0]
		return true
	})
	if !slices.Equal(listed.Replicas, []int32{1, 3, 2}) || !slices.Equal(listed.AddingReplicas, []int32{3}) || !slices.Equal(listed.RemovingReplicas, []int32{2}) {
		t.Fatalf("listed %+v; want replicas [1 3 2], adding [3], removing [2]", listed)
	}
	if r, err := alter([]int32{2, 1}); err != nil || !errors.Is(r.Err, kerr.ReassignmentInProgress) {
		t.Fatalf("a second target: %+v, %v; want REASSIGNMENT_IN_PROGRESS", r, err)
	}
	if r, err := alter(nil); err != nil || r.Err != nil {
		t.Fatalf("cancel: %+v, %v", r, err)
	}
	clusterWait(t, 30*time.Second, "the cancelled move gone", func() bool {
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"mv": {0: {}}})
		return err == nil && len(l) == 0
	})
	kafkaReplicas(t, ctx, adm, "mv", [][]int32{{1, 2}})

	// With node 3 back, the move completes.
	tc.startNode(2)
	tc.waitLoaded()
	clusterWait(t, 30*time.Second, "the move to [1 3] started again", func() bool {
		r, err := alter([]int32{1, 3})
		return err == nil && r.Err == nil
	})
	kafkaReplicas(t, ctx, adm, "mv", [][]int32{{1, 3}})
	clusterWait(t, 30*time.Second, "the completed move no longer listed", func() bool {
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"mv": {0: {}}})
		return err == nil && len(l) == 0
	})
}

// ElectLeaders and the reassignment APIs need the cluster permission, as
// Kafka's ALTER and DESCRIBE on the cluster: a user without it is
// answered CLUSTER_AUTHORIZATION_FAILED, and nothing moves.
func TestKafkaClusterOpsNeedClusterPermission(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		scramNode(c)
		withKafka(c)
	})
	waitUser(t, n.svc, "root", true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cls := scramClients{t: t, addr: n.KafkaAddr()}
	root := kadm.NewClient(cls.sha512("root", "rootpw"))
	kafkaCreate(t, ctx, root, "orders", 1, -1)
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: "app", Password: "apppw",
		Rules: []security.Rule{{Allow: true, Op: security.OpDescribe, Topic: "orders"}}}); err != nil {
		t.Fatal(err)
	}
	appCl := cls.sha512("app", "apppw")
	app := kadm.NewClient(appCl)

	if _, err := app.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {0: {}}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("elect: %v", err)
	}
	if _, err := app.ListPartitionReassignments(ctx, kadm.TopicsSet{"orders": {0: {}}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("list reassignments: %v", err)
	}
	var r kadm.AlterPartitionAssignmentsReq
	r.Assign("orders", 0, []int32{1})
	if _, err := app.AlterPartitionAssignments(ctx, r); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter assignments: %v", err)
	}
	// v0 of ElectLeaders has no top-level code: each partition says it.
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 0
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "orders", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := appCl.Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if er := resp.(*kmsg.ElectLeadersResponse); len(er.Topics) != 1 || er.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("elect v0: %+v", er)
	}
	// The administrator is answered.
	if res, err := root.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {0: {}}}); err != nil || !errors.Is(res["orders"][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("elect as root: %+v, %v", res, err)
	}
}
