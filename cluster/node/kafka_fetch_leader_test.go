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
	"github.com/twmb/franz-go/pkg/kversion"
)

// A fetch (v16+) that reaches a follower is refused naming the current
// leader, its epoch and its address (KIP-951), as a refused produce is;
// before v16 the answer carries no hint.
func TestKafkaFetchLeaderHint(t *testing.T) {
	_, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, kports)
	adm := kadm.NewClient(cl)
	kafkaCreateRetrying(t, ctx, adm, "fl", 1, 3)
	var leader, epoch int32
	var id [16]byte
	clusterWait(t, 30*time.Second, "a leader of fl/0", func() bool {
		md, err := adm.Metadata(ctx, "fl")
		if err != nil {
			return false
		}
		p := md.Topics["fl"].Partitions[0]
		leader, epoch, id = p.Leader, p.LeaderEpoch, md.Topics["fl"].ID
		return p.Err == nil && p.Leader > 0 && len(p.ISR) == 3
	})
	follower := leader%3 + 1
	fetch := func(version int16) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes = version, 10, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "fl", id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		// The client sends the highest version both sides know, whatever
		// req.Version says: cap it.
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(req.Key(), version)
		vcl := kafkaClient(t, kports, kgo.MaxVersions(vs))
		raw, err := req.RequestWith(ctx, vcl.Broker(int(follower)))
		if err != nil {
			t.Fatalf("Fetch v%d of node %d: %v", version, follower, err)
		}
		return raw
	}
	for _, v := range []int16{16, 17} {
		resp := fetch(v)
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != kerr.NotLeaderForPartition.Code || got.CurrentLeader.LeaderID != leader || got.CurrentLeader.LeaderEpoch != epoch ||
			len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != leader || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != kports[leader-1] {
			t.Fatalf("Fetch v%d of follower %d: %+v, brokers %+v; want leader %d epoch %d", v, follower, got, resp.Brokers, leader, epoch)
		}
	}
	resp := fetch(13)
	if got := resp.Topics[0].Partitions[0]; got.ErrorCode != kerr.NotLeaderForPartition.Code || got.CurrentLeader.LeaderID != -1 || len(resp.Brokers) != 0 {
		t.Fatalf("Fetch v13 of follower %d: %+v, brokers %+v; want no hint", follower, got, resp.Brokers)
	}
}
