package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard/partition"
)

// codes maps every kind of error the service answers with (its own and
// the replica's, service.ErrorKinds) onto Kafka's code. It is the Kafka
// listener's counterpart of the native table (cluster/service/wirecode,
// kind → native code): the service speaks no protocol,
// and each front end gives its answers their codes in one table, so the
// two cannot drift. A test requires a row for every kind and freezes each
// pairing.
//
// The pairings are one to one where Kafka has the code. Where it has
// none, the row says which Kafka code a Kafka client handles the same
// way (retriable or not, refresh metadata or not), and a comment says
// why; TestCodesOneToOne lists these shared codes and fails on any other.
var codes = []struct {
	kind  error
	kafka *kerr.Error
}{
	{service.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	// The node has not loaded the committed metadata yet: Kafka's answer
	// for a partition whose state a broker does not have yet is
	// LEADER_NOT_AVAILABLE, on which every client refreshes and retries.
	{service.ErrMetadataNotReady, kerr.LeaderNotAvailable},
	{service.ErrNotMetadataPrimary, kerr.NotController},
	{service.ErrNodeNotAvailable, kerr.BrokerNotAvailable},
	{service.ErrTopicExists, kerr.TopicAlreadyExists},
	{service.ErrInvalidTopicName, kerr.InvalidTopicException},
	{service.ErrInvalidPartitions, kerr.InvalidPartitions},
	{service.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{service.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{service.ErrInvalidConfig, kerr.InvalidConfig},
	{service.ErrInvalidRequest, kerr.InvalidRequest},
	{service.ErrPolicyViolation, kerr.PolicyViolation},
	// A negative fetch or commit offset: Kafka answers a fetch outside
	// the log with OFFSET_OUT_OF_RANGE, which resets the consumer.
	{service.ErrInvalidOffset, kerr.OffsetOutOfRange},
	{service.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{service.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	// A primary move's target holds no replica: Kafka's election
	// answers REPLICA_NOT_AVAILABLE for a broker outside the assignment.
	{service.ErrNotReplica, kerr.ReplicaNotAvailable},
	// A move's target is behind: Kafka's election of a replica not in
	// the ISR fails with ELIGIBLE_LEADERS_NOT_AVAILABLE.
	{service.ErrNotInSyncReplica, kerr.EligibleLeadersNotAvailable},
	{service.ErrInvalidConsumerName, kerr.InvalidGroupID},
	// A permission refusal; a Kafka client treats the topic and the
	// cluster refusal alike (not retriable, surfaced to the caller).
	{service.ErrAuthorization, kerr.TopicAuthorizationFailed},
	{service.ErrAuthentication, kerr.SaslAuthenticationFailed},
	// Users are not managed over the Kafka port; the codes Kafka's
	// resource APIs use for the same situations.
	{service.ErrUserExists, kerr.DuplicateResource},
	{service.ErrUnknownUser, kerr.ResourceNotFound},
	{service.ErrInternal, kerr.UnknownServerError},
	{service.ErrNotCoordinator, kerr.NotCoordinator},
	{service.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{service.ErrCoordinatorLoading, kerr.CoordinatorLoadInProgress},
	{service.ErrUnknownGroup, kerr.GroupIDNotFound},
	{service.ErrUnknownMember, kerr.UnknownMemberID},
	{service.ErrIllegalGeneration, kerr.IllegalGeneration},
	{service.ErrMemberIDRequired, kerr.MemberIDRequired},
	{service.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
	{service.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{service.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{service.ErrGroupFull, kerr.GroupMaxSizeReached},
	{service.ErrFencedInstance, kerr.FencedInstanceID},
	{service.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
	{service.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
	{service.ErrProducerFenced, kerr.ProducerFenced},
	{service.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	{service.ErrInvalidTxnState, kerr.InvalidTxnState},
	{service.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
	{service.ErrUnstableOffsetCommit, kerr.UnstableOffsetCommit},
	{service.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound},
	{service.ErrGroupAuthorization, kerr.GroupAuthorizationFailed},
	{partition.ErrNotPrimary, kerr.NotLeaderForPartition},
	{partition.ErrStaleGeneration, kerr.FencedLeaderEpoch},
	{partition.ErrPrimaryNotAvailable, kerr.LeaderNotAvailable},
	{partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{partition.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{partition.ErrStorage, kerr.KafkaStorageError},
	{partition.ErrBatchTooLarge, kerr.MessageTooLarge},
	{partition.ErrCorruptBatch, kerr.CorruptMessage},
	// A well-formed batch that may not be appended (a control batch from
	// a client): Kafka refuses those with INVALID_RECORD.
	{partition.ErrInvalidBatch, kerr.InvalidRecord},
	{partition.ErrTimedOut, kerr.RequestTimedOut},
	// Kafka has no "busy": a broker under pressure throttles or times
	// out. REQUEST_TIMED_OUT is what a Kafka client retries the same way
	// (same broker, after its backoff).
	{partition.ErrBusy, kerr.RequestTimedOut},
	{partition.ErrUnknownProducer, kerr.UnknownProducerID},
	{partition.ErrFencedProducerEpoch, kerr.InvalidProducerEpoch},
	{partition.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{partition.ErrDuplicateSequence, kerr.DuplicateSequenceNumber},
}

// sharedKafkaCodes are the Kafka codes that more than one kind maps onto
// (see the comments in codes); TestCodesOneToOne holds the list.
var sharedKafkaCodes = map[int16]bool{
	kerr.RequestTimedOut.Code:    true,
	kerr.OffsetOutOfRange.Code:   true,
	kerr.LeaderNotAvailable.Code: true,
}

// errorCode is the Kafka code of err, an error of the service (an
// *service.Error or a replica's *partition.Error, by kind, or a kind
// itself, as a route's error is). Anything else is UNKNOWN_SERVER_ERROR;
// nil is 0, no error.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	kind := err
	var se *service.Error
	var pe *partition.Error
	switch {
	case errors.As(err, &se):
		kind = se.Kind
	case errors.As(err, &pe):
		kind = pe.Kind
	}
	for _, c := range codes {
		if errors.Is(kind, c.kind) {
			return c.kafka.Code
		}
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
