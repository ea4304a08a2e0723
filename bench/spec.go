package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Mode says what a workload does.
type Mode string

// The workload modes.
const (
	// ModeProduce sends messages and measures produce call → acknowledgement.
	ModeProduce Mode = "produce"
	// ModeConsume reads messages already in the topic (after preloading
	// them, by default) and measures read throughput.
	ModeConsume Mode = "consume"
	// ModeE2E produces and consumes at once and measures produce call →
	// consumer receipt.
	ModeE2E Mode = "e2e"
)

// Limits on a workload, so a typo cannot ask for a machine-sized run.
const (
	actorsMax       = 256 // each actor holds a ~210 KiB histogram
	partitionsMax   = 16384
	messageBytesMin = headerBytes
	messageBytesMax = 4 << 20
	batchBytesMax   = 16 << 20
	// drainTimeoutDefault bounds how long e2e consumers wait, after the
	// producers finished, for the last acknowledged messages.
	drainTimeoutDefault = 10 * time.Second
)

// ErrSpec is wrapped by every error Spec.Validate returns.
var ErrSpec = errors.New("bench: invalid workload")

// Spec is one workload. The zero value is not valid; DefaultSpec returns
// the defaults the flags document.
type Spec struct {
	// Mode is produce, consume or e2e.
	Mode Mode `json:"mode"`
	// Brokers are the seed addresses of the system under test.
	Brokers []string `json:"brokers"`
	// Topic is the topic (a stream for NATS) the workload uses; created
	// with Partitions and ReplicationFactor when missing.
	Topic string `json:"topic"`
	// Partitions of a topic created by the run. 1..16384.
	Partitions int `json:"partitions"`
	// ReplicationFactor of a topic created by the run; 0 is the system's
	// default.
	ReplicationFactor int `json:"replication_factor"`
	// Producers and Consumers are the actors; each has its own connection.
	Producers int `json:"producers"`
	Consumers int `json:"consumers"`
	// MessageBytes is each message's value size, at least headerBytes.
	MessageBytes int `json:"message_bytes"`
	// BatchBytes and Linger are the producer's batching (corestream; the
	// peer has no client-side batches).
	BatchBytes int           `json:"batch_bytes"`
	Linger     time.Duration `json:"linger_ns"`
	// Acks is "quorum" or "primary".
	Acks string `json:"acks"`
	// Sync makes each producer send one message and wait for its
	// acknowledgement before the next (no batching, no pipelining).
	Sync bool `json:"sync"`
	// Messages is the number of measured messages (all producers
	// together); 0 means run for Duration. In consume mode it is the
	// number of messages read (and preloaded).
	Messages int64 `json:"messages"`
	// Duration is how long the measured part runs when Messages is 0.
	Duration time.Duration `json:"duration_ns"`
	// Rate limits all producers together, in messages per second; 0 means
	// as fast as they go.
	Rate float64 `json:"rate"`
	// Compression is none, gzip, snappy, lz4 or zstd (corestream only).
	Compression string `json:"compression"`
	// Warmup runs before the measured part; its messages count nowhere.
	Warmup time.Duration `json:"warmup_ns"`
	// Preload, in consume mode, produces Messages messages before reading.
	Preload bool `json:"preload"`
	// DrainTimeout bounds the e2e consumers' wait for the last messages.
	DrainTimeout time.Duration `json:"drain_timeout_ns"`
	// Seed fills message values (incompressible pseudo-random bytes).
	Seed int64 `json:"seed"`
	// SingleConn turns the SDK's shard-aware connections off (corestream
	// only): every request goes on one connection per node, the A of an
	// A/B measurement of them.
	SingleConn bool `json:"single_conn,omitempty"`
}

// DefaultSpec returns the defaults of every field (the flags' defaults).
func DefaultSpec(mode Mode) Spec {
	s := Spec{
		Mode: mode, Topic: "bench", Partitions: 1, Producers: 1, Consumers: 1,
		MessageBytes: 1 << 10, BatchBytes: 64 << 10, Linger: 5 * time.Millisecond,
		Acks: "quorum", Duration: 10 * time.Second, Compression: "none",
		Warmup: 2 * time.Second, Preload: true, DrainTimeout: drainTimeoutDefault, Seed: 1,
	}
	switch mode {
	case ModeProduce:
		s.Consumers = 0
	case ModeConsume:
		s.Producers = 1 // preloading
		s.Messages = 1_000_000
		s.Duration = 0
	}
	return s
}

// AddFlags registers the workload's flags on fs with s's values as
// defaults. Brokers are not among them: each binary names its own.
func (s *Spec) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.Topic, "topic", s.Topic, "topic (stream) to use; created when missing")
	fs.IntVar(&s.Partitions, "partitions", s.Partitions, "partitions of a topic the run creates")
	fs.IntVar(&s.ReplicationFactor, "replication-factor", s.ReplicationFactor, "copies of each partition of a topic the run creates (0: the system's default)")
	fs.IntVar(&s.Producers, "producers", s.Producers, "producers, each with its own connection")
	fs.IntVar(&s.Consumers, "consumers", s.Consumers, "consumers, each with its own connection, splitting the partitions")
	fs.IntVar(&s.MessageBytes, "message-bytes", s.MessageBytes, fmt.Sprintf("bytes of each message value (at least %d)", headerBytes))
	fs.IntVar(&s.BatchBytes, "batch-bytes", s.BatchBytes, "producer batch size in bytes")
	fs.DurationVar(&s.Linger, "linger", s.Linger, "how long a producer batch waits for more messages")
	fs.StringVar(&s.Acks, "acks", s.Acks, "acknowledgement level: quorum or primary")
	fs.BoolVar(&s.Sync, "sync", s.Sync, "one message at a time: each produce waits for its acknowledgement")
	fs.Int64Var(&s.Messages, "messages", s.Messages, "measured messages, all producers together (0: run for --duration)")
	fs.DurationVar(&s.Duration, "duration", s.Duration, "measured time when --messages is 0")
	fs.Float64Var(&s.Rate, "rate", s.Rate, "messages per second, all producers together (0: unlimited)")
	fs.StringVar(&s.Compression, "compression", s.Compression, "batch compression: none, gzip, snappy, lz4, zstd")
	fs.DurationVar(&s.Warmup, "warmup", s.Warmup, "time before measuring; its messages count nowhere")
	fs.BoolVar(&s.Preload, "preload", s.Preload, "consume: produce --messages messages before reading them")
	fs.DurationVar(&s.DrainTimeout, "drain-timeout", s.DrainTimeout, "e2e: how long consumers wait for the last messages after producers finish")
	fs.Int64Var(&s.Seed, "seed", s.Seed, "seed of the message contents")
	fs.BoolVar(&s.SingleConn, "single-conn", s.SingleConn, "corestream: one connection per node, not one per shard used (shard-aware connections off)")
}

// Validate checks every field against its bounds.
func (s *Spec) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrSpec, fmt.Sprintf(format, args...))
	}
	switch s.Mode {
	case ModeProduce, ModeConsume, ModeE2E:
	default:
		return bad("mode %q is not produce, consume or e2e", s.Mode)
	}
	switch {
	case len(s.Brokers) == 0:
		return bad("no brokers")
	case s.Topic == "":
		return bad("no topic")
	case s.Partitions < 1 || s.Partitions > partitionsMax:
		return bad("--partitions %d is outside 1..%d", s.Partitions, partitionsMax)
	case s.ReplicationFactor < 0 || s.ReplicationFactor > 32:
		return bad("--replication-factor %d is outside 0..32", s.ReplicationFactor)
	case s.Producers < 0 || s.Producers > actorsMax || s.Consumers < 0 || s.Consumers > actorsMax:
		return bad("producers and consumers must be within 0..%d", actorsMax)
	case s.MessageBytes < messageBytesMin || s.MessageBytes > messageBytesMax:
		return bad("--message-bytes %d is outside %d..%d", s.MessageBytes, messageBytesMin, messageBytesMax)
	case s.BatchBytes < 1 || s.BatchBytes > batchBytesMax:
		return bad("--batch-bytes %d is outside 1..%d", s.BatchBytes, batchBytesMax)
	case s.Messages < 0 || s.Duration < 0 || s.Rate < 0 || s.Warmup < 0 || s.DrainTimeout < 0:
		return bad("--messages, --duration, --rate, --warmup and --drain-timeout must not be negative")
	case s.Messages == 0 && s.Duration == 0:
		return bad("give --messages or --duration")
	}
	switch s.Acks {
	case "quorum", "primary":
	default:
		return bad("--acks %q is not quorum or primary", s.Acks)
	}
	switch s.Compression {
	case "none", "gzip", "snappy", "lz4", "zstd":
	default:
		return bad("--compression %q is not one of none, gzip, snappy, lz4, zstd", s.Compression)
	}
	switch s.Mode {
	case ModeProduce:
		if s.Producers < 1 {
			return bad("produce needs at least one producer")
		}
	case ModeE2E:
		if s.Producers < 1 || s.Consumers < 1 {
			return bad("e2e needs producers and consumers")
		}
	case ModeConsume:
		if s.Consumers < 1 {
			return bad("consume needs at least one consumer")
		}
		if s.Messages == 0 {
			return bad("consume needs --messages")
		}
		if s.Preload && s.Producers < 1 {
			return bad("--preload needs at least one producer")
		}
	}
	if s.Consumers > s.Partitions {
		return bad("%d consumers for %d partitions: each consumer needs a partition", s.Consumers, s.Partitions)
	}
	return nil
}

// BrokerList splits a comma-separated list of addresses.
func BrokerList(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// consumerPartitions returns the partitions consumer i of n reads: every
// partition p with p mod n == i.
func consumerPartitions(partitions, i, n int) []int {
	var out []int
	for p := i; p < partitions; p += n {
		out = append(out, p)
	}
	return out
}

// share returns producer i's part of total among n: the total split as
// evenly as possible, the first ones taking the remainder.
func share(total int64, i, n int) int64 {
	q, r := total/int64(n), total%int64(n)
	if int64(i) < r {
		return q + 1
	}
	return q
}

// Args returns the command-line flags that reproduce s (every field but
// Mode and Brokers), for a load-generator process.
func (s *Spec) Args() []string {
	itoa := strconv.Itoa
	return []string{
		"--topic", s.Topic, "--partitions", itoa(s.Partitions), "--replication-factor", itoa(s.ReplicationFactor),
		"--producers", itoa(s.Producers), "--consumers", itoa(s.Consumers),
		"--message-bytes", itoa(s.MessageBytes), "--batch-bytes", itoa(s.BatchBytes), "--linger", s.Linger.String(),
		"--acks", s.Acks, "--sync=" + strconv.FormatBool(s.Sync),
		"--messages", strconv.FormatInt(s.Messages, 10), "--duration", s.Duration.String(),
		"--rate", strconv.FormatFloat(s.Rate, 'g', -1, 64), "--compression", s.Compression,
		"--warmup", s.Warmup.String(), "--preload=" + strconv.FormatBool(s.Preload),
		"--drain-timeout", s.DrainTimeout.String(), "--seed", strconv.FormatInt(s.Seed, 10),
	}
}
