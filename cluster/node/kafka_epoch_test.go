package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leader epochs through a change of primary, as a consumer checks for
// truncation: after the primary of generation g0 is stopped and a new one
// takes over at g1, OffsetForLeaderEpoch(g0) on the new primary answers
// g0 ending where g1 began (the old high watermark), g1 ends at the high
// watermark, an epoch above g1 is unknown (-1, -1), and ListOffsets
// answers the generation of the batch found; an older
// current_leader_epoch is fenced.
func TestKafkaOffsetForLeaderEpoch(t *testing.T) {
	tc, kports, _ := startKafkaRackCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, kports))
	kafkaCreateRetrying(t, ctx, adm, "ep", 1, 3)
	leader := func(not int32) (id, epoch int32) {
		clusterWait(t, 30*time.Second, "a leader with all live replicas in sync", func() bool {
			md, err := adm.Metadata(ctx, "ep")
			if err != nil || len(md.Topics["ep"].Partitions) != 1 {
				return false
			}
			p := md.Topics["ep"].Partitions[0]
			id, epoch = p.Leader, p.LeaderEpoch
			return p.Err == nil && id > 0 && id != not
		})
		return id, epoch
	}
	pr := kafkaClient(t, kports, kgo.DefaultProduceTopic("ep"))
	produce := func(from int) {
		for i := from; i < from+50; i++ {
			if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("e%03d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	ends := func() kadm.ListedOffset {
		lo, err := adm.ListEndOffsets(ctx, "ep")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("ep", 0)
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		return o
	}
	id0, g0 := leader(0)
	produce(0)
	end0 := ends()
	if end0.LeaderEpoch != g0 {
		t.Fatalf("ListOffsets latest at generation %d: leader epoch %d", g0, end0.LeaderEpoch)
	}

	tc.stopNode(int(id0 - 1))
	_, g1 := leader(id0)
	if g1 <= g0 {
		t.Fatalf("generation %d after %d", g1, g0)
	}
	produce(50)
	end1 := ends()
	if end1.LeaderEpoch != g1 {
		t.Fatalf("ListOffsets latest at generation %d: leader epoch %d", g1, end1.LeaderEpoch)
	}

	var req kadm.OffsetForLeaderEpochRequest
	for _, c := range []struct {
		asked, epoch int32
		end          int64
	}{
		{g0, g0, end0.Offset},
		{g1, g1, end1.Offset},
		{g1 + 5, -1, -1},
	} {
		req = nil
		req.Add("ep", 0, c.asked)
		res, err := adm.OffsetForLeaderEpoch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := res["ep"][0]
		if got.Err != nil || got.LeaderEpoch != c.epoch || got.EndOffset != c.end {
			t.Errorf("OffsetForLeaderEpoch(%d): epoch %d end %d (%v), want epoch %d end %d",
				c.asked, got.LeaderEpoch, got.EndOffset, got.Err, c.epoch, c.end)
		}
	}

	// current_leader_epoch fences as in Fetch.
	raw := kmsg.NewPtrOffsetForLeaderEpochRequest()
	raw.Version, raw.ReplicaID = 4, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "ep"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = g0, g0
	rt.Partitions = append(rt.Partitions, rp)
	raw.Topics = append(raw.Topics, rt)
	id1, _ := leader(id0)
	live := []string{}
	for i, n := range tc.nodes {
		if n != nil {
			live = append(live, kports[i])
		}
	}
	resp, err := kafkaClient(t, live).Broker(int(id1)).Request(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; got.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("OffsetForLeaderEpoch with current_leader_epoch %d at generation %d: error %d, want FENCED_LEADER_EPOCH", g0, g1, got.ErrorCode)
	}
}
