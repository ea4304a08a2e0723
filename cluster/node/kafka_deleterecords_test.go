package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaDeleteRecordsCheck produces ten records to partition p of topic
// (cl partitions manually),
// deletes those below 4 with kadm, and checks what Kafka's DeleteRecords
// promises: the low watermark answered, ListOffsets earliest, a fetch
// below the start OFFSET_OUT_OF_RANGE and one at it served, an offset
// past the high watermark refused with nothing changed, and -1 the
// high watermark.
func kafkaDeleteRecordsCheck(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32) {
	t.Helper()
	adm := kadm.NewClient(cl)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("v%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	del := func(at int64) kadm.DeleteRecordsResponse {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at})
		res, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatalf("DeleteRecords %d: %v", at, err)
		}
		got, ok := res.Lookup(topic, p)
		if !ok {
			t.Fatalf("DeleteRecords %d: no answer for %s/%d", at, topic, p)
		}
		return got
	}
	start := func() int64 {
		t.Helper()
		var off int64
		// A partition of the topic without a leader for a moment (the
		// balancer moving a primary) fails the whole listing: ask again.
		clusterWait(t, 10*time.Second, "ListOffsets earliest of "+topic, func() bool {
			so, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				return false
			}
			o, _ := so.Lookup(topic, p)
			off = o.Offset
			return o.Err == nil
		})
		return off
	}
	if got := del(4); got.Err != nil || got.LowWatermark != 4 {
		t.Fatalf("DeleteRecords 4: %+v", got)
	}
	if s := start(); s != 4 {
		t.Fatalf("earliest %d after deleting below 4", s)
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(off int64) (int16, int64) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes = 10, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, md.Topics[topic].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, off, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		var resp *kmsg.FetchResponse
		clusterWait(t, 10*time.Second, "a fetch answered by the leader", func() bool {
			pr, err := kadm.NewClient(cl).Metadata(ctx, topic)
			if err != nil {
				return false
			}
			leader := pr.Topics[topic].Partitions[p].Leader
			raw, err := cl.Broker(int(leader)).Request(ctx, req)
			if err != nil {
				return false
			}
			resp = raw.(*kmsg.FetchResponse)
			return resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code
		})
		got := resp.Topics[0].Partitions[0]
		return got.ErrorCode, got.LogStartOffset
	}
	if code, _ := fetch(2); code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("a fetch below the start: code %d", code)
	}
	if code, ls := fetch(4); code != 0 || ls != 4 {
		t.Fatalf("a fetch at the start: code %d, log start %d", code, ls)
	}
	if got := del(11); !errors.Is(got.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the high watermark: %+v", got)
	}
	if got := del(2); got.Err != nil || got.LowWatermark != 4 {
		t.Fatalf("DeleteRecords below the start: %+v", got)
	}
	if s := start(); s != 4 {
		t.Fatalf("earliest %d after refused deletes", s)
	}
	if got := del(-1); got.Err != nil || got.LowWatermark != 10 {
		t.Fatalf("DeleteRecords -1: %+v", got)
	}
	if s := start(); s != 10 {
		t.Fatalf("earliest %d after deleting to the high watermark", s)
	}
}

// On one node, DeleteRecords as Kafka's, and the start survives a
// restart: the metadata holds it.
func TestKafkaDeleteRecords(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkaCreate(t, ctx, kadm.NewClient(cl), "dr", 1, 1)
	kafkaDeleteRecordsCheck(t, ctx, cl, "dr", 0)

	// A compacted-only topic refuses it, as Kafka does (its policy keeps
	// the latest record of each key, not a prefix); compact,delete takes it.
	adm := kadm.NewClient(cl)
	for _, policy := range []string{"compact", "compact,delete"} {
		name := "drc-" + strings.ReplaceAll(policy, ",", "-")
		if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr(policy)}, name); err != nil || res.Err != nil {
			t.Fatalf("create %s: %v, %v", name, err, res.Err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: name, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", name, err)
		}
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: name, Partition: 0, At: 1})
		dr, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := dr.Lookup(name, 0)
		if policy == "compact" && !errors.Is(got.Err, kerr.PolicyViolation) || policy != "compact" && (got.Err != nil || got.LowWatermark != 1) {
			t.Errorf("DeleteRecords on a %s topic: %+v", policy, got)
		}
	}
	cl.Close()
	n.stop(t)

	n2 := runNode(t, dir, withKafka)
	cl2 := kafkaClient(t, []string{n2.KafkaAddr()})
	clusterWait(t, 30*time.Second, "the start of dr/0 after a restart", func() bool {
		so, err := kadm.NewClient(cl2).ListStartOffsets(ctx, "dr")
		if err != nil {
			return false
		}
		o, _ := so.Lookup("dr", 0)
		if o.Err == nil && o.Offset != 10 {
			t.Fatalf("earliest %d after a restart, want 10", o.Offset)
		}
		return o.Err == nil
	})
}

// On three nodes, DeleteRecords of a partition whose primary is not the
// metadata primary (the start goes to the metadata primary over the peer
// link), and every node's metadata then holds the start.
func TestKafkaDeleteRecordsCluster(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := kafkaClient(t, kports, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	kafkaCreateRetrying(t, ctx, adm, "drc", 3, 3)
	meta := metaPrimaryByRoute(t, tc)
	p := int32(-1)
	clusterWait(t, 30*time.Second, "a partition led by a node other than the metadata primary", func() bool {
		md, err := adm.Metadata(ctx, "drc")
		if err != nil {
			return false
		}
		for _, pd := range md.Topics["drc"].Partitions {
			if pd.Err == nil && pd.Leader > 0 && pd.Leader != int32(meta.self) {
				p = pd.Partition
				return true
			}
		}
		return false
	})
	kafkaDeleteRecordsCheck(t, ctx, cl, "drc", p)
	clusterWait(t, 30*time.Second, "every node's metadata holding the start", func() bool {
		for _, n := range tc.nodes {
			if v := n.view.Load().Topics["drc"]; v == nil || v.LogStart(p) != 10 {
				return false
			}
		}
		return true
	})
}

// The retention pass deletes the whole segments below a DeleteRecords
// start, as Kafka deletes them: the partition's size on disk drops to
// about the one segment holding the start.
func TestKafkaDeleteRecordsFreesSegments(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, func(c *config.Config) {
		withKafka(c)
		c.Storage.RetentionCheckIntervalMs = 100
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()}, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kmsg.StringPtr("1024")}, "drs")
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v, %v", err, res.Err)
	}
	for i := 0; i < 40; i++ {
		r := &kgo.Record{Topic: "drs", Value: bytes.Repeat([]byte{'x'}, 200)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	size := func() int64 {
		all, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range all[1] {
			if p, ok := d.Topics["drs"][0]; ok {
				return p.Size
			}
		}
		t.Fatal("drs/0 not in the log directories")
		return 0
	}
	before := size()
	if before < 40*200 {
		t.Fatalf("drs/0 holds %d bytes before the delete", before)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "drs", Partition: 0, At: -1})
	if dr, err := adm.DeleteRecords(ctx, os); err != nil || dr.Error() != nil {
		t.Fatalf("DeleteRecords: %v, %v", err, dr.Error())
	}
	clusterWait(t, 20*time.Second, "the segments below the start deleted", func() bool { return size() <= 2*1024 })
}
