package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestE2EKafkaKillPrimary: three `corestream serve` processes behind
// franz-go's idempotent producer on their Kafka ports. The process
// leading partition 0 is killed with SIGKILL while records flow; the
// client follows the new leaders on its own, and every acknowledged
// record is consumed exactly once: none lost, none twice.
func TestE2EKafkaKillPrimary(t *testing.T) {
	c := startCluster(t, clusterOpts{nodes: 3})
	var kaddrs []string
	for _, n := range c.plan.Nodes {
		kaddrs = append(kaddrs, n.KafkaAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newClient := func(addrs []string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RetryTimeout(90 * time.Second),
			kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(newClient(kaddrs))
	const topic, partitions = "kill", 3
	waitUntil(t, clusterWaitTimeout, "the topic created with a leader per partition", func() (bool, string) {
		if res, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil && res.Err == nil {
			return false, err.Error()
		}
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Err != nil || p.Leader < 1 {
				return false, fmt.Sprintf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
			}
		}
		return len(md.Topics[topic].Partitions) == partitions, ""
	})

	pr := newClient(kaddrs, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var mu sync.Mutex
	acked := map[string]bool{}
	var failed error
	var wg sync.WaitGroup
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("r%07d", i)
			wg.Add(1)
			pr.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = fmt.Errorf("produce %s: %w", v, err)
					return
				}
				acked[v] = true
			})
			if i%100 == 99 {
				time.Sleep(time.Millisecond) // a steady flow, not one burst
			}
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	eventually(t, clusterWaitTimeout, "2,000 records acknowledged", func() bool { return count() >= 2000 })
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	victim := md.Topics[topic].Partitions[0].Leader
	before := count()
	c.kill(victim)
	t.Logf("killed node %d (leader of partition 0) with %d records acknowledged", victim, before)
	eventually(t, 2*clusterWaitTimeout, "2,000 more records acknowledged after the kill", func() bool { return count() >= before+2000 })
	close(stop)
	<-stopped
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}

	var alive []string
	for i, a := range kaddrs {
		if int32(i+1) != victim {
			alive = append(alive, a)
		}
	}
	cons := newClient(alive, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
	for { // what is left, to see duplicates
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		recs := cons.PollFetches(pctx).Records()
		pcancel()
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
	if len(seen) != len(acked) {
		t.Fatalf("acknowledged %d, consumed %d distinct", len(acked), len(seen))
	}
	t.Logf("%d records acknowledged, each consumed once", len(acked))
}
