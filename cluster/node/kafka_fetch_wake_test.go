package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Kafka fetch of many partitions (spread over the node's shards),
// parked with a long max wait, answers soon after a produce to any one
// of them: a record never waits out the long poll (issue 13: 1 in 100
// records of a 12-partition consumer waited up to max_wait_ms).
func TestKafkaFetchWakesOnProduce(t *testing.T) {
	t.Parallel()
	const parts, wait = 12, 5 * time.Second
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()}, kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	kafkaCreate(t, ctx, adm, "wake", parts, 1)
	end := map[int32]int64{}
	clusterWait(t, 30*time.Second, "every partition readable", func() bool {
		lo, err := adm.ListEndOffsets(ctx, "wake")
		if err != nil {
			return false
		}
		lo.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				end[o.Partition] = o.Offset
			}
		})
		return len(end) == parts
	})
	broker := cl.Broker(1)
	topicID := topicIDOf(t, ctx, cl, "wake") // franz-go sends v13, by id
	for round := 0; round < 3*parts; round++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, int32(wait/time.Millisecond), 1, 1<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "wake", topicID
		for p := int32(0); p < parts; p++ {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, end[p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		type got struct {
			resp *kmsg.FetchResponse
			err  error
			at   time.Time
		}
		answered := make(chan got, 1)
		go func() {
			resp, err := req.RequestWith(ctx, broker)
			answered <- got{resp, err, time.Now()}
		}()
		p := int32(round % parts)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "wake", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("round %d: produce to %d: %v", round, p, err)
		}
		produced := time.Now()
		g := <-answered
		if g.err != nil {
			t.Fatalf("round %d: fetch: %v", round, g.err)
		}
		// Generous for a loaded machine; the bug waits the whole 5 s.
		if d := g.at.Sub(produced); d > time.Second {
			t.Fatalf("round %d: the fetch answered %v after the produce to partition %d (max wait %v)", round, d, p, wait)
		}
		for _, rt := range g.resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("round %d: partition %d: error %d", round, rp.Partition, rp.ErrorCode)
				}
				end[rp.Partition] = max(end[rp.Partition], rp.HighWatermark)
			}
		}
		if end[p] == 0 {
			// Answered before the record was committed: read it next round.
			continue
		}
	}
}

// The same after thousands of long polls have timed out on a partition
// with nothing new (a consumer of many partitions polls each of them
// every time any has data): the next poll still waits and is woken by
// the partition's next record. Issue 13's cause: timed-out polls filled
// the partition's waiter bound and later polls were answered at once,
// empty.
func TestKafkaFetchWakesAfterManyTimedOutPolls(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	adm := kadm.NewClient(cl)
	kafkaCreate(t, ctx, adm, "idle", 1, 1)
	var end int64 = -1
	clusterWait(t, 30*time.Second, "the partition readable", func() bool {
		lo, err := adm.ListEndOffsets(ctx, "idle")
		if err != nil {
			return false
		}
		if o, ok := lo.Lookup("idle", 0); ok && o.Err == nil {
			end = o.Offset
		}
		return end >= 0
	})
	broker := cl.Broker(1)
	topicID := topicIDOf(t, ctx, cl, "idle")
	poll := func(wait time.Duration) (*kmsg.FetchResponse, error) {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, int32(wait/time.Millisecond), 1, 1<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "idle", topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, end, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req.RequestWith(ctx, broker)
	}
	// More than the partition's bound on waiting polls, 16 at a time.
	const polls, at = 4200, 16
	errs := make(chan error, at)
	for g := 0; g < at; g++ {
		go func() {
			for i := 0; i < polls/at+1; i++ {
				if _, err := poll(time.Millisecond); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < at; g++ {
		if err := <-errs; err != nil {
			t.Fatalf("short poll: %v", err)
		}
	}
	type got struct {
		resp *kmsg.FetchResponse
		err  error
		at   time.Time
	}
	answered := make(chan got, 1)
	go func() {
		resp, err := poll(5 * time.Second)
		answered <- got{resp, err, time.Now()}
	}()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "idle", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	produced := time.Now()
	g := <-answered
	if g.err != nil {
		t.Fatalf("fetch: %v", g.err)
	}
	if d := g.at.Sub(produced); d > time.Second {
		t.Fatalf("the fetch answered %v after the produce (max wait 5 s)", d)
	}
	// Answered at once, empty, the poll would have left the record to
	// the consumer's next poll.
	if len(g.resp.Topics) != 1 || len(g.resp.Topics[0].Partitions) != 1 || len(g.resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("the long poll was answered without the record: %+v", g.resp.Topics)
	}
}
