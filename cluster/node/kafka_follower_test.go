package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/config"
)

// startKafkaRackCluster starts 3 nodes in racks a, b and c, each with a
// Kafka listener, and returns the cluster and the Kafka addresses.
func startKafkaRackCluster(t *testing.T) (*testCluster, []string, []string) {
	t.Helper()
	racks := []string{"a", "b", "c"}
	tc, kports := startKafkaCluster(t, func(c *config.Config) {
		c.Node.Rack = racks[c.Node.ID-1]
		for i := range c.Cluster.Nodes {
			c.Cluster.Nodes[i].Rack = racks[c.Cluster.Nodes[i].ID-1]
		}
	})
	return tc, kports, racks
}

// startKafkaCluster starts 3 nodes each serving Kafka on a free port
// (advertised in the roster), after edit, if any, changes their configs.
func startKafkaCluster(t *testing.T, edit func(*config.Config)) (*testCluster, []string) {
	t.Helper()
	kports := freePorts(t, 3)
	tc := startCluster(t, 3, func(c *config.Config) {
		c.Node.KafkaAddr = kports[c.Node.ID-1]
		for i := range c.Cluster.Nodes {
			c.Cluster.Nodes[i].KafkaAddr = kports[i]
		}
		if edit != nil {
			edit(c)
		}
	})
	return tc, kports
}

// kafkaCreateRetrying creates a topic through the Kafka port, retrying
// while the cluster's metadata primary is still being elected.
func kafkaCreateRetrying(t *testing.T, ctx context.Context, adm *kadm.Client, name string, parts int32, rf int16) {
	t.Helper()
	for {
		res, err := adm.CreateTopic(ctx, parts, rf, nil, name)
		if err == nil && res.Err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v %v", name, err, res.Err)
		}
		time.Sleep(50 * time.Millisecond) // retry pacing, not synchronisation
	}
}

// A franz-go consumer with client.rack (kgo.Rack, KIP-392) reads from
// the follower in its rack: Metadata names every broker's rack, the
// primary answers the first fetch with that follower as the preferred
// read replica, and the follower serves every record, those produced
// before the consumer started and those produced while it reads the
// tail (it counts them as follower reads; the other nodes count none).
func TestKafkaFollowerReadInTheRack(t *testing.T) {
	tc, kports, racks := startKafkaRackCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, kports))
	kafkaCreateRetrying(t, ctx, adm, "near", 1, 3)

	var primary, near int32
	clusterWait(t, 30*time.Second, "a leader and all three replicas in sync", func() bool {
		md, err := adm.Metadata(ctx, "near")
		if err != nil || len(md.Topics["near"].Partitions) != 1 {
			return false
		}
		p := md.Topics["near"].Partitions[0]
		if p.Err != nil || p.Leader < 1 || len(p.ISR) != 3 {
			return false
		}
		for _, b := range md.Brokers {
			if b.Rack == nil || *b.Rack != racks[b.NodeID-1] {
				t.Fatalf("metadata: broker %d in rack %v, want %q", b.NodeID, b.Rack, racks[b.NodeID-1])
			}
		}
		primary, near = p.Leader, p.Leader%3+1
		return true
	})
	raw := kafkaClient(t, kports)
	pr := kafkaClient(t, kports, kgo.DefaultProduceTopic("near"))
	want := map[string]bool{}
	for i := range 200 {
		v := fmt.Sprintf("r%03d", i)
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		want[v] = true
	}
	// The follower serves up to its own high watermark: wait until it
	// holds all 200, so the whole read can come from it.
	clusterWait(t, 30*time.Second, "the follower's high watermark at 200", func() bool {
		got := rackFetch(t, ctx, raw, near, racks[near-1])
		return got.ErrorCode == 0 && got.HighWatermark >= 200
	})
	var before [3]int64
	for i, n := range tc.nodes {
		before[i] = n.svc.FollowerReads()
	}

	cons := kafkaClient(t, kports, kgo.Rack(racks[near-1]),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"near": {0: kgo.NewOffset().AtStart()}}))
	for _, r := range consumeN(t, ctx, cons, 200) {
		if !want[string(r.Value)] {
			t.Fatalf("consumed %q, never produced or twice", r.Value)
		}
		delete(want, string(r.Value))
	}
	// At the tail: records produced while the consumer polls the
	// follower reach it once each, as the follower's high watermark
	// moves.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 200; i < 300; i++ {
			if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r%03d", i))}).FirstErr(); err != nil {
				if ctx.Err() == nil { // else the test has failed and returned
					t.Errorf("produce %d: %v", i, err)
				}
				return
			}
		}
	}()
	for i := 200; i < 300; i++ {
		want[fmt.Sprintf("r%03d", i)] = true
	}
	for _, r := range consumeN(t, ctx, cons, 100) {
		if !want[string(r.Value)] {
			t.Fatalf("consumed %q at the tail, never produced or twice", r.Value)
		}
		delete(want, string(r.Value))
	}
	<-produced
	for i, n := range tc.nodes {
		served := n.svc.FollowerReads() - before[i]
		if id := int32(i + 1); id == near && served == 0 || id != near && served != 0 {
			t.Fatalf("follower reads served: node %d %d (primary %d, the follower in rack %s is %d)",
				id, served, primary, racks[near-1], near)
		}
	}

	// The primary's answer to a fetch with the rack names the follower.
	got := rackFetch(t, ctx, raw, primary, racks[near-1])
	if got.ErrorCode != 0 || got.PreferredReadReplica != near || len(got.RecordBatches) != 0 {
		t.Fatalf("a fetch from rack %s to the primary %d: error %d, preferred read replica %d, %d record bytes; want %d and none",
			racks[near-1], primary, got.ErrorCode, got.PreferredReadReplica, len(got.RecordBatches), near)
	}
}

// rackFetch sends one Fetch (v12, or v13 by topic id: franz-go sends the
// highest version the node lists) for partition 0 of "near" from offset 0
// with rack_id rack to node id, and returns the partition's answer.
func rackFetch(t *testing.T, ctx context.Context, cl *kgo.Client, id int32, rack string) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.Rack = 12, 1<<20, rack
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "near", topicIDOf(t, ctx, cl, "near")
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	raw, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}
