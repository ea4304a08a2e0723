package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/segment/batch"
)

// A topic's max.message.bytes replaces the node's storage.max_batch_bytes
// for that topic, above it as well as below, as Kafka's topic override
// replaces message.max.bytes: on three nodes whose storage bound is 64
// KiB, a 512 KiB batch lands on a topic that allows 1 MiB, is replicated
// to both followers (their logs take it too) and is read back whole,
// while a topic without the override still refuses a 100 KiB batch.
// Beyond the record format's 16 MiB the config is refused naming it.
func TestKafkaMaxMessageBytesAboveNodeBound(t *testing.T) {
	_, kports := startKafkaCluster(t, func(c *config.Config) { c.Storage.MaxBatchBytes = 64 << 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := kafkaClient(t, kports, kgo.ProducerBatchMaxBytes(2<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	for {
		res, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"max.message.bytes": kadm.StringPtr("1048576")}, "big")
		if err == nil && res.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create big: %v %v", err, res.Err)
		}
		time.Sleep(100 * time.Millisecond) // the metadata primary is being elected
	}
	kafkaCreateRetrying(t, ctx, adm, "small", 1, 3)

	value := make([]byte, 512<<10)
	rand.Read(value) // incompressible
	deadline := time.Now().Add(30 * time.Second)
	for err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: value}).FirstErr(); err != nil; err = cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: value}).FirstErr() {
		if errors.Is(err, kerr.MessageTooLarge) || time.Now().After(deadline) {
			t.Fatalf("a 512 KiB record under the topic's max.message.bytes 1 MiB: %v", err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: value[:100<<10]}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 100 KiB record over storage.max_batch_bytes 64 KiB: %v, want MESSAGE_TOO_LARGE", err)
	}

	// Acknowledged with acks=all: the followers' logs hold it. Read it
	// back from offset 0.
	cons := kafkaClient(t, kports, kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) != 1 || recs[0].Offset != 0 || !bytes.Equal(recs[0].Value, value) {
		t.Fatalf("read back %d records (first at %v), want the 512 KiB one at 0", len(recs), recs)
	}

	over := strconv.Itoa(batch.BatchBytesMax + 1)
	res, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"max.message.bytes": &over}, "too-big")
	if err == nil {
		err = res.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(res.ErrMessage, "max.message.bytes") {
		t.Fatalf("max.message.bytes=%s: %v (%q), want INVALID_CONFIG naming it", over, err, res.ErrMessage)
	}
}
