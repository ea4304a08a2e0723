package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka is the System for a broker's Kafka port (corestream's Kafka
// listener), driven through franz-go with the Spec's batching, acks and
// compression, so that the same workload measures the Kafka port against
// the native one: Spec.Brokers are Kafka addresses.
type Kafka struct {
	admin *kgo.Client
}

// NewKafka returns the Kafka-port System.
func NewKafka() *Kafka { return &Kafka{} }

// Name returns "kafka".
func (*Kafka) Name() string { return "kafka" }

// Settings lists the producer and consumer options used.
func (*Kafka) Settings(spec *Spec) map[string]string {
	m := map[string]string{
		"client":      "franz-go (kgo), one client per actor",
		"idempotence": "on (acks quorum), off (acks primary: Kafka needs acks=all for it)",
		"acks":        spec.Acks,
		"compression": spec.Compression,
	}
	if spec.Sync {
		m["produce"] = "ProduceSync, linger 0"
	} else {
		m["produce"] = "Produce (async), sticky partitioner"
		m["batch_bytes"] = strconv.Itoa(spec.BatchBytes)
		m["linger"] = spec.Linger.String()
	}
	return m
}

// kafkaCodec is franz-go's codec for a Spec's compression name.
func kafkaCodec(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("%w: compression %q is not one of none, gzip, snappy, lz4, zstd", ErrSpec, s)
}

// Prepare creates the topic when missing and waits until every partition
// has a leader.
func (k *Kafka) Prepare(ctx context.Context, spec *Spec) error {
	c, err := kgo.NewClient(kgo.SeedBrokers(spec.Brokers...), kgo.ClientID("corestream-bench-admin"))
	if err != nil {
		return err
	}
	k.admin = c
	adm := kadm.NewClient(c)
	rf := int16(spec.ReplicationFactor)
	if rf == 0 {
		rf = -1 // the cluster's default
	}
	res, err := adm.CreateTopic(ctx, int32(spec.Partitions), rf, nil, spec.Topic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	for {
		md, err := adm.Metadata(ctx, spec.Topic)
		if err == nil {
			if t, ok := md.Topics[spec.Topic]; ok && t.Err == nil && kafkaAllHaveLeader(t) {
				if n := len(t.Partitions); n < spec.Partitions {
					return fmt.Errorf("topic %s exists with %d partitions, fewer than %d", spec.Topic, n, spec.Partitions)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for topic %s: %w", spec.Topic, ctx.Err())
		case <-time.After(primaryPollInterval):
		}
	}
}

func kafkaAllHaveLeader(t kadm.TopicDetail) bool {
	for _, p := range t.Partitions {
		if p.Leader <= 0 || p.Err != nil {
			return false
		}
	}
	return len(t.Partitions) > 0
}

// Close closes the admin client.
func (k *Kafka) Close() error {
	if k.admin != nil {
		k.admin.Close()
	}
	return nil
}

// NewProducer returns a producer with its own client.
func (k *Kafka) NewProducer(ctx context.Context, spec *Spec, index int) (Producer, error) {
	codec, err := kafkaCodec(spec.Compression)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(spec.Brokers...), kgo.ClientID(fmt.Sprintf("corestream-bench-producer-%d", index)),
		kgo.DefaultProduceTopic(spec.Topic), kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(int32(spec.BatchBytes)), kgo.ProducerLinger(spec.Linger)}
	if spec.Acks == "primary" {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	if spec.Sync {
		opts = append(opts, kgo.ProducerLinger(0))
	}
	c, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &kafkaProducer{c: c, sync: spec.Sync}, nil
}

type kafkaProducer struct {
	c    *kgo.Client
	sync bool
	mu   sync.Mutex // serialises done calls, which franz-go makes from its own goroutines
}

// Send copies value (franz-go keeps the record until it is acknowledged)
// and produces it with a null key: franz-go's sticky partitioner.
func (p *kafkaProducer) Send(ctx context.Context, _ int, value []byte, done func(error)) error {
	rec := &kgo.Record{Value: append([]byte(nil), value...)}
	if p.sync {
		done(p.c.ProduceSync(ctx, rec).FirstErr())
		return nil
	}
	p.c.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		done(err)
	})
	return nil
}

func (p *kafkaProducer) Flush(ctx context.Context) error { return p.c.Flush(ctx) }

func (p *kafkaProducer) Close(ctx context.Context) error {
	err := p.c.Flush(ctx)
	p.c.Close()
	return err
}

// NewConsumer returns a consumer with its own client, reading its
// partitions directly (no group).
func (k *Kafka) NewConsumer(ctx context.Context, spec *Spec, index int, partitions []int, start Start) (Consumer, error) {
	at := kgo.NewOffset().AtStart()
	if start == StartLatest {
		at = kgo.NewOffset().AtEnd()
	}
	parts := map[int32]kgo.Offset{}
	for _, p := range partitions {
		parts[int32(p)] = at
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(spec.Brokers...), kgo.ClientID(fmt.Sprintf("corestream-bench-consumer-%d", index)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{spec.Topic: parts}))
	if err != nil {
		return nil, err
	}
	return &kafkaConsumer{c: c}, nil
}

type kafkaConsumer struct{ c *kgo.Client }

func (c *kafkaConsumer) Run(ctx context.Context, fn func([]byte), onErr func(error)) error {
	for {
		fs := c.c.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { fn(r.Value) })
		if ctx.Err() != nil {
			return nil
		}
		if fs.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				onErr(err)
			}
		})
	}
}

func (c *kafkaConsumer) Close() error {
	c.c.Close()
	return nil
}
