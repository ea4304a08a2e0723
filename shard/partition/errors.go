package partition

import (
	"errors"
	"fmt"
)

// The errors a replica answers requests with. Each reaches the caller
// wrapped in an *Error, which carries the precise message and, for routing
// errors, where to go instead; callers test the kind with errors.Is.
//
// The replica speaks no protocol: the layer above maps each kind onto its
// protocol's code (the native wire table, Kafka's table), one table per
// protocol, so a front end added later cannot drift from the others.
var (
	// ErrNotPrimary: this replica is not the partition's primary (or is
	// closing); the *Error's hint names the primary when it is known.
	ErrNotPrimary = errors.New("partition: not the primary")
	// ErrStaleGeneration: the request was routed with a generation older
	// than the primary's current one; the hint carries the current one.
	ErrStaleGeneration = errors.New("partition: stale generation")
	// ErrPrimaryNotAvailable: the primary has not committed an entry of its
	// own term yet, so it cannot answer reads truthfully; retry shortly.
	ErrPrimaryNotAvailable = errors.New("partition: primary not available")
	// ErrNotEnoughReplicas: fewer than a majority of the replicas are
	// reachable, so a write could not commit until one returns.
	ErrNotEnoughReplicas = errors.New("partition: not enough replicas")
	// ErrOffsetOutOfRange: a read asked for an offset outside the log.
	ErrOffsetOutOfRange = errors.New("partition: offset out of range")
	// ErrStorage: the replica's log failed or the replica is offline.
	ErrStorage = errors.New("partition: storage error")
	// ErrBatchTooLarge: a produced batch is larger than the log accepts.
	ErrBatchTooLarge = errors.New("partition: batch too large")
	// ErrCorruptBatch: a produced batch failed validation (length, CRC).
	ErrCorruptBatch = errors.New("partition: corrupt batch")
	// ErrInvalidBatch: a produced batch is well formed but not allowed (a
	// control batch), or consensus refused it for a reason no retry fixes.
	ErrInvalidBatch = errors.New("partition: invalid batch")
	// ErrTimedOut: a produce was not acknowledged within its timeout; the
	// write may still commit.
	ErrTimedOut = errors.New("partition: timed out")
	// ErrBusy: too many bytes wait for replication; retry shortly.
	ErrBusy = errors.New("partition: busy")
	// ErrUnknownProducer: an idempotent producer this partition does not
	// remember sent a batch that does not start its sequence.
	ErrUnknownProducer = errors.New("partition: unknown producer")
	// ErrFencedProducerEpoch: a producer's epoch is older than one already
	// seen.
	ErrFencedProducerEpoch = errors.New("partition: fenced producer epoch")
	// ErrOutOfOrderSequence: a producer's batch does not continue its
	// sequence.
	ErrOutOfOrderSequence = errors.New("partition: out of order sequence")
	// ErrDuplicateSequence: a producer's batch is older than the batches
	// remembered for it.
	ErrDuplicateSequence = errors.New("partition: duplicate sequence")
)

// ErrorKinds lists every kind above, for the tables that map them onto a
// protocol's codes (each such table has a test that it covers them all).
func ErrorKinds() []error {
	return []error{ErrNotPrimary, ErrStaleGeneration, ErrPrimaryNotAvailable, ErrNotEnoughReplicas,
		ErrOffsetOutOfRange, ErrStorage, ErrBatchTooLarge, ErrCorruptBatch, ErrInvalidBatch, ErrTimedOut,
		ErrBusy, ErrUnknownProducer, ErrFencedProducerEpoch, ErrOutOfOrderSequence, ErrDuplicateSequence}
}

// GenerationUnknown is the generation of a request that does not name
// one: the routing checks skip the generation comparison.
const GenerationUnknown int32 = -1

// Error is a replica's answer to a request it refuses.
type Error struct {
	// Kind is one of the sentinels above.
	Kind error
	// Message says what failed and why, for the client.
	Message string
	// Leader is the node the replica believes is primary, and Generation
	// its term; Leader is 0 when the replica gives no hint.
	Leader, Generation int32
	// RetryAfterMs is the advice to wait before retrying; 0 when none.
	RetryAfterMs uint32
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the kind, so that errors.Is(err, ErrNotPrimary) works.
func (e *Error) Unwrap() error { return e.Kind }

// errorf builds an *Error of kind with a formatted message.
func errorf(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}
