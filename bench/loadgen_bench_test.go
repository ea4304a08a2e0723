package bench

import (
	"context"
	"testing"
)

// nullSystem acknowledges every message at once and keeps nothing, so a
// run against it costs only the load generator's own work per message:
// what it would take from a broker sharing its cores.
type nullSystem struct{}

func (nullSystem) Name() string                         { return "null" }
func (nullSystem) Settings(*Spec) map[string]string     { return nil }
func (nullSystem) Prepare(context.Context, *Spec) error { return nil }
func (nullSystem) Close() error                         { return nil }
func (nullSystem) NewConsumer(context.Context, *Spec, int, []int, Start) (Consumer, error) {
	return nil, nil
}
func (nullSystem) NewProducer(context.Context, *Spec, int) (Producer, error) {
	return nullProducer{}, nil
}

type nullProducer struct{}

func (nullProducer) Send(_ context.Context, _ int, _ []byte, done func(error)) error {
	done(nil)
	return nil
}
func (nullProducer) Flush(context.Context) error { return nil }
func (nullProducer) Close(context.Context) error { return nil }

// BenchmarkLoadGenerator is the load generator's CPU per produced
// message (one async producer, 1 KiB messages, acknowledged at once):
// the clock reads, the header, the callback and the tally.
func BenchmarkLoadGenerator(b *testing.B) {
	s := DefaultSpec(ModeProduce)
	s.Brokers = []string{"null"}
	s.Warmup, s.Duration = 0, 0
	s.Messages = int64(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	rep, err := Run(context.Background(), nullSystem{}, s, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if rep.Produce.Messages != int64(b.N) {
		b.Fatalf("%d messages counted, want %d", rep.Produce.Messages, b.N)
	}
}
