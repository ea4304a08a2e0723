package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	metrics "github.com/rcrowley/go-metrics"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// sarama (github.com/IBM/sarama), unchanged, against a real node: its
// cluster admin creates a topic of three partitions, lists and deletes
// it; its synchronous producer writes; its consumer group reads and
// commits, a second member joins and the group shares the partitions,
// and the group lags 0 after. Once with sarama's default protocol
// version (Kafka 2.8) and once with Kafka 3.9's.
func TestE2ESarama(t *testing.T) {
	addrs, err := launch.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	startServer(t, serverOpts{kafkaAddr: addrs[0]})
	// sarama's metrics start a process-wide goroutine that never ends
	// (the package's leak check would fail); the test reads none.
	metrics.UseNilMetrics = true
	for _, v := range []sarama.KafkaVersion{sarama.DefaultVersion, sarama.V3_9_0_0} {
		t.Run(v.String(), func(t *testing.T) { saramaRun(t, addrs, v) })
	}
}

func saramaRun(t *testing.T, brokers []string, v sarama.KafkaVersion) {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "corestream-e2e"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false // commits by hand, each checked
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Metadata.Retry.Max = 10
	topic, group := "sarama-"+v.String(), "sarama-g-"+v.String()

	adm, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatalf("NewClusterAdmin: %v", err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	eventually(t, 20*time.Second, topic+" listed with 3 partitions", func() bool {
		ts, err := adm.ListTopics()
		return err == nil && ts[topic].NumPartitions == 3
	})

	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer client.Close()
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatalf("NewSyncProducer: %v", err)
	}
	defer prod.Close()
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)),
				Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))}); err != nil {
				t.Fatalf("SendMessage %d: %v", i, err)
			}
		}
	}
	produce(0, 30)

	// The group: every record consumed once the members are done.
	var mu sync.Mutex
	seen := map[string]int{}
	claims := map[string][]int32{} // member → the partitions it was given last
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	member := func(name string) (stop func()) {
		cg, err := sarama.NewConsumerGroup(brokers, group, cfg)
		if err != nil {
			t.Fatalf("NewConsumerGroup: %v", err)
		}
		mctx, mcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			h := &saramaHandler{name: name, mu: &mu, seen: seen, claims: claims}
			for mctx.Err() == nil {
				if err := cg.Consume(mctx, []string{topic}, h); err != nil && mctx.Err() == nil {
					t.Errorf("%s: Consume: %v", name, err)
					return
				}
			}
		}()
		return func() {
			mcancel()
			<-done
			if err := cg.Close(); err != nil {
				t.Errorf("%s: Close: %v", name, err)
			}
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	stop1 := member("m1")
	eventually(t, 30*time.Second, "the first member consuming the 30 records", func() bool { return count() == 30 })
	stop2 := member("m2")
	eventually(t, 30*time.Second, "the two members sharing the 3 partitions", func() bool {
		mu.Lock()
		defer mu.Unlock()
		a, b := claims["m1"], claims["m2"]
		all := append(slices.Clone(a), b...)
		slices.Sort(all)
		return len(a) > 0 && len(b) > 0 && slices.Equal(all, []int32{0, 1, 2})
	})
	produce(30, 30)
	eventually(t, 30*time.Second, "the group consuming the 30 more", func() bool { return count() == 60 })
	stop2()
	stop1()
	mu.Lock()
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s consumed %d times", k, n)
		}
	}
	mu.Unlock()

	// Lag 0: the committed offsets are the partitions' ends.
	offs, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
	if err != nil {
		t.Fatalf("ListConsumerGroupOffsets: %v", err)
	}
	var total int64
	for p := int32(0); p < 3; p++ {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("GetOffset %d: %v", p, err)
		}
		b := offs.GetBlock(topic, p)
		if b == nil || b.Err != sarama.ErrNoError || b.Offset != end {
			t.Errorf("partition %d: committed %+v, end %d", p, b, end)
		}
		total += end
	}
	if total != 60 {
		t.Errorf("the partitions end at %d records in all, want 60", total)
	}
	groups, err := adm.ListConsumerGroups()
	if err != nil || groups[group] == "" {
		t.Errorf("ListConsumerGroups: %v, %v", groups, err)
	}

	if err := adm.DeleteTopic(topic); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	eventually(t, 20*time.Second, topic+" gone from the listing", func() bool {
		ts, err := adm.ListTopics()
		_, listed := ts[topic]
		return err == nil && !listed
	})
}

// saramaHandler consumes a claim, counting each record and committing
// its offset synchronously.
type saramaHandler struct {
	name   string
	mu     *sync.Mutex
	seen   map[string]int
	claims map[string][]int32
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ps := range s.Claims() {
		h.claims[h.name] = slices.Clone(ps)
	}
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.seen[string(m.Key)]++
		h.mu.Unlock()
		s.MarkMessage(m, "")
		s.Commit()
	}
	return nil
}
