package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/corestream/corestream/bench"
)

// stallWait is how long an async publish may wait for room among the
// pending messages before it fails: long, as corestream's ProduceAsync
// waits for buffer space under its context.
const stallWait = time.Minute

// natsJS is the bench.System for NATS JetStream: a topic is a stream with
// file storage whose subjects are TOPIC.<partition>.
type natsJS struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func (*natsJS) Name() string { return "nats-jetstream" }

func (*natsJS) Settings(spec *bench.Spec) map[string]string {
	m := map[string]string{
		"client":  "nats.go " + nats.Version + " jetstream API, one connection per actor",
		"stream":  fmt.Sprintf("file storage, %d replicas, subjects %s.<partition>", max(spec.ReplicationFactor, 1), spec.Topic),
		"consume": "ordered consumer (ephemeral, no acks), default pull buffer",
	}
	if spec.Sync {
		m["produce"] = "Publish (synchronous)"
	} else {
		m["produce"] = "PublishMsgAsync, nats.go's default max pending (4000), sticky subject per batch"
	}
	return m
}

func connect(spec *bench.Spec, name string) (*nats.Conn, error) {
	return nats.Connect(strings.Join(spec.Brokers, ","), nats.Name(name))
}

// Prepare creates the stream (or checks an existing one).
func (n *natsJS) Prepare(ctx context.Context, spec *bench.Spec) error {
	nc, err := connect(spec, "bench-admin")
	if err != nil {
		return err
	}
	n.nc = nc
	if n.js, err = jetstream.New(nc); err != nil {
		return err
	}
	_, err = n.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: spec.Topic, Subjects: []string{spec.Topic + ".>"}, Storage: jetstream.FileStorage,
		Replicas: max(spec.ReplicationFactor, 1), Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
	})
	return err
}

func (n *natsJS) Close() error {
	if n.nc != nil {
		n.nc.Close()
	}
	return nil
}

func (n *natsJS) NewProducer(ctx context.Context, spec *bench.Spec, index int) (bench.Producer, error) {
	nc, err := connect(spec, fmt.Sprintf("bench-producer-%d", index))
	if err != nil {
		return nil, err
	}
	p := &natsProducer{nc: nc, topic: spec.Topic, partitions: spec.Partitions, sync: spec.Sync,
		perBatch: max(spec.BatchBytes/spec.MessageBytes, 1), pending: map[*nats.Msg]func(error){}}
	// The async publisher keeps nats.go's default max pending (4000
	// messages): with corestream's budget (32 MiB, 32768 such messages)
	// NATS was slower, and with sync_interval always it acknowledged
	// nothing for over ten seconds.
	p.js, err = jetstream.New(nc,
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { p.complete(m, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { p.complete(m, err) }))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return p, nil
}

// natsProducer publishes to TOPIC.<partition>, moving to the next
// partition after a batch's worth of messages (like corestream's sticky
// partitioner).
type natsProducer struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	topic      string
	partitions int
	sync       bool
	perBatch   int
	// sent and partition pick the subject; owned by the sending goroutine.
	sent, partition int

	mu sync.Mutex // guards pending and serialises done calls
	// pending maps each async message to its completion.
	pending map[*nats.Msg]func(error)
}

func (p *natsProducer) subject(partition int) string {
	if partition == bench.AnyPartition {
		if p.sent%p.perBatch == 0 && p.sent > 0 {
			p.partition = (p.partition + 1) % p.partitions
		}
		partition = p.partition
		p.sent++
	}
	return p.topic + "." + strconv.Itoa(partition)
}

func (p *natsProducer) Send(ctx context.Context, partition int, value []byte, done func(error)) error {
	m := &nats.Msg{Subject: p.subject(partition), Data: append([]byte(nil), value...)}
	if p.sync {
		_, err := p.js.PublishMsg(ctx, m)
		done(err)
		return nil
	}
	p.mu.Lock()
	p.pending[m] = done
	p.mu.Unlock()
	if _, err := p.js.PublishMsgAsync(m, jetstream.WithStallWait(stallWait)); err != nil {
		p.mu.Lock()
		delete(p.pending, m)
		p.mu.Unlock()
		return err
	}
	return nil
}

// complete runs the done function of m, once.
func (p *natsProducer) complete(m *nats.Msg, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if done, ok := p.pending[m]; ok {
		delete(p.pending, m)
		done(err)
	}
}

func (p *natsProducer) Flush(ctx context.Context) error {
	if p.sync {
		return nil
	}
	select {
	case <-p.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *natsProducer) Close(ctx context.Context) error {
	err := p.Flush(ctx)
	p.nc.Close()
	return err
}

func (n *natsJS) NewConsumer(ctx context.Context, spec *bench.Spec, index int, partitions []int, start bench.Start) (bench.Consumer, error) {
	nc, err := connect(spec, fmt.Sprintf("bench-consumer-%d", index))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if len(partitions) < spec.Partitions {
		for _, p := range partitions {
			cfg.FilterSubjects = append(cfg.FilterSubjects, spec.Topic+"."+strconv.Itoa(p))
		}
	}
	if start == bench.StartLatest {
		// Position now, before any producer sends: the consumer itself
		// is created when Run starts consuming.
		s, err := js.Stream(ctx, spec.Topic)
		if err != nil {
			nc.Close()
			return nil, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			nc.Close()
			return nil, err
		}
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = info.State.LastSeq + 1
	}
	c, err := js.OrderedConsumer(ctx, spec.Topic, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsConsumer{nc: nc, c: c}, nil
}

type natsConsumer struct {
	nc *nats.Conn
	c  jetstream.Consumer
}

func (c *natsConsumer) Run(ctx context.Context, fn func([]byte), onErr func(error)) error {
	cc, err := c.c.Consume(func(m jetstream.Msg) { fn(m.Data()) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, nats.ErrConnectionClosed) {
				onErr(err)
			}
		}))
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	<-cc.Closed()
	return nil
}

func (c *natsConsumer) Close() error {
	c.nc.Close()
	return nil
}
