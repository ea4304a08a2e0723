package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/cluster/config"
)

// Kafka's topic configs on CreateTopics, as Kafka Connect, Schema
// Registry and franz-go's own tests send them: max.message.bytes is
// honoured (a larger batch is MESSAGE_TOO_LARGE, a smaller one lands, and
// raising it at run time lets the larger one in); the fixed configs are
// accepted with corestream's one value and refused with any other, the
// message naming the config; DescribeConfigs lists them all.
func TestKafkaTopicConfigsOnCreate(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()}, kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RetryTimeout(3*time.Second))
	adm := kadm.NewClient(cl)

	limit := "51200"
	res, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{
		"max.message.bytes": &limit, "cleanup.policy": kadm.StringPtr("delete"),
		"message.timestamp.type": kadm.StringPtr("CreateTime"), "unclean.leader.election.enable": kadm.StringPtr("false"),
	}, "bounded")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create with Kafka configs: %v", err)
	}
	produce := func(size int) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "bounded", Value: []byte(strings.Repeat("x", size))}).FirstErr()
	}
	if err := produce(10 << 10); err != nil {
		t.Fatalf("a 10 KiB record under max.message.bytes 51200: %v", err)
	}
	if err := produce(60 << 10); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 60 KiB record over max.message.bytes 51200: %v, want MESSAGE_TOO_LARGE", err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "bounded")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc[0].Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, want := range map[string]string{"max.message.bytes": "51200", "cleanup.policy": "delete", "compression.type": "producer"} {
		if got[k] != want {
			t.Fatalf("DescribeConfigs %s = %q, want %q (all: %v)", k, got[k], want, got)
		}
	}

	// Raised at run time, on every replica.
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("204800")}}, "bounded")
	if err == nil {
		_, err = alt.On("bounded", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for err := produce(60 << 10); err != nil; err = produce(60 << 10) {
		if time.Now().After(deadline) {
			t.Fatalf("a 60 KiB record after raising max.message.bytes: %v", err)
		}
	}

	for name, value := range map[string]string{"cleanup.policy": "shred", "message.timestamp.type": "LogAppendTime",
		"unclean.leader.election.enable": "true", "max.message.bytes": "-5", "flush.ms": "10"} {
		res, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{name: kadm.StringPtr(value)}, "refused-"+strings.ReplaceAll(name, ".", "-"))
		if err == nil {
			err = res.Err
		}
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(res.ErrMessage+err.Error(), name) {
			t.Fatalf("create with %s=%s: %v (%q), want INVALID_CONFIG naming it", name, value, err, res.ErrMessage)
		}
	}
}

// DescribeConfigs of a broker lists the node's own settings under Kafka's
// broker config names with their values; another node's id is refused
// with the node to ask.
func TestKafkaDescribeBrokerConfigs(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		withKafka(c)
		c.Storage.MaxBatchBytes = 2 << 20
		c.Cluster.DefaultPartitions = 6
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, []string{n.KafkaAddr()}))
	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("1", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker 1: %v %v", err, rc.Err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, want := range map[string]string{"message.max.bytes": "2097152", "num.partitions": "6", "broker.id": "1",
		"auto.create.topics.enable": "false", "default.replication.factor": "1"} {
		if got[k] != want {
			t.Fatalf("broker config %s = %q, want %q (all: %v)", k, got[k], want, got)
		}
	}
	other, err := adm.DescribeBrokerConfigs(ctx, 7)
	if err == nil {
		if rc, oerr := other.On("7", nil); oerr == nil {
			err = rc.Err
		}
	}
	if err == nil {
		t.Fatal("describing node 7's configs on node 1 succeeded")
	}
}
