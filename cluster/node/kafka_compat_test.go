package node

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/segment/batch"
)

// What older clients need: kafka-python 2.0 probes a broker with
// ApiVersions v0 followed at once by Metadata v0 and took us for Kafka
// 0.9 when the second closed the connection; and it hands control
// batches to the application as records, so a fetch from the start of a
// partition must not carry the generation's no-op.
func TestKafkaOlderClients(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	kafkaCreate(t, ctx, kadm.NewClient(cl), "old", 1, 1)
	pr := kafkaClient(t, []string{n.KafkaAddr()}, kgo.DefaultProduceTopic("old"))
	if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("only")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	c, err := net.Dial("tcp", n.KafkaAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{} // v0: empty asks for all
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "old"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = 0, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	fetch.Topics = append(fetch.Topics, rt)
	frames := append(encoded(kmsg.NewPtrApiVersionsRequest(), 0, 1), encoded(md, 0, 2)...)
	frames = append(frames, encoded(fetch, 4, 3)...)
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	for corr := uint32(1); corr <= 3; corr++ {
		body, err := readFrame(c)
		if err != nil {
			t.Fatalf("answer %d: %v", corr, err)
		}
		if binary.BigEndian.Uint32(body) != corr {
			t.Fatalf("answer %d carries correlation id %d", corr, binary.BigEndian.Uint32(body))
		}
		switch corr {
		case 2:
			resp := kmsg.NewPtrMetadataResponse()
			if err := resp.ReadFrom(body[4:]); err != nil || len(resp.Topics) != 1 || len(resp.Brokers) != 1 {
				t.Fatalf("Metadata v0: %+v, %v", resp, err)
			}
		case 3:
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(4)
			if err := resp.ReadFrom(body[4:]); err != nil {
				t.Fatal(err)
			}
			recs := resp.Topics[0].Partitions[0].RecordBatches
			h, err := batch.ReadHeader(recs)
			if err != nil || h.Attributes&batch.ControlBit != 0 || h.BaseOffset != 0 || h.Size() != len(recs) {
				t.Fatalf("fetch from offset 0: first batch %+v (%v) of %d bytes; want the record at offset 0 alone", h, err, len(recs))
			}
		}
	}
}
