package node

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch v13 names topics by id (KIP-516): a fetch by the id Metadata
// gives reads the topic's records and is answered with the id; an id
// the node does not know is UNKNOWN_TOPIC_ID; and an incremental fetch
// of the same session is answered by id too.
func TestKafkaFetchByTopicID(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, []string{n.KafkaAddr()}))
	kafkaCreate(t, ctx, adm, "byid", 1, 1)
	pr := kafkaClient(t, []string{n.KafkaAddr()}, kgo.DefaultProduceTopic("byid"))
	if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, "byid")
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte(md.Topics["byid"].ID)

	c, err := net.Dial("tcp", n.KafkaAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fetch := func(corr int32, epoch int32, session int32, ids ...[16]byte) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.SessionEpoch, req.SessionID = 1<<20, epoch, session
		for _, id := range ids {
			rt := kmsg.NewFetchRequestTopic()
			rt.TopicID = id
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		if _, err := c.Write(encoded(req, 13, corr)); err != nil {
			t.Fatal(err)
		}
		body, err := readFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(body)); got != corr {
			t.Fatalf("answer carries correlation id %d, want %d", got, corr)
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(13)
		if err := resp.ReadFrom(body[5:]); err != nil { // correlation id, empty header tags
			t.Fatal(err)
		}
		return resp
	}

	unknown := [16]byte{0xde, 0xad}
	resp := fetch(1, 0, 0, id, unknown)
	if resp.ErrorCode != 0 || len(resp.Topics) != 2 {
		t.Fatalf("fetch v13: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	got := resp.Topics[0]
	if got.TopicID != id || got.Partitions[0].ErrorCode != 0 || len(got.Partitions[0].RecordBatches) == 0 {
		t.Fatalf("the topic by its id: id %x, error %d, %d record bytes", got.TopicID, got.Partitions[0].ErrorCode, len(got.Partitions[0].RecordBatches))
	}
	if u := resp.Topics[1]; u.TopicID != unknown || u.Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("an unknown id: id %x, error %d, want UNKNOWN_TOPIC_ID", u.TopicID, u.Partitions[0].ErrorCode)
	}
	// The session's next fetch names nothing: the partition whose high
	// watermark moved comes back by id.
	if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("second")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inc := fetch(2, 1, resp.SessionID)
	if resp.SessionID == 0 || inc.ErrorCode != 0 || len(inc.Topics) == 0 || inc.Topics[0].TopicID != id {
		t.Fatalf("incremental fetch in session %d: error %d, topics %+v", resp.SessionID, inc.ErrorCode, inc.Topics)
	}
}

// topicIDOf is topic's id as Metadata gives it, for hand-made fetches:
// franz-go sends them at the highest version the node lists, which from
// 13 names topics by id only.
func topicIDOf(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil || md.Topics[topic].Err != nil {
		t.Fatalf("metadata of %s: %v %v", topic, err, md.Topics[topic].Err)
	}
	return [16]byte(md.Topics[topic].ID)
}
