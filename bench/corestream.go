package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// primaryPollInterval is how often Prepare looks whether every partition
// of a new topic has a primary.
const primaryPollInterval = 20 * time.Millisecond

// Corestream is the System for corestream, driven through the Go SDK
// (package client) with its defaults except where the Spec says
// otherwise.
type Corestream struct {
	admin *client.Client
}

// NewCorestream returns the corestream System.
func NewCorestream() *Corestream { return &Corestream{} }

// Name returns "corestream".
func (*Corestream) Name() string { return "corestream" }

// Settings lists the producer and consumer options used.
func (*Corestream) Settings(spec *Spec) map[string]string {
	m := map[string]string{
		"client":      "corestream Go SDK, one client per actor",
		"idempotence": "on",
		"acks":        spec.Acks,
		"compression": spec.Compression,
		"connections": "one per shard used (Home)",
	}
	if spec.SingleConn {
		m["connections"] = "one per node"
	}
	if spec.Sync {
		m["produce"] = "Produce (synchronous), linger -1"
	} else {
		m["produce"] = "ProduceAsync, sticky partitioner"
		m["batch_bytes"] = strconv.Itoa(spec.BatchBytes)
		m["linger"] = spec.Linger.String()
	}
	return m
}

func (cs *Corestream) dial(ctx context.Context, spec *Spec, id string) (*client.Client, error) {
	return client.DialConfig(ctx, client.Config{Brokers: spec.Brokers, ClientID: id, SingleConnPerNode: spec.SingleConn})
}

// Prepare creates the topic when missing and waits until every partition
// has a primary.
func (cs *Corestream) Prepare(ctx context.Context, spec *Spec) error {
	c, err := cs.dial(ctx, spec, "corestream-bench-admin")
	if err != nil {
		return err
	}
	cs.admin = c
	_, err = c.CreateTopic(ctx, client.TopicSpec{Name: spec.Topic, Partitions: int32(spec.Partitions),
		ReplicationFactor: int16(spec.ReplicationFactor)})
	if err != nil && !errors.Is(err, wire.ErrTopicAlreadyExists) {
		return err
	}
	for {
		d, err := c.DescribeTopic(ctx, spec.Topic)
		if err == nil && allHavePrimary(d.Topic.Partitions) {
			if n := len(d.Topic.Partitions); n < spec.Partitions {
				return fmt.Errorf("topic %s exists with %d partitions, fewer than %d", spec.Topic, n, spec.Partitions)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("not every partition has a primary")
			}
			return fmt.Errorf("waiting for topic %s: %w (%w)", spec.Topic, ctx.Err(), err)
		case <-time.After(primaryPollInterval):
		}
	}
}

func allHavePrimary(parts []wire.PartitionRoute) bool {
	for _, p := range parts {
		if p.PrimaryID <= 0 || p.ErrorCode != 0 {
			return false
		}
	}
	return len(parts) > 0
}

// Close closes the admin client.
func (cs *Corestream) Close() error {
	if cs.admin == nil {
		return nil
	}
	return cs.admin.Close()
}

// NewProducer returns a producer with its own client.
func (cs *Corestream) NewProducer(ctx context.Context, spec *Spec, index int) (Producer, error) {
	codec, err := ParseCodec(spec.Compression)
	if err != nil {
		return nil, err
	}
	c, err := cs.dial(ctx, spec, fmt.Sprintf("corestream-bench-producer-%d", index))
	if err != nil {
		return nil, err
	}
	cfg := client.ProducerConfig{Linger: spec.Linger, BatchBytesMax: spec.BatchBytes, Compression: codec, Acks: wire.AcksQuorum}
	if spec.Acks == "primary" {
		cfg.Acks = wire.AcksPrimary
	}
	if spec.Sync {
		cfg.Linger = -1
	}
	p, err := c.NewProducer(ctx, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &csProducer{c: c, p: p, topic: spec.Topic, sync: spec.Sync}, nil
}

// ParseCodec reads a compression name.
func ParseCodec(s string) (batch.Codec, error) {
	for _, c := range []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: compression %q is not one of none, gzip, snappy, lz4, zstd", ErrSpec, s)
}

type csProducer struct {
	c     *client.Client
	p     *client.Producer
	topic string
	sync  bool
}

// Send sends value with a null key: the SDK's default partitioner puts
// it on its sticky round robin, whatever partition says.
func (p *csProducer) Send(ctx context.Context, _ int, value []byte, done func(error)) error {
	rec := client.Record{Topic: p.topic, Value: value}
	if p.sync {
		_, err := p.p.Produce(ctx, rec)
		done(err)
		return nil
	}
	return p.p.ProduceAsync(ctx, rec, func(_ client.Produced, err error) { done(err) })
}

func (p *csProducer) Flush(ctx context.Context) error { return p.p.Flush(ctx) }

func (p *csProducer) Close(ctx context.Context) error {
	err := p.p.Close(ctx)
	return errors.Join(err, p.c.Close())
}

// NewConsumer returns a consumer with its own client, assigned its
// partitions.
func (cs *Corestream) NewConsumer(ctx context.Context, spec *Spec, index int, partitions []int, start Start) (Consumer, error) {
	c, err := cs.dial(ctx, spec, fmt.Sprintf("corestream-bench-consumer-%d", index))
	if err != nil {
		return nil, err
	}
	cons, err := c.NewConsumer(client.ConsumerConfig{})
	if err != nil {
		c.Close()
		return nil, err
	}
	parts := make([]int32, len(partitions))
	for i, p := range partitions {
		parts[i] = int32(p)
	}
	from := client.StartEarliest
	if start == StartLatest {
		from = client.StartLatest
	}
	if err := cons.Assign(ctx, spec.Topic, parts, from); err != nil {
		cons.Close()
		c.Close()
		return nil, err
	}
	return &csConsumer{c: c, cs: cons}, nil
}

type csConsumer struct {
	c  *client.Client
	cs *client.Consumer
}

func (c *csConsumer) Run(ctx context.Context, fn func([]byte), onErr func(error)) error {
	for {
		recs, err := c.cs.Poll(ctx)
		for i := range recs {
			fn(recs[i].Value)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, client.ErrClosed):
			return err
		case err != nil:
			onErr(err)
		}
	}
}

func (c *csConsumer) Close() error {
	return errors.Join(c.cs.Close(), c.c.Close())
}
