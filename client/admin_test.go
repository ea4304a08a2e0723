package client_test

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

func TestAdminTopicLifecycle(t *testing.T) {
	e := newEnv(t, 3, nil)
	resp, err := e.c.CreateTopic(e.ctx, client.TopicSpec{Name: "orders", Partitions: 4, ReplicationFactor: 2,
		Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil || resp.Partitions != 4 || resp.ReplicationFactor != 2 || resp.TopicID.IsZero() {
		t.Fatalf("create: %+v, %v", resp, err)
	}
	if _, err := e.c.CreateTopic(e.ctx, client.TopicSpec{Name: "orders", Partitions: 1}); !errors.Is(err, wire.ErrTopicAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := e.c.CreateTopic(e.ctx, client.TopicSpec{Name: "bad name", Partitions: 1}); !errors.Is(err, wire.ErrInvalidTopicName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := e.c.CreateTopic(e.ctx, client.TopicSpec{Name: "wide", Partitions: 1, ReplicationFactor: 4}); !errors.Is(err, wire.ErrInvalidReplicationFactor) {
		t.Fatalf("rf 4 of 3 nodes: %v", err)
	}
	if n, err := e.c.Partitions(e.ctx, "orders"); err != nil || n != 4 {
		t.Fatalf("the cache was not refreshed after create: %d, %v", n, err)
	}
	topics, err := e.c.ListTopics(e.ctx)
	if err != nil || len(topics) != 1 || topics[0].Name != "orders" || topics[0].ID != resp.TopicID {
		t.Fatalf("list: %+v, %v", topics, err)
	}
	d, err := e.c.DescribeTopic(e.ctx, "orders")
	if err != nil || len(d.Topic.Partitions) != 4 || len(d.Configs) != 1 || d.Configs[0].Key != "retention.ms" {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	if n, err := e.c.AddPartitions(e.ctx, "orders", 6); err != nil || n != 6 {
		t.Fatalf("add partitions: %d, %v", n, err)
	}
	if _, err := e.c.AddPartitions(e.ctx, "orders", 6); !errors.Is(err, wire.ErrInvalidPartitions) {
		t.Fatalf("add partitions again: %v", err)
	}
	id, err := e.c.DeleteTopic(e.ctx, "orders")
	if err != nil || id != resp.TopicID {
		t.Fatalf("delete: %v, %v", id, err)
	}
	if _, err := e.c.DescribeTopic(e.ctx, "orders"); !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("describe deleted: %v", err)
	}
}

func TestAdminClusterAndPartitions(t *testing.T) {
	e := newEnv(t, 3, map[string]int32{"t": 6})
	st, err := e.c.ClusterStatus(e.ctx)
	if err != nil || len(st.Nodes) != 3 || st.Partitions != 6 || st.MetadataPrimaryID != 1 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	for _, n := range st.Nodes {
		if n.Primaries != 2 || !n.Alive {
			t.Fatalf("node %d: %+v", n.ID, n)
		}
	}
	dp, err := e.c.DescribePartition(e.ctx, "t", 4)
	if err != nil || dp.Route.PrimaryID != 2 || len(dp.Replicas) != 3 {
		t.Fatalf("describe partition: %+v, %v", dp, err)
	}
	mv, err := e.c.MovePrimary(e.ctx, "t", 4, 3)
	if err != nil || mv.PrimaryID != 3 || mv.Generation != 2 {
		t.Fatalf("move primary: %+v, %v", mv, err)
	}
	if _, err := e.c.DescribePartition(e.ctx, "t", 4); err != nil {
		t.Fatalf("describe after move: %v", err)
	}
	plan, err := e.c.Rebalance(e.ctx, true, 0)
	if err != nil || plan.Started || len(plan.Moves) != 1 || plan.Moves[0].ToNode != 2 {
		t.Fatalf("dry run: %+v, %v", plan, err)
	}
	plan, err = e.c.Rebalance(e.ctx, false, 0)
	if err != nil || !plan.Started {
		t.Fatalf("rebalance: %+v, %v", plan, err)
	}
	if n, _, _ := e.fc.Primary("t", 4); n != 2 {
		t.Fatalf("primary of t/4 is %d after rebalance", n)
	}
	md, err := e.c.Metadata(e.ctx)
	if err != nil || len(md.Nodes) != 3 || len(md.Topics) != 1 {
		t.Fatalf("metadata: %+v, %v", md, err)
	}
}
