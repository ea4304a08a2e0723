package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// codes maps every native wire error onto Kafka's code: one row per
// native code, and, where a replica answers with it, the replica's error
// kind. It sits next to the native table (netio/wire/errors.go and
// cluster/node's replicaCodes) so that the two protocols cannot drift: a
// test requires a row for every native code and every replica kind, and
// freezes each pairing.
//
// The pairings are one to one where Kafka has the code. Where it has
// none, the row says which Kafka code a Kafka client handles the same
// way (retriable or not, refresh metadata or not), and a comment says
// why; TestCodesOneToOne lists these shared codes and fails on any other.
var codes = []struct {
	native *wire.Error
	kind   error // the replica's kind answered with this code; nil if none
	kafka  *kerr.Error
}{
	{wire.ErrUnknownServerError, nil, kerr.UnknownServerError},
	{wire.ErrInvalidRequest, partition.ErrInvalidBatch, kerr.InvalidRequest},
	{wire.ErrUnsupportedVersion, nil, kerr.UnsupportedVersion},
	{wire.ErrCorruptMessage, partition.ErrCorruptBatch, kerr.CorruptMessage},
	{wire.ErrMessageTooLarge, partition.ErrBatchTooLarge, kerr.MessageTooLarge},
	{wire.ErrUnknownTopicOrPartition, nil, kerr.UnknownTopicOrPartition},
	{wire.ErrNotPrimary, partition.ErrNotPrimary, kerr.NotLeaderForPartition},
	{wire.ErrStaleGeneration, partition.ErrStaleGeneration, kerr.FencedLeaderEpoch},
	{wire.ErrPrimaryNotAvailable, partition.ErrPrimaryNotAvailable, kerr.LeaderNotAvailable},
	{wire.ErrNotMetadataPrimary, nil, kerr.NotController},
	{wire.ErrRequestTimedOut, partition.ErrTimedOut, kerr.RequestTimedOut},
	{wire.ErrNotEnoughReplicas, partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{wire.ErrStorageError, partition.ErrStorage, kerr.KafkaStorageError},
	{wire.ErrOffsetOutOfRange, partition.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{wire.ErrTopicAlreadyExists, nil, kerr.TopicAlreadyExists},
	{wire.ErrInvalidTopicName, nil, kerr.InvalidTopicException},
	{wire.ErrInvalidPartitions, nil, kerr.InvalidPartitions},
	{wire.ErrInvalidReplicationFactor, nil, kerr.InvalidReplicationFactor},
	{wire.ErrInvalidConfig, nil, kerr.InvalidConfig},
	{wire.ErrDuplicateSequence, partition.ErrDuplicateSequence, kerr.DuplicateSequenceNumber},
	{wire.ErrOutOfOrderSequence, partition.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{wire.ErrInvalidProducerEpoch, partition.ErrFencedProducerEpoch, kerr.InvalidProducerEpoch},
	{wire.ErrUnknownProducerID, partition.ErrUnknownProducer, kerr.UnknownProducerID},
	// Kafka has no "busy": a broker under pressure throttles or times
	// out. REQUEST_TIMED_OUT is what a Kafka client retries the same way
	// (same broker, after its backoff).
	{wire.ErrBusy, partition.ErrBusy, kerr.RequestTimedOut},
	// A primary move's target is behind: Kafka's election of a replica
	// not in the ISR fails with ELIGIBLE_LEADERS_NOT_AVAILABLE.
	{wire.ErrNotInSyncReplica, nil, kerr.EligibleLeadersNotAvailable},
	{wire.ErrRebalanceInProgress, nil, kerr.RebalanceInProgress},
	{wire.ErrUnknownConsumer, nil, kerr.GroupIDNotFound},
	{wire.ErrInvalidConsumerName, nil, kerr.InvalidGroupID},
	{wire.ErrNotCoordinator, nil, kerr.NotCoordinator},
	// A move's target holds no replica: Kafka's election answers
	// REPLICA_NOT_AVAILABLE for a broker outside the assignment.
	{wire.ErrNotReplica, nil, kerr.ReplicaNotAvailable},
	{wire.ErrNodeNotAvailable, nil, kerr.BrokerNotAvailable},
	{wire.ErrInvalidTimestamp, nil, kerr.InvalidTimestamp},
	// A negative fetch or commit offset: Kafka answers a fetch outside
	// the log with OFFSET_OUT_OF_RANGE, which resets the consumer.
	{wire.ErrInvalidOffset, nil, kerr.OffsetOutOfRange},
	{wire.ErrInvalidProducerIDMapping, nil, kerr.InvalidProducerIDMapping},
	// The node has not loaded the committed metadata yet: Kafka's
	// answer for a partition whose state the broker does not have yet is
	// LEADER_NOT_AVAILABLE, on which every client refreshes and retries.
	{wire.ErrMetadataNotReady, nil, kerr.LeaderNotAvailable},
}

// sharedKafkaCodes are the Kafka codes that more than one native code maps
// onto (see the comments in codes); TestCodesOneToOne holds the list.
var sharedKafkaCodes = map[int16]bool{
	kerr.RequestTimedOut.Code:    true,
	kerr.OffsetOutOfRange.Code:   true,
	kerr.LeaderNotAvailable.Code: true,
}

// nativeToKafka indexes codes by native code.
var nativeToKafka = func() map[int16]int16 {
	m := make(map[int16]int16, len(codes))
	for _, c := range codes {
		m[c.native.Code] = c.kafka.Code
	}
	return m
}()

// KafkaCode returns the Kafka error code for a native wire error.
func KafkaCode(native *wire.Error) int16 {
	if native == nil {
		return 0
	}
	if k, ok := nativeToKafka[native.Code]; ok {
		return k
	}
	return kerr.UnknownServerError.Code
}

// errorCode is the Kafka code of err, an error from the backend: a
// replica's *partition.Error (by kind), a native *wire.ErrorResponse or
// *wire.Error (by code), or anything else (UNKNOWN_SERVER_ERROR). nil is
// 0, no error.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var pe *partition.Error
	if errors.As(err, &pe) {
		for _, c := range codes {
			if c.kind != nil && c.kind == pe.Kind {
				return c.kafka.Code
			}
		}
		return kerr.UnknownServerError.Code
	}
	var er *wire.ErrorResponse
	if errors.As(err, &er) {
		return KafkaCode(er.Err)
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return KafkaCode(we)
	}
	return kerr.UnknownServerError.Code
}

// errorMessage is err's text for the responses that carry one (nil when
// err is nil).
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
