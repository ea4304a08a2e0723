package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The Kafka side of a run (Options.Client "kafka"): the writers, the
// tails and the group's members are franz-go clients of the nodes' Kafka
// listeners, each at franz-go's defaults but for what the workload needs
// (partitions chosen by the writer, the delivery timeout, the linger of
// the SDK's run, the group's own commits).

// Clients a run can drive.
const (
	ClientSDK   = "sdk"
	ClientKafka = "kafka"
)

// kafkaConf is what every Kafka client of a run is made with: the seeds
// and the metadata min age (0: franz-go's default).
type kafkaConf struct {
	seeds          []string
	metadataMinAge time.Duration
}

// opts are the options every Kafka client of a run starts from: the
// seeds, the first-th of them first (so that clients spread their first
// connections over the nodes).
func (c kafkaConf) opts(first int) []kgo.Opt {
	n := first % len(c.seeds)
	ordered := append(append([]string(nil), c.seeds[n:]...), c.seeds[:n]...)
	o := []kgo.Opt{kgo.SeedBrokers(ordered...), kgo.ClientID("chaos")}
	if c.metadataMinAge > 0 {
		o = append(o, kgo.MetadataMinAge(c.metadataMinAge))
	}
	return o
}

// kafkaSender sends through one franz-go client: idempotent, acks=all
// (its defaults), the partition chosen by the writer.
type kafkaSender struct{ cl *kgo.Client }

func newKafkaSender(c kafkaConf, linger, deliveryTimeout time.Duration) (kafkaSender, error) {
	cl, err := kgo.NewClient(append(c.opts(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(max(linger, 0)),
		kgo.RecordDeliveryTimeout(deliveryTimeout))...)
	if err != nil {
		return kafkaSender{}, fmt.Errorf("chaos: the Kafka producer: %w", err)
	}
	return kafkaSender{cl}, nil
}

func (s kafkaSender) send(ctx context.Context, p part, seq int64, done func(int64, error)) error {
	s.cl.Produce(ctx, &kgo.Record{Topic: p.Topic, Partition: p.Partition, Key: Key(seq), Value: Value(p.String(), seq)},
		func(r *kgo.Record, err error) {
			if err != nil {
				done(-1, err)
				return
			}
			done(r.Offset, nil)
		})
	return nil
}

func (s kafkaSender) close(ctx context.Context) error {
	err := s.cl.Flush(ctx)
	s.cl.Close()
	return err
}

// kafkaPoller reads every partition of a topic from its start by
// assignment (no group).
type kafkaPoller struct{ cl *kgo.Client }

func newKafkaPoller(c kafkaConf, first int, topic string, partitions int) (kafkaPoller, error) {
	parts := map[int32]kgo.Offset{}
	for p := 0; p < partitions; p++ {
		parts[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(c.opts(first),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))...)
	if err != nil {
		return kafkaPoller{}, fmt.Errorf("chaos: the Kafka consumer of %s: %w", topic, err)
	}
	return kafkaPoller{cl}, nil
}

func (p kafkaPoller) poll(ctx context.Context) ([]polled, error) {
	fs := p.cl.PollFetches(ctx)
	var out []polled
	fs.EachRecord(func(r *kgo.Record) { out = append(out, polled{r.Topic, r.Partition, r.Offset, r.Key}) })
	return out, fetchError(fs)
}

func (p kafkaPoller) close() { p.cl.Close() }

// fetchError is the first error of a poll that is not the poll's own end
// (its context, the client closing), with the partition it was for.
func fetchError(fs kgo.Fetches) error {
	var first error
	fs.EachError(func(topic string, partition int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrClientClosed) {
			first = fmt.Errorf("%s/%d: %w", topic, partition, err)
		}
	})
	return first
}
