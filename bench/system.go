package bench

import "context"

// AnyPartition lets a System choose the partition of a message: its
// batch-sticky round robin where it has one.
const AnyPartition = -1

// Start is where a consumer begins.
type Start int

// The consumer starts.
const (
	// StartEarliest reads from the first message in the topic (consume).
	StartEarliest Start = iota
	// StartLatest reads only messages produced after the consumer is
	// ready (e2e: consumers are ready before the first produce).
	StartLatest
)

// A System is what a workload runs against: a broker reached through its
// own client library. Run calls its methods from several goroutines, one
// actor each.
type System interface {
	// Name names the system in reports ("corestream", "nats-jetstream").
	Name() string
	// Prepare creates spec's topic (stream) when missing, with its
	// partitions and replication factor, and returns once producers can
	// write to every partition.
	Prepare(ctx context.Context, spec *Spec) error
	// NewProducer returns producer number index with its own connection.
	NewProducer(ctx context.Context, spec *Spec, index int) (Producer, error)
	// NewConsumer returns a consumer of the given partitions with its own
	// connection, positioned at start when it returns.
	NewConsumer(ctx context.Context, spec *Spec, index int, partitions []int, start Start) (Consumer, error)
	// Settings describes the system's settings that matter to the figures
	// (client options, stream configuration); the launcher adds the
	// server's.
	Settings(spec *Spec) map[string]string
	// Close releases what Prepare opened.
	Close() error
}

// A Producer sends messages for one actor. It is used by one goroutine.
type Producer interface {
	// Send hands one message to the system for partition (or
	// AnyPartition). done is called exactly once with the outcome, unless
	// Send returns an error; calls to done of one producer never overlap.
	// With Spec.Sync, done has run when Send returns. Send must not keep
	// value after it returns.
	Send(ctx context.Context, partition int, value []byte, done func(error)) error
	// Flush waits until every message sent has completed.
	Flush(ctx context.Context) error
	// Close flushes under ctx and releases the connection.
	Close(ctx context.Context) error
}

// A Consumer receives messages for one actor.
type Consumer interface {
	// Run calls fn for every message received until ctx ends (then it
	// returns nil) or the consumer fails for good (then it returns the
	// error). Errors it recovers from (a moved primary, a retried fetch)
	// go to onErr and reading goes on. fn and onErr are called from one
	// goroutine at a time; fn must not keep value.
	Run(ctx context.Context, fn func(value []byte), onErr func(error)) error
	// Close releases the connection.
	Close() error
}
