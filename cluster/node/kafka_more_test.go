package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/segment/batch"
)

// Topic admin through the Kafka port keeps our rules with Kafka's codes:
// replication factor -1 is the cluster's default, 0, 33 and more than
// the roster are INVALID_REPLICATION_FACTOR; partitions must be 1 or
// more and can only grow; names are unique until deleted.
func TestKafkaTopicAdmin(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, []string{n.KafkaAddr()}))

	create1 := func(name string, configs map[string]*string) error {
		res, err := adm.CreateTopic(ctx, 1, 1, configs, name)
		if err != nil {
			return err
		}
		return res.Err
	}
	create := func(name string, parts int32, rf int16) error {
		res, err := adm.CreateTopic(ctx, parts, rf, nil, name)
		if err != nil {
			return err
		}
		return res.Err
	}
	for _, tc := range []struct {
		name  string
		parts int32
		rf    int16
		want  error
	}{
		{"default-rf", 2, -1, nil},
		{"rf-0", 1, 0, kerr.InvalidReplicationFactor},
		{"rf-33", 1, 33, kerr.InvalidReplicationFactor},
		{"rf-over-roster", 1, 2, kerr.InvalidReplicationFactor},
		{"no-partitions", 0, 1, kerr.InvalidPartitions},
		{"default-rf", 2, 1, kerr.TopicAlreadyExists},
		{"bad/name", 1, 1, kerr.InvalidTopicException},
	} {
		if err := create(tc.name, tc.parts, tc.rf); !errors.Is(err, tc.want) {
			t.Errorf("create %s (partitions %d, rf %d): %v, want %v", tc.name, tc.parts, tc.rf, err, tc.want)
		}
	}
	td, err := adm.ListTopics(ctx, "default-rf")
	if err != nil || len(td["default-rf"].Partitions) != 2 || td["default-rf"].Partitions.NumReplicas() != 1 {
		t.Fatalf("default-rf: %+v, %v", td, err)
	}

	// Configs by Kafka's names: set at creation, read back with
	// DescribeConfigs; one we do not have is INVALID_CONFIG.
	ret := "60000"
	if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &ret}, "with-config"); err != nil || res.Err != nil {
		t.Fatalf("create with retention.ms: %v %v", err, res.Err)
	}
	if err := create1("compacted", map[string]*string{"cleanup.policy": kmsgString("compact")}); err != nil {
		t.Fatalf("create with cleanup.policy=compact: %v", err)
	}
	if err := create1("compacted-bad", map[string]*string{"cleanup.policy": kmsgString("shred")}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("create with cleanup.policy=shred: %v, want INVALID_CONFIG", err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "with-config")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("with-config", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs: %v %+v", err, rc)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue() + " " + c.Source.String()
	}
	if got["retention.ms"] != "60000 DYNAMIC_TOPIC_CONFIG" || got["segment.bytes"] == "" {
		t.Fatalf("configs: %v", got)
	}

	// Partitions grow, never shrink.
	if res, err := adm.UpdatePartitions(ctx, 5, "default-rf"); err != nil || res["default-rf"].Err != nil {
		t.Fatalf("grow to 5: %v %+v", err, res)
	}
	if res, err := adm.UpdatePartitions(ctx, 3, "default-rf"); err != nil || !errors.Is(res["default-rf"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrink to 3: %v %+v", err, res)
	}
	if n := len(n.view.Load().Topics["default-rf"].Replicas); n != 5 {
		t.Fatalf("partitions after growing: %d", n)
	}

	// Delete, then the name is free and unknown.
	if res, err := adm.DeleteTopics(ctx, "default-rf"); err != nil || res["default-rf"].Err != nil {
		t.Fatalf("delete: %v %+v", err, res)
	}
	if res, err := adm.DeleteTopics(ctx, "default-rf"); err != nil || !errors.Is(res["default-rf"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete again: %v %+v", err, res)
	}
	if err := create("default-rf", 1, 1); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

func kmsgString(s string) *string { return &s }

// Both protocols serve the same data: records produced through Kafka are
// consumed through the native SDK with the same offsets, keys and values,
// and the reverse; the control batch a new primary writes at the start
// of each generation reaches neither consumer as a record.
func TestKafkaBothProtocols(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kaddr := n.KafkaAddr()
	kafkaCreate(t, ctx, kadm.NewClient(kafkaClient(t, []string{kaddr})), "both", 2, 1)
	native, err := client.Dial(ctx, n.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()

	type rec struct {
		off      int64
		key, val string
	}
	// Through Kafka: every record's offset as acknowledged.
	kp := kafkaClient(t, []string{kaddr}, kgo.DefaultProduceTopic("both"))
	want := map[int32][]rec{}
	for i := 0; i < 40; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprint("k", i%7)), Value: []byte(fmt.Sprint("via-kafka-", i))}
		if err := kp.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want[r.Partition] = append(want[r.Partition], rec{r.Offset, string(r.Key), string(r.Value)})
	}
	// Through the native SDK.
	np, err := native.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		key, val := fmt.Sprint("k", i%7), fmt.Sprint("via-native-", i)
		pr, err := np.Produce(ctx, client.Record{Topic: "both", Key: []byte(key), Value: []byte(val)})
		if err != nil {
			t.Fatal(err)
		}
		want[pr.Partition] = append(want[pr.Partition], rec{pr.Offset, key, val})
	}
	np.Close(ctx)
	total := 80

	check := func(who string, got map[int32][]rec) {
		t.Helper()
		for p, w := range want {
			if fmt.Sprint(got[p]) != fmt.Sprint(w) {
				t.Fatalf("%s, partition %d:\n got %v\nwant %v", who, p, got[p], w)
			}
		}
	}
	// Consumed through the native SDK.
	cs, err := native.NewConsumer(client.ConsumerConfig{FetchMaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Assign(ctx, "both", []int32{0, 1}, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	got := map[int32][]rec{}
	for count := 0; count < total; {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got[r.Partition] = append(got[r.Partition], rec{r.Offset, string(r.Key), string(r.Value)})
			count++
		}
	}
	check("native consumer", got)
	// Consumed through Kafka.
	kc := kafkaClient(t, []string{kaddr}, kgo.ConsumeTopics("both"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got = map[int32][]rec{}
	for _, r := range consumeN(t, ctx, kc, total) {
		got[r.Partition] = append(got[r.Partition], rec{r.Offset, string(r.Key), string(r.Value)})
	}
	check("kafka consumer", got)
	// Each partition starts with the generation's no-op, which takes no
	// offset: its records run dense from 0, as on Kafka.
	for p, w := range want {
		for i, r := range w {
			if r.off != int64(i) {
				t.Fatalf("partition %d: record %d at offset %d, want offsets dense from 0: %v", p, i, r.off, w)
			}
		}
	}
	lo, err := kadm.NewClient(kc).ListStartOffsets(ctx, "both")
	if err != nil {
		t.Fatal(err)
	}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Errorf("start offset of partition %d: %d, %v", o.Partition, o.Offset, o.Err)
		}
	})
	// The topic id is the same through both protocols.
	md, err := kadm.NewClient(kc).Metadata(ctx, "both")
	if err != nil {
		t.Fatal(err)
	}
	nt, err := native.DescribeTopic(ctx, "both")
	if err != nil {
		t.Fatal(err)
	}
	if [16]byte(md.Topics["both"].ID) != [16]byte(nt.Topic.ID) {
		t.Fatalf("topic id: kafka %s, native %x", md.Topics["both"].ID, nt.Topic.ID)
	}
	// Metadata by topic id alone (v10+) finds the same topic.
	byID := kmsg.NewPtrMetadataRequest()
	byID.Topics = []kmsg.MetadataRequestTopic{{TopicID: [16]byte(nt.Topic.ID)}}
	mresp, err := byID.RequestWith(ctx, kc)
	if err != nil || len(mresp.Topics) != 1 || mresp.Topics[0].Topic == nil || *mresp.Topics[0].Topic != "both" {
		t.Fatalf("metadata by id: %+v, %v", mresp, err)
	}
	// Cluster status names the node's Kafka address.
	st, err := native.ClusterStatus(ctx)
	if err != nil || len(st.Nodes) != 1 || st.Nodes[0].KafkaAddr != kaddr {
		t.Fatalf("cluster status: %+v, %v; want kafka_addr %s", st, err, kaddr)
	}
}

// Idempotent produce through Kafka maps onto our producer ids: a retried
// batch is answered with its first offset and not appended again, a gap
// is OUT_OF_ORDER_SEQUENCE_NUMBER, a bumped epoch fences the old one,
// and transactional ids are refused.
func TestKafkaIdempotentProduce(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	kafkaCreate(t, ctx, kadm.NewClient(cl), "idem", 1, 1)

	initPID := func(id int64, epoch int16) *kmsg.InitProducerIDResponse {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.ProducerID, req.ProducerEpoch = id, epoch
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	pid := initPID(-1, -1)
	if pid.ErrorCode != 0 || pid.ProducerID <= 0 || pid.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: %+v", pid)
	}
	produce := func(epoch int16, seq int32, value string) (int64, error) {
		t.Helper()
		b, err := batch.NewBuilder(batch.Options{Idempotent: true, ProducerID: pid.ProducerID, ProducerEpoch: epoch, BaseSequence: seq})
		if err == nil {
			err = b.AppendKV(time.Now().UnixMilli(), nil, []byte(value))
		}
		records, err2 := b.Build()
		if err != nil || err2 != nil {
			t.Fatal(err, err2)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "idem"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
	}
	first, err := produce(0, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := produce(0, 0, "a"); err != nil || again != first {
		t.Fatalf("retried batch: offset %d, %v; want %d", again, err, first)
	}
	if _, err := produce(0, 5, "gap"); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("a sequence gap: %v", err)
	}
	bumped := initPID(pid.ProducerID, pid.ProducerEpoch)
	if bumped.ErrorCode != 0 || bumped.ProducerID != pid.ProducerID || bumped.ProducerEpoch != 1 {
		t.Fatalf("bump: %+v", bumped)
	}
	if _, err := produce(1, 0, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := produce(0, 1, "old epoch"); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the old epoch: %v", err)
	}
	// A transactional InitProducerId, sent to the node itself (its only
	// node coordinates every transactional id): while the transaction
	// state's partitions are still opening the answer is Kafka's retriable
	// COORDINATOR_LOAD_IN_PROGRESS, then a producer id of its own.
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.TransactionalID = kmsgString("txn")
	txn.TransactionTimeoutMillis = 10000
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := cl.Broker(1).Request(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		resp := r.(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode == 0 {
			if resp.ProducerID == pid.ProducerID || resp.ProducerEpoch != 0 {
				t.Fatalf("transactional id: %+v, want a producer id of its own at epoch 0", resp)
			}
			break
		}
		if e := kerr.ErrorForCode(resp.ErrorCode); !kerr.IsRetriable(e) || time.Now().After(deadline) {
			t.Fatalf("transactional id: %+v (%v)", resp, e)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// One copy of "a", one of "b".
	hw, err := kadm.NewClient(cl).ListEndOffsets(ctx, "idem")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := hw.Lookup("idem", 0); o.Offset != first+2 {
		t.Fatalf("end offset %d, want %d (a, b)", o.Offset, first+2)
	}
}
