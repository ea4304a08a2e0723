package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A 3-node cluster behind franz-go: the metadata names our primaries as
// leaders with our generations as leader epochs; an idempotent producer
// that keeps writing while the primary of a partition is stopped follows
// the new leader on its own, and every acknowledged record is consumed
// exactly once, none lost, none twice.
func TestKafkaClusterFailover(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, kports))
	kafkaCreateRetrying(t, ctx, adm, "fo", 3, 3)
	var leader0 int32
	clusterWait(t, 30*time.Second, "a leader for every partition", func() bool {
		md, err := adm.Metadata(ctx, "fo")
		if err != nil || len(md.Topics["fo"].Partitions) != 3 {
			return false
		}
		for _, p := range md.Topics["fo"].Partitions {
			if p.Err != nil || p.Leader < 1 || len(p.ISR) != 3 {
				return false
			}
			n := tc.nodes[p.Leader-1]
			view := n.view.Load().Topics["fo"]
			rt, _ := n.routes.Get(shardKey(view.ID, p.Partition))
			if p.LeaderEpoch != rt.Term || rt.Leader != p.Leader {
				return false
			}
			if p.Partition == 0 {
				leader0 = p.Leader
			}
		}
		return true
	})

	// A follower refuses a produce naming the leader and its address
	// (KIP-951), so a client moves without refreshing its metadata.
	follower := leader0%3 + 1
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 10, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "fo"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = kafkaOneBatch(t, "to a follower")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := kafkaClient(t, kports).Broker(int(follower)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ProduceResponse)
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode != kerr.NotLeaderForPartition.Code || got.CurrentLeader.LeaderID != leader0 ||
		len(resp.Brokers) != 1 || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != kports[leader0-1] {
		t.Fatalf("a produce to follower %d: %+v, brokers %+v", follower, got, resp.Brokers)
	}

	pr := kafkaClient(t, kports, kgo.DefaultProduceTopic("fo"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var mu sync.Mutex
	acked := map[string]bool{}
	produce := func(from, count int) {
		var wg sync.WaitGroup
		for i := from; i < from+count; i++ {
			wg.Add(1)
			v := fmt.Sprintf("v%05d", i)
			pr.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("produce %s: %v", v, err)
					return
				}
				mu.Lock()
				acked[v] = true
				mu.Unlock()
			})
			if i%50 == 0 {
				time.Sleep(5 * time.Millisecond) // spread the writes over the failover
			}
		}
		wg.Wait()
	}
	produce(0, 300)
	done := make(chan struct{})
	go func() {
		defer close(done)
		produce(300, 600)
	}()
	tc.stopNode(int(leader0 - 1))
	<-done
	if t.Failed() {
		t.FailNow()
	}

	alive := []string{}
	for i, n := range tc.nodes {
		if n != nil {
			alive = append(alive, kports[i])
		}
	}
	cons := kafkaClient(t, alive, kgo.ConsumeTopics("fo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for len(seen) < len(acked) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d acknowledged records", len(seen), len(acked))
		}
		for _, r := range fs.Records() {
			seen[string(r.Value)]++
		}
	}
	// Drain what is left to see duplicates.
	for {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cons.PollFetches(pctx)
		pcancel()
		recs := fs.Records()
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			seen[string(r.Value)]++
		}
	}
	for v := range acked {
		if seen[v] != 1 {
			t.Errorf("acknowledged %s consumed %d times", v, seen[v])
		}
	}
	if len(seen) != len(acked) || len(acked) != 900 {
		t.Fatalf("acknowledged %d, consumed %d distinct", len(acked), len(seen))
	}
}
