package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/cluster/config"
)

// Auto topic creation as Kafka clients use it: with
// cluster.auto_create_topics a producer that allows it (franz-go
// AllowAutoTopicCreation) creates its topic by producing, with
// cluster.default_partitions partitions; without the setting, or without
// the client's allowance, the topic stays unknown.
func TestKafkaAutoCreateTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	on := runNode(t, t.TempDir(), func(c *config.Config) {
		withKafka(c)
		c.Cluster.AutoCreateTopics = true
		c.Cluster.DefaultPartitions = 3
	})
	cl := kafkaClient(t, []string{on.KafkaAddr()}, kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auto-made", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to a new topic with auto creation on: %v", err)
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, "auto-made")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(td["auto-made"].Partitions); got != 3 {
		t.Fatalf("auto-created topic has %d partitions, want cluster.default_partitions = 3", got)
	}

	// The client's allowance is needed too.
	plain := kafkaClient(t, []string{on.KafkaAddr()}, kgo.RetryTimeout(2*time.Second))
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "not-allowed", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce without the client's allowance: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	// Internal names are never created.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "__mine", Value: []byte("v")}).FirstErr(); err == nil {
		t.Fatal("produce to an internal name created it")
	}

	off := runNode(t, t.TempDir(), withKafka)
	offcl := kafkaClient(t, []string{off.KafkaAddr()}, kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(2*time.Second))
	if err := offcl.ProduceSync(ctx, &kgo.Record{Topic: "auto-made", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce with auto creation off: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
