package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An incremental fetch session (KIP-227): the first request opens it and
// is answered in full; later ones, naming only what changed, are
// answered only with the partitions that have something new; a wrong
// epoch or an unknown session is refused with Kafka's codes.
func TestKafkaFetchSession(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	kafkaCreate(t, ctx, kadm.NewClient(cl), "sess", 3, 1)
	broker := cl.Broker(1)
	// Every primary has committed its first entry (reads are answered
	// LEADER_NOT_AVAILABLE until then, which would make the session's
	// next answer repeat those partitions).
	clusterWait(t, 30*time.Second, "every partition readable", func() bool {
		lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, "sess")
		if err != nil {
			return false
		}
		ok := 0
		lo.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				ok++
			}
		})
		return ok == 3
	})

	topicID := topicIDOf(t, ctx, cl, "sess") // franz-go sends v13, by id
	fetch := func(id, epoch int32, parts map[int32]int64) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes = 12, 0, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		if len(parts) > 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "sess", topicID
			for p, off := range parts {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	partitions := func(resp *kmsg.FetchResponse) map[int32]int {
		out := map[int32]int{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[rp.Partition] = len(rp.RecordBatches)
			}
		}
		return out
	}

	open := fetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	if open.ErrorCode != 0 || open.SessionID == 0 || len(partitions(open)) != 3 {
		t.Fatalf("opening: session %d, error %d, partitions %v", open.SessionID, open.ErrorCode, partitions(open))
	}
	id := open.SessionID
	if got := fetch(id, 1, nil); got.ErrorCode != 0 || got.SessionID != id || len(got.Topics) != 0 {
		t.Fatalf("nothing new: session %d, error %d, partitions %v", got.SessionID, got.ErrorCode, partitions(got))
	}
	pr := kafkaClient(t, []string{n.KafkaAddr()}, kgo.DefaultProduceTopic("sess"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pr.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Only partition 1 moved: it alone is answered, with its record.
	if got := partitions(fetch(id, 2, nil)); len(got) != 1 || got[1] == 0 {
		t.Fatalf("after a produce to partition 1: %v", got)
	}
	if got := fetch(id, 2, nil); got.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("a repeated epoch: error %d", got.ErrorCode)
	}
	if got := fetch(id+1000, 1, nil); got.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("an unknown session: error %d", got.ErrorCode)
	}
	// franz-go's reset after either error: epoch 0 with the old id, a
	// full fetch that replaces the session (refused, it looped).
	reset := fetch(id, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	if reset.ErrorCode != 0 || reset.SessionID == 0 || reset.SessionID == id || len(partitions(reset)) != 3 {
		t.Fatalf("a reset: session %d (was %d), error %d, partitions %v", reset.SessionID, id, reset.ErrorCode, partitions(reset))
	}
	if got := fetch(id, 1, nil); got.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the session the reset replaced: error %d", got.ErrorCode)
	}
	id = reset.SessionID
	var end int64 // partition 1's, past its record
	for _, rp := range reset.Topics[0].Partitions {
		if rp.Partition == 1 {
			end = rp.HighWatermark
		}
	}
	if got := fetch(id, 1, map[int32]int64{1: end}); got.ErrorCode != 0 || got.SessionID != id || len(got.Topics) != 0 {
		t.Fatalf("nothing new after the reset: session %d, error %d, partitions %v", got.SessionID, got.ErrorCode, partitions(got))
	}
	// Closing the session (epoch -1) answers in full, without a session.
	if got := fetch(id, -1, map[int32]int64{0: 0}); got.ErrorCode != 0 || got.SessionID != 0 || len(partitions(got)) != 1 {
		t.Fatalf("closing: session %d, error %d, partitions %v", got.SessionID, got.ErrorCode, partitions(got))
	}

	// current_leader_epoch fences: an epoch older than the primary's
	// generation is FENCED_LEADER_EPOCH (a newer one NOT_LEADER_OR_FOLLOWER).
	md, err := kadm.NewClient(cl).Metadata(ctx, "sess")
	if err != nil {
		t.Fatal(err)
	}
	gen := md.Topics["sess"].Partitions[0].LeaderEpoch
	for _, tc := range []struct {
		epoch int32
		want  int16
	}{{gen - 1, kerr.FencedLeaderEpoch.Code}, {gen, 0}, {gen + 1, kerr.NotLeaderForPartition.Code}, {-1, 0}} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.SessionEpoch = 12, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "sess", topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = tc.epoch, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("fetch with leader epoch %d (generation %d): error %d, want %d", tc.epoch, gen, got, tc.want)
		}
	}

	// A franz-go consumer, which uses sessions against brokers that list
	// Fetch v7+, reads everything through one.
	for i := 0; i < 30; i++ {
		if err := pr.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte("more")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := kafkaClient(t, []string{n.KafkaAddr()}, kgo.ConsumeTopics("sess"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if got := consumeN(t, ctx, cons, 31); len(got) != 31 {
		t.Fatalf("consumed %d records, want 31", len(got))
	}
}
