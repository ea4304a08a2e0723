package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ListOffsets with timestamp -3 (max timestamp, KIP-734; kadm
// ListMaxTimestampOffsets) answers the first record with the largest
// timestamp and that timestamp, found inside its batch (here the middle
// record of a three-record batch, its twin in a later batch not taken);
// an empty partition answers -1; -3 below v7 is INVALID_REQUEST.
func TestKafkaListOffsetsMaxTimestamp(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()}, kgo.DefaultProduceTopic("ts"))
	adm := kadm.NewClient(cl)
	kafkaCreate(t, ctx, adm, "ts", 1, 1)

	maxTs := func() kadm.ListedOffset {
		t.Helper()
		var o kadm.ListedOffset
		// A new primary answers LEADER_NOT_AVAILABLE until its term's
		// first entry commits; kadm does not retry it.
		clusterWait(t, 10*time.Second, "a max-timestamp answer for ts/0", func() bool {
			los, err := adm.ListMaxTimestampOffsets(ctx, "ts")
			if err != nil {
				t.Fatal(err)
			}
			var ok bool
			o, ok = los.Lookup("ts", 0)
			if ok && o.Err != nil && !kerr.IsRetriable(o.Err) {
				t.Fatalf("max timestamp of ts/0: %+v", o)
			}
			return ok && o.Err == nil
		})
		return o
	}
	if o := maxTs(); o.Offset != -1 || o.Timestamp != -1 {
		t.Fatalf("empty partition: offset %d, timestamp %d; want -1, -1", o.Offset, o.Timestamp)
	}

	rec := func(ms int64) *kgo.Record { return &kgo.Record{Value: []byte("v"), Timestamp: time.UnixMilli(ms)} }
	for _, batch := range [][]*kgo.Record{{rec(1000)}, {rec(2000), rec(9000), rec(3000)}, {rec(5000)}, {rec(9000)}} {
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if o := maxTs(); o.Offset != 2 || o.Timestamp != 9000 {
		t.Fatalf("max timestamp: offset %d, timestamp %d; want 2, 9000", o.Offset, o.Timestamp)
	}

	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 6, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "ts"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -3, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// Kafka 2.8's ListOffsets is v6: the client sends that version.
	old := kafkaClient(t, []string{n.KafkaAddr()}, kgo.MaxVersions(kversion.V2_8_0()))
	resp, err := req.RequestWith(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.InvalidRequest.Code {
		t.Fatalf("-3 at v6: error %d, want INVALID_REQUEST", got)
	}
}
