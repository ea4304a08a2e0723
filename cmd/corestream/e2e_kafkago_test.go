package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// segmentio/kafka-go, unchanged, against a real node: its Client creates
// a topic of three partitions, lists it through Metadata and deletes it;
// its Writer produces (acks all); two Readers of one group share the
// partitions and commit each record (CommitMessages, synchronous), and
// the group lags 0 after (OffsetFetch against ListOffsets).
func TestE2EKafkaGo(t *testing.T) {
	addrs, err := launch.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	startServer(t, serverOpts{kafkaAddr: addrs[0]})
	addr := kafka.TCP(addrs[0])
	// A transport of the test's own, closed at its end: the default one
	// keeps its connection pools for the process's life.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: addr, Timeout: 10 * time.Second, Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, group = "kgo-orders", "kgo-group"

	cr, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}}})
	if err != nil || cr.Errors[topic] != nil {
		t.Fatalf("CreateTopics: %v, %v", err, cr)
	}
	listed := func() (int, bool) {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
		if err != nil {
			return 0, false
		}
		for _, tp := range md.Topics {
			if tp.Name == topic && tp.Error == nil {
				return len(tp.Partitions), true
			}
		}
		return 0, false
	}
	eventually(t, 20*time.Second, topic+" listed with 3 partitions", func() bool { n, ok := listed(); return ok && n == 3 })

	w := &kafka.Writer{Addr: addr, Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond, Transport: tr}
	defer w.Close()
	produce := func(from, n int) {
		t.Helper()
		msgs := make([]kafka.Message, 0, n)
		for i := from; i < from+n; i++ {
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatalf("WriteMessages: %v", err)
		}
	}
	produce(0, 30)

	var mu sync.Mutex
	seen := map[string]int{}
	member := func(name string) (stop func()) {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addrs[0]}, GroupID: group, Topic: topic,
			StartOffset: kafka.FirstOffset, HeartbeatInterval: 300 * time.Millisecond, JoinGroupBackoff: 300 * time.Millisecond,
			SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second, MaxWait: 200 * time.Millisecond})
		mctx, mcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				m, err := r.FetchMessage(mctx)
				if err != nil {
					if mctx.Err() == nil {
						t.Errorf("%s: FetchMessage: %v", name, err)
					}
					return
				}
				mu.Lock()
				seen[string(m.Key)]++
				mu.Unlock()
				if err := r.CommitMessages(mctx, m); err != nil && mctx.Err() == nil {
					t.Errorf("%s: CommitMessages: %v", name, err)
					return
				}
			}
		}()
		return func() {
			mcancel()
			<-done
			if err := r.Close(); err != nil {
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
	eventually(t, 30*time.Second, "two members sharing the 3 partitions (DescribeGroups)", func() bool {
		dg, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err != nil || len(dg.Groups) != 1 || dg.Groups[0].Error != nil || dg.Groups[0].GroupState != "Stable" || len(dg.Groups[0].Members) != 2 {
			return false
		}
		var all []int
		for _, m := range dg.Groups[0].Members {
			n := 0
			for _, tp := range m.MemberAssignments.Topics {
				all, n = append(all, tp.Partitions...), n+len(tp.Partitions)
			}
			if n == 0 {
				return false
			}
		}
		slices.Sort(all)
		return slices.Equal(all, []int{0, 1, 2})
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

	// Lag 0: each committed offset is its partition's end.
	lo, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.LastOffsetOf(0), kafka.LastOffsetOf(1), kafka.LastOffsetOf(2)}}})
	if err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	end := map[int]int64{}
	var total int64
	for _, p := range lo.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("ListOffsets %d: %v", p.Partition, p.Error)
		}
		end[p.Partition] = p.LastOffset
		total += p.LastOffset
	}
	if total != 60 {
		t.Errorf("the partitions end at %d records in all, want 60: %v", total, end)
	}
	of, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1, 2}}})
	if err != nil || of.Error != nil {
		t.Fatalf("OffsetFetch: %v, %v", err, of)
	}
	for _, p := range of.Topics[topic] {
		if p.Error != nil || p.CommittedOffset != end[p.Partition] {
			t.Errorf("partition %d: committed %d (%v), end %d", p.Partition, p.CommittedOffset, p.Error, end[p.Partition])
		}
	}

	dr, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil || dr.Errors[topic] != nil {
		t.Fatalf("DeleteTopics: %v, %v", err, dr)
	}
	eventually(t, 20*time.Second, topic+" gone from the metadata", func() bool { _, ok := listed(); return !ok })
	// A second delete names an unknown topic, answered per topic.
	dr2, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil || !errors.Is(dr2.Errors[topic], kafka.UnknownTopicOrPartition) {
		t.Errorf("deleting %s again: %v, %v", topic, err, dr2)
	}
}
