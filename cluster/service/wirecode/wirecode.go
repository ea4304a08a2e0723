// Package wirecode maps the typed service's answers onto the native
// protocol's error codes, in one table: every kind of error the service
// answers with (its own and the replica's) has one code here. The native
// front end and the HTTP API both name their errors by these codes (the
// Kafka listener keeps its own table, mapped one to one), so the table
// stands below the front ends, beside the service, and neither front end
// imports the other for it.
package wirecode

import (
	"errors"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// codes maps each kind of error the service answers with (its own and
// the replica's, service.ErrorKinds) onto the native protocol's code.
// The service and the replica speak no protocol; this table (and, for
// the Kafka listener, its own table) is where their answers get their
// codes, for the native port and the HTTP API alike (HTTP names its
// errors by these codes). A test checks that it covers
// service.ErrorKinds.
var codes = []struct {
	kind error
	code *wire.Error
}{
	// The service's own kinds come first, then the replica's; a code may
	// serve two kinds (INVALID_REQUEST), as the table is read one way only.
	{service.ErrUnknownTopicOrPartition, wire.ErrUnknownTopicOrPartition},
	{service.ErrMetadataNotReady, wire.ErrMetadataNotReady},
	{service.ErrNotMetadataPrimary, wire.ErrNotMetadataPrimary},
	{service.ErrNodeNotAvailable, wire.ErrNodeNotAvailable},
	{service.ErrTopicExists, wire.ErrTopicAlreadyExists},
	{service.ErrInvalidTopicName, wire.ErrInvalidTopicName},
	{service.ErrInvalidPartitions, wire.ErrInvalidPartitions},
	{service.ErrInvalidReplicationFactor, wire.ErrInvalidReplicationFactor},
	// The native protocol takes no manual assignment and has no code of
	// its own for one: INVALID_REQUEST, not retriable, as the kind.
	{service.ErrInvalidReplicaAssignment, wire.ErrInvalidRequest},
	{service.ErrInvalidConfig, wire.ErrInvalidConfig},
	{service.ErrInvalidRequest, wire.ErrInvalidRequest},
	// The native protocol has no policy code; its message says why.
	{service.ErrPolicyViolation, wire.ErrInvalidRequest},
	{service.ErrInvalidOffset, wire.ErrInvalidOffset},
	{service.ErrInvalidTimestamp, wire.ErrInvalidTimestamp},
	{service.ErrRebalanceInProgress, wire.ErrRebalanceInProgress},
	{service.ErrNotReplica, wire.ErrNotReplica},
	{service.ErrNotInSyncReplica, wire.ErrNotInSyncReplica},
	{service.ErrInvalidConsumerName, wire.ErrInvalidConsumerName},
	{service.ErrAuthorization, wire.ErrAuthorizationFailed},
	{service.ErrAuthentication, wire.ErrAuthenticationFailed},
	{service.ErrUserExists, wire.ErrUserAlreadyExists},
	{service.ErrUnknownUser, wire.ErrUnknownUser},
	{service.ErrInternal, wire.ErrUnknownServerError},
	{service.ErrNotCoordinator, wire.ErrNotCoordinator},
	{service.ErrCoordinatorNotAvailable, wire.ErrCoordinatorNotAvailable},
	{service.ErrCoordinatorLoading, wire.ErrCoordinatorLoading},
	{service.ErrUnknownGroup, wire.ErrUnknownGroup},
	{service.ErrUnknownMember, wire.ErrUnknownMember},
	{service.ErrIllegalGeneration, wire.ErrIllegalGeneration},
	{service.ErrMemberIDRequired, wire.ErrMemberIDRequired},
	{service.ErrInconsistentProtocol, wire.ErrInconsistentGroupProtocol},
	{service.ErrInvalidSessionTimeout, wire.ErrInvalidSessionTimeout},
	{service.ErrNonEmptyGroup, wire.ErrNonEmptyGroup},
	{service.ErrGroupFull, wire.ErrGroupFull},
	{service.ErrFencedInstance, wire.ErrFencedInstance},
	{service.ErrGroupSubscribedToTopic, wire.ErrGroupSubscribedToTopic},
	{service.ErrConcurrentTransactions, wire.ErrConcurrentTransactions},
	{service.ErrProducerFenced, wire.ErrProducerFenced},
	{service.ErrInvalidProducerIDMapping, wire.ErrInvalidProducerIDMapping},
	{service.ErrInvalidTxnState, wire.ErrInvalidTxnState},
	{service.ErrInvalidTransactionTimeout, wire.ErrInvalidTransactionTimeout},
	{service.ErrUnstableOffsetCommit, wire.ErrUnstableOffsetCommit},
	{service.ErrTransactionalIDNotFound, wire.ErrTransactionalIDNotFound},
	{service.ErrGroupAuthorization, wire.ErrAuthorizationFailed},
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

// The replica, the service and the protocol share these values, so
// requests pass them through unconverted; each line fails to compile if
// two ever differ.
const (
	_ = uint(partition.GenerationUnknown-wire.GenerationUnknown) + uint(wire.GenerationUnknown-partition.GenerationUnknown)
	_ = uint(partition.TimestampLatest-wire.TimestampLatest) + uint(wire.TimestampLatest-partition.TimestampLatest)
	_ = uint(partition.TimestampEarliest-wire.TimestampEarliest) + uint(wire.TimestampEarliest-partition.TimestampEarliest)
	_ = uint(partition.ProducerWindow-wire.IdempotentWindow) + uint(wire.IdempotentWindow-partition.ProducerWindow)
	_ = uint(service.RecordsBytesMax-wire.RecordsBytesMax) + uint(wire.RecordsBytesMax-service.RecordsBytesMax)
	_ = uint(service.FetchWaitMax/1e6-wire.FetchWaitMsMax) + uint(wire.FetchWaitMsMax-service.FetchWaitMax/1e6)
	_ = uint(int8(service.AcksPrimary)-int8(wire.AcksPrimary)) + uint(int8(wire.AcksPrimary)-int8(service.AcksPrimary))
	_ = uint(int8(service.AcksQuorum)-int8(wire.AcksQuorum)) + uint(int8(wire.AcksQuorum)-int8(service.AcksQuorum))
)

// CodeOf is kind's native code (UNKNOWN_SERVER_ERROR for a kind the
// table lacks, which its test forbids).
func CodeOf(kind error) *wire.Error {
	for _, c := range codes {
		if kind == c.kind {
			return c.code
		}
	}
	return wire.ErrUnknownServerError
}

// Error turns the service's *service.Error, or a replica's
// *partition.Error, into the native protocol's error response, hint
// included; any other error is returned as it is.
func Error(err error) error {
	var se *service.Error
	var pe *partition.Error
	switch {
	case errors.As(err, &se):
		e := &wire.ErrorResponse{Err: CodeOf(se.Kind), Message: se.Message, RetryAfterMs: se.RetryAfterMs}
		if h := se.Hint; h != nil {
			e.Hint = &wire.Hint{NodeID: h.NodeID, Address: h.ClientAddr, Generation: h.Generation}
		}
		return e
	case errors.As(err, &pe):
		e := &wire.ErrorResponse{Err: CodeOf(pe.Kind), Message: pe.Message, RetryAfterMs: pe.RetryAfterMs}
		if pe.Leader > 0 {
			e.Hint = &wire.Hint{NodeID: pe.Leader, Generation: pe.Generation}
		}
		return e
	}
	return err
}

// RouteCode is a route's or an entry's error as the native code
// (CodeNone for none).
func RouteCode(err error) int16 {
	if err == nil {
		return wire.CodeNone
	}
	var se *service.Error
	if errors.As(err, &se) {
		return CodeOf(se.Kind).Code
	}
	return CodeOf(err).Code
}
