package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaAssignedTopic is a CreateTopics topic with a manual replica
// assignment, set i for partition i, and the given count and factor
// (Kafka's clients send -1 and -1 with an assignment).
func kafkaAssignedTopic(name string, parts int32, rf int16, sets ...[]int32) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, parts, rf
	for i, s := range sets {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), s
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	return t
}

// kafkaReplicas waits until Metadata, read with kadm, lists want as
// topic's replica sets, each partition's leader one of its replicas.
func kafkaReplicas(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, want [][]int32) {
	t.Helper()
	var got [][]int32
	defer func() {
		if t.Failed() {
			t.Logf("%s's replica sets last listed: %v; want %v", topic, got, want)
		}
	}()
	clusterWait(t, 30*time.Second, topic+"'s replica sets through Kafka", func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		got = got[:0]
		ok := true
		for i, p := range md.Topics[topic].Partitions.Sorted() {
			got = append(got, p.Replicas)
			ok = ok && i < len(want) && slices.Equal(p.Replicas, want[i]) && slices.Contains(want[i], p.Leader)
		}
		return ok && len(got) == len(want)
	})
}

// Through the Kafka port of a 3-node cluster: CreateTopics and
// CreatePartitions with manual replica assignments (as Kafka's tools send
// them) place the replicas as given, which Metadata (kadm) then lists;
// validate_only checks one and creates nothing; each refusal is Kafka's
// code for it, per topic, the other topics of the request served.
func TestKafkaManualAssignment(t *testing.T) {
	_, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := kafkaClient(t, kports)
	adm := kadm.NewClient(cl)
	kafkaCreateRetrying(t, ctx, adm, "placed", 1, 3) // the controller is up

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		kafkaAssignedTopic("hand", -1, -1, []int32{3, 1}, []int32{2, 3}, []int32{1, 2}),
		kafkaAssignedTopic("with-factor", -1, 2, []int32{1, 2}),
		kafkaAssignedTopic("with-count", 1, -1, []int32{1, 2}),
		kafkaAssignedTopic("unknown-node", -1, -1, []int32{1, 2}, []int32{2, 7}),
		kafkaAssignedTopic("too-long", -1, -1, []int32{1, 2, 3, 1}),
		kafkaAssignedTopic("uneven", -1, -1, []int32{1, 2}, []int32{3}),
		kafkaAssignedTopic("empty-set", -1, -1, []int32{}),
	}
	twice := kafkaAssignedTopic("twice", -1, -1, []int32{1}, []int32{2})
	twice.ReplicaAssignment[1].Partition = 0
	req.Topics = append(req.Topics, twice)
	// Kafka checks the configs before the assignment.
	cfgFirst := kafkaAssignedTopic("config-first", -1, 2, []int32{1, 2})
	cfgFirst.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "colour", Value: kmsg.StringPtr("blue")}}
	req.Topics = append(req.Topics, cfgFirst)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		code *kerr.Error
		says string
	}{
		"hand":         {nil, ""},
		"with-factor":  {kerr.InvalidRequest, "replication factor was not set to -1"},
		"with-count":   {kerr.InvalidRequest, "numPartitions was not set to -1"},
		"unknown-node": {kerr.InvalidReplicaAssignment, "partition 1 names node 7, which is not in the roster"},
		"too-long":     {kerr.InvalidReplicaAssignment, "partition 0 lists node 1 twice"},
		"uneven":       {kerr.InvalidReplicaAssignment, "partition 1 lists 1 replicas"},
		"empty-set":    {kerr.InvalidReplicaAssignment, "partition 0 has an empty replica list"},
		"twice":        {kerr.InvalidReplicaAssignment, "multiple manual partition assignments for partition 0"},
		"config-first": {kerr.InvalidConfig, "colour"},
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d topics answered, %d asked", len(resp.Topics), len(want))
	}
	for _, rt := range resp.Topics {
		w := want[rt.Topic]
		msg := ""
		if rt.ErrorMessage != nil {
			msg = *rt.ErrorMessage
		}
		switch {
		case w.code == nil && (rt.ErrorCode != 0 || rt.NumPartitions != 3 || rt.ReplicationFactor != 2):
			t.Errorf("%s: code %d (%s), %d partitions of factor %d; want 3 of 2", rt.Topic, rt.ErrorCode, msg, rt.NumPartitions, rt.ReplicationFactor)
		case w.code != nil && (rt.ErrorCode != w.code.Code || !strings.Contains(msg, w.says)):
			t.Errorf("%s: code %d %q; want %s saying %q", rt.Topic, rt.ErrorCode, msg, w.code.Message, w.says)
		}
	}
	kafkaReplicas(t, ctx, adm, "hand", [][]int32{{3, 1}, {2, 3}, {1, 2}})

	// validate_only plans an assignment and creates nothing.
	vreq := kmsg.NewPtrCreateTopicsRequest()
	vreq.ValidateOnly, vreq.Topics = true, []kmsg.CreateTopicsRequestTopic{kafkaAssignedTopic("dry", -1, -1, []int32{2})}
	vresp, err := vreq.RequestWith(ctx, cl)
	if err != nil || vresp.Topics[0].ErrorCode != 0 || vresp.Topics[0].NumPartitions != 1 || vresp.Topics[0].ReplicationFactor != 1 {
		t.Fatalf("validate only: %+v %v", vresp, err)
	}

	// CreatePartitions: one set per new partition, of the topic's factor;
	// an empty list (not null) assigns none of them, refused as by Kafka.
	for _, tc := range []struct {
		topic string
		count int32
		sets  [][]int32
		code  int16
		says  string
	}{
		{"hand", 5, [][]int32{{1, 3}, {3, 2}}, 0, ""},
		{"placed", 3, [][]int32{{1, 2, 3}}, kerr.InvalidReplicaAssignment.Code, "2 partitions added (1 to 3), but the assignment lists 1"},
		{"placed", 2, [][]int32{{1, 2}}, kerr.InvalidReplicaAssignment.Code, "partition 1 lists 2 replicas, but the topic's replication factor is 3"},
		{"placed", 2, [][]int32{}, kerr.InvalidReplicaAssignment.Code, "an empty list"},
	} {
		preq := kmsg.NewPtrCreatePartitionsRequest()
		preq.TimeoutMillis = 20000
		pt := kmsg.NewCreatePartitionsRequestTopic()
		pt.Topic, pt.Count, pt.Assignment = tc.topic, tc.count, []kmsg.CreatePartitionsRequestTopicAssignment{}
		for _, s := range tc.sets {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = s
			pt.Assignment = append(pt.Assignment, a)
		}
		preq.Topics = append(preq.Topics, pt)
		presp, err := preq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		rt := presp.Topics[0]
		msg := ""
		if rt.ErrorMessage != nil {
			msg = *rt.ErrorMessage
		}
		if rt.ErrorCode != tc.code || !strings.Contains(msg, tc.says) {
			t.Errorf("create partitions %s to %d with %v: code %d %q; want %d saying %q", tc.topic, tc.count, tc.sets, rt.ErrorCode, msg, tc.code, tc.says)
		}
	}
	kafkaReplicas(t, ctx, adm, "hand", [][]int32{{3, 1}, {2, 3}, {1, 2}, {1, 3}, {3, 2}})
	// A topic named twice in one request is answered once,
	// INVALID_REQUEST, and nothing is done for it, as by Kafka's
	// controller; the other topics are served.
	dreq := kmsg.NewPtrCreateTopicsRequest()
	dreq.TimeoutMillis = 20000
	dreq.Topics = []kmsg.CreateTopicsRequestTopic{kafkaAssignedTopic("twin", -1, -1, []int32{1}),
		kafkaAssignedTopic("single", -1, -1, []int32{2}), kafkaAssignedTopic("twin", -1, -1, []int32{3})}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Topics) != 2 || dresp.Topics[0].Topic != "twin" || dresp.Topics[0].ErrorCode != kerr.InvalidRequest.Code ||
		dresp.Topics[1].Topic != "single" || dresp.Topics[1].ErrorCode != 0 {
		t.Errorf("create with a topic twice: %+v", dresp.Topics)
	}
	preq := kmsg.NewPtrCreatePartitionsRequest()
	preq.TimeoutMillis = 20000
	for _, count := range []int32{2, 3} {
		pt := kmsg.NewCreatePartitionsRequestTopic()
		pt.Topic, pt.Count = "single", count
		preq.Topics = append(preq.Topics, pt)
	}
	presp, err := preq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(presp.Topics) != 1 || presp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("create partitions with a topic twice: %+v", presp.Topics)
	}

	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(td) != 3 || len(td["placed"].Partitions) != 1 || len(td["single"].Partitions) != 1 || td.Has("twin") {
		t.Fatalf("refused requests changed the topics: %v", td.Names())
	}
}
