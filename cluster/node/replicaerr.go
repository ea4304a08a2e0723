package node

import (
	"errors"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// replicaCodes maps each kind of error a replica answers with onto the
// native protocol's code. The replica speaks no protocol; this table (and,
// for the Kafka listener, its own table) is where its answers get their
// codes. A test checks that it covers partition.ErrorKinds.
var replicaCodes = []struct {
	kind error
	code *wire.Error
}{
	{partition.ErrNotPrimary, wire.ErrNotPrimary},
	{partition.ErrStaleGeneration, wire.ErrStaleGeneration},
	{partition.ErrPrimaryNotAvailable, wire.ErrPrimaryNotAvailable},
	{partition.ErrNotEnoughReplicas, wire.ErrNotEnoughReplicas},
	{partition.ErrOffsetOutOfRange, wire.ErrOffsetOutOfRange},
	{partition.ErrStorage, wire.ErrStorageError},
	{partition.ErrBatchTooLarge, wire.ErrMessageTooLarge},
	{partition.ErrCorruptBatch, wire.ErrCorruptMessage},
	{partition.ErrInvalidBatch, wire.ErrInvalidRequest},
	{partition.ErrTimedOut, wire.ErrRequestTimedOut},
	{partition.ErrBusy, wire.ErrBusy},
	{partition.ErrUnknownProducer, wire.ErrUnknownProducerID},
	{partition.ErrFencedProducerEpoch, wire.ErrInvalidProducerEpoch},
	{partition.ErrOutOfOrderSequence, wire.ErrOutOfOrderSequence},
	{partition.ErrDuplicateSequence, wire.ErrDuplicateSequence},
}

// The replica and the protocol share these values, so requests pass them
// through unconverted; each line fails to compile if the two ever differ.
const (
	_ = uint(partition.GenerationUnknown-wire.GenerationUnknown) + uint(wire.GenerationUnknown-partition.GenerationUnknown)
	_ = uint(partition.TimestampLatest-wire.TimestampLatest) + uint(wire.TimestampLatest-partition.TimestampLatest)
	_ = uint(partition.TimestampEarliest-wire.TimestampEarliest) + uint(wire.TimestampEarliest-partition.TimestampEarliest)
	_ = uint(partition.ProducerWindow-wire.IdempotentWindow) + uint(wire.IdempotentWindow-partition.ProducerWindow)
)

// wireError turns a replica's *partition.Error into the native protocol's
// error response, hint included; any other error is returned as it is.
func wireError(err error) error {
	var pe *partition.Error
	if !errors.As(err, &pe) {
		return err
	}
	code := wire.ErrUnknownServerError
	for _, c := range replicaCodes {
		if pe.Kind == c.kind {
			code = c.code
			break
		}
	}
	e := &wire.ErrorResponse{Err: code, Message: pe.Message, RetryAfterMs: pe.RetryAfterMs}
	if pe.Leader > 0 {
		e.Hint = &wire.Hint{NodeID: pe.Leader, Generation: pe.Generation}
	}
	return e
}
