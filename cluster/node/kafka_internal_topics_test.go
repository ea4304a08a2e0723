package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/metadata"
)

// The groups' internal topic is listed to Kafka clients as Kafka lists
// its own: __consumer_offsets, marked internal, in the full listing and
// by name, with the groups topic's id, partitions and leaders, once the
// first group request has made it (as Kafka makes its topic at the first
// FindCoordinator), and DescribeTopicPartitions lists it the same way;
// __groups stays out of the full listing. Produce,
// Fetch (by name and by id) and ListOffsets of it are
// INVALID_TOPIC_EXCEPTION: its records are not in Kafka's format.
func TestKafkaConsumerOffsetsListed(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()}, kgo.RecordRetries(2))
	adm := kadm.NewClient(cl)
	kafkaCreate(t, ctx, adm, "orders", 1, 1)

	meta := func(topics ...string) *kmsg.MetadataResponse {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		if topics != nil {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	find := func(resp *kmsg.MetadataResponse, name string) *kmsg.MetadataResponseTopic {
		for i := range resp.Topics {
			if t := &resp.Topics[i]; t.Topic != nil && *t.Topic == name {
				return t
			}
		}
		return nil
	}
	if got := find(meta(), kafkaConsumerOffsets); got != nil {
		t.Fatalf("listed before any group request: %+v", got)
	}
	if got := find(meta(kafkaConsumerOffsets), kafkaConsumerOffsets); got == nil || got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("asked by name before any group request: %+v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}

	if err := adm.FindGroupCoordinators(ctx, "g").Error(); err != nil {
		t.Fatal(err)
	}
	var listed *kmsg.MetadataResponseTopic
	clusterWait(t, 30*time.Second, "__consumer_offsets listed with a leader for every partition", func() bool {
		all := meta()
		listed = find(all, kafkaConsumerOffsets)
		if listed == nil || listed.ErrorCode != 0 || !listed.IsInternal || listed.TopicID == [16]byte{} || len(listed.Partitions) == 0 {
			return false
		}
		for _, p := range listed.Partitions {
			if p.ErrorCode != 0 || p.Leader != 1 {
				return false
			}
		}
		if g := find(all, metadata.GroupsTopic); g != nil {
			t.Fatalf("the full listing has %s too: %+v", metadata.GroupsTopic, g)
		}
		if o := find(all, "orders"); o == nil || o.IsInternal {
			t.Fatalf("orders in the full listing: %+v", o)
		}
		return true
	})
	if byName := find(meta(kafkaConsumerOffsets), kafkaConsumerOffsets); byName == nil || !byName.IsInternal ||
		byName.TopicID != listed.TopicID || len(byName.Partitions) != len(listed.Partitions) {
		t.Fatalf("asked by name: %+v, want as listed %+v", byName, listed)
	}
	if g := find(meta(metadata.GroupsTopic), metadata.GroupsTopic); g == nil || !g.IsInternal || g.TopicID != listed.TopicID {
		t.Fatalf("%s asked by name: %+v, want internal with the same id", metadata.GroupsTopic, g)
	}

	// DescribeTopicPartitions (Kafka 3.8+ admin clients) lists it too, in
	// name order, and answers it by name.
	for _, named := range [][]string{nil, {"orders", kafkaConsumerOffsets}} {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit = 2000
		for _, name := range named {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = name
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, rt := range resp.Topics {
			names = append(names, *rt.Topic)
			if *rt.Topic == kafkaConsumerOffsets && (rt.ErrorCode != 0 || !rt.IsInternal || rt.TopicID != listed.TopicID || len(rt.Partitions) != len(listed.Partitions)) {
				t.Fatalf("DescribeTopicPartitions %v: %s answered %+v", named, kafkaConsumerOffsets, rt)
			}
		}
		if len(names) != 2 || names[0] != kafkaConsumerOffsets || names[1] != "orders" {
			t.Fatalf("DescribeTopicPartitions %v lists %v, want [%s orders]", named, names, kafkaConsumerOffsets)
		}
	}

	// Tools: kadm leaves it out of the topics unless asked for internal ones.
	if td, err := adm.ListTopics(ctx); err != nil || td.Has(kafkaConsumerOffsets) {
		t.Fatalf("ListTopics: %v, has %s: %v", err, kafkaConsumerOffsets, td.Has(kafkaConsumerOffsets))
	}
	if td, err := adm.ListTopicsWithInternal(ctx); err != nil || !td.Has(kafkaConsumerOffsets) || !td[kafkaConsumerOffsets].IsInternal {
		t.Fatalf("ListTopicsWithInternal: %v, %+v", err, td[kafkaConsumerOffsets])
	}

	// Its data is refused, not retriably.
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: kafkaConsumerOffsets, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", kafkaConsumerOffsets, err)
	}
	ends, err := adm.ListEndOffsets(ctx, kafkaConsumerOffsets)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if !errors.Is(o.Err, kerr.InvalidTopicException) {
			t.Fatalf("ListOffsets of %s/%d: %v, want INVALID_TOPIC_EXCEPTION", o.Topic, o.Partition, o.Err)
		}
	})
	for _, version := range []int16{12, 13} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = version, -1, 10, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = kafkaConsumerOffsets, listed.TopicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		raw, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := raw.(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidTopicException.Code {
			t.Fatalf("fetch v%d of %s: %+v, want INVALID_TOPIC_EXCEPTION", version, kafkaConsumerOffsets, resp.Topics)
		}
	}
}

// kafkaConsumerOffsets is Kafka's name for its groups' internal topic.
const kafkaConsumerOffsets = "__consumer_offsets"
