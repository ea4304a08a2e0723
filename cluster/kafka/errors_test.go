package kafka

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard/partition"
)

// frozen is the table as released, by kind: a kind's Kafka code is part
// of the protocol clients see, so changing one is a deliberate act that
// edits this list too.
var frozen = map[error]int16{
	service.ErrUnknownTopicOrPartition: 3, service.ErrMetadataNotReady: 5, service.ErrNotMetadataPrimary: 41,
	service.ErrNodeNotAvailable: 8, service.ErrTopicExists: 36, service.ErrInvalidTopicName: 17,
	service.ErrInvalidPartitions: 37, service.ErrInvalidReplicationFactor: 38, service.ErrInvalidConfig: 40,
	service.ErrInvalidReplicaAssignment: 39,
	service.ErrInvalidRequest:           42, service.ErrPolicyViolation: 44, service.ErrInvalidOffset: 1, service.ErrInvalidTimestamp: 32,
	service.ErrRebalanceInProgress: 27, service.ErrNotReplica: 9, service.ErrNotInSyncReplica: 83,
	service.ErrInvalidConsumerName: 24, service.ErrInternal: -1,
	service.ErrAuthorization: 29, service.ErrAuthentication: 58, service.ErrUserExists: 92, service.ErrUnknownUser: 91,
	partition.ErrNotPrimary: 6, partition.ErrStaleGeneration: 74, partition.ErrPrimaryNotAvailable: 5,
	partition.ErrNotEnoughReplicas: 19, partition.ErrOffsetOutOfRange: 1, partition.ErrStorage: 56,
	partition.ErrBatchTooLarge: 10, partition.ErrCorruptBatch: 2, partition.ErrInvalidBatch: 87,
	partition.ErrTimedOut: 7, partition.ErrBusy: 7, partition.ErrUnknownProducer: 59,
	partition.ErrFencedProducerEpoch: 47, partition.ErrOutOfOrderSequence: 45, partition.ErrDuplicateSequence: 46,
	service.ErrNotCoordinator: 16, service.ErrCoordinatorNotAvailable: 15, service.ErrCoordinatorLoading: 14,
	service.ErrUnknownGroup: 69, service.ErrUnknownMember: 25, service.ErrIllegalGeneration: 22,
	service.ErrMemberIDRequired: 79, service.ErrInconsistentProtocol: 23, service.ErrInvalidSessionTimeout: 26,
	service.ErrNonEmptyGroup: 68, service.ErrGroupFull: 81, service.ErrFencedInstance: 82,
	service.ErrGroupSubscribedToTopic: 86, service.ErrGroupAuthorization: 30,
	service.ErrConcurrentTransactions: 51, service.ErrProducerFenced: 90, service.ErrInvalidProducerIDMapping: 49,
	service.ErrInvalidTxnState: 48, service.ErrInvalidTransactionTimeout: 50, service.ErrUnstableOffsetCommit: 88,
	service.ErrTransactionalIDNotFound: 105,
}

// Every kind of the service has exactly one row, with its frozen Kafka
// code.
func TestCodesCoverEveryKind(t *testing.T) {
	rows := map[error]bool{}
	for _, c := range codes {
		if rows[c.kind] {
			t.Errorf("%v has two rows", c.kind)
		}
		rows[c.kind] = true
		if want, ok := frozen[c.kind]; !ok || want != c.kafka.Code {
			t.Errorf("%v maps to %s (%d); frozen: %d", c.kind, c.kafka.Message, c.kafka.Code, want)
		}
	}
	for _, k := range service.ErrorKinds() {
		if !rows[k] {
			t.Errorf("%v has no Kafka code", k)
		}
	}
	if len(frozen) != len(codes) {
		t.Errorf("frozen lists %d kinds, the table %d", len(frozen), len(codes))
	}
}

// The table is one to one but for the Kafka codes listed as shared, each
// with its reason in the table.
func TestCodesOneToOne(t *testing.T) {
	by := map[int16][]error{}
	for _, c := range codes {
		by[c.kafka.Code] = append(by[c.kafka.Code], c.kind)
	}
	for code, kinds := range by {
		if len(kinds) > 1 && !sharedKafkaCodes[code] {
			t.Errorf("Kafka code %d serves %v but is not listed as shared", code, kinds)
		}
		if len(kinds) == 1 && sharedKafkaCodes[code] {
			t.Errorf("Kafka code %d is listed as shared but serves only %v", code, kinds)
		}
	}
}

// The conversion reads the kind of the service's and the replica's
// errors, and takes a bare kind (a route's error: a partition without a
// reachable primary or quorum) as itself; anything else is unknown.
func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{&partition.Error{Kind: partition.ErrNotPrimary, Message: "x", Leader: 2}, kerr.NotLeaderForPartition.Code},
		{service.Errorf(partition.ErrStaleGeneration, "old"), kerr.FencedLeaderEpoch.Code},
		{service.Errorf(partition.ErrDuplicateSequence, "dup"), kerr.DuplicateSequenceNumber.Code},
		{service.Errorf(service.ErrInvalidReplicationFactor, "3 > 1"), kerr.InvalidReplicationFactor.Code},
		{service.Errorf(service.ErrTopicExists, "t"), kerr.TopicAlreadyExists.Code},
		{partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas.Code},
		{partition.ErrPrimaryNotAvailable, kerr.LeaderNotAvailable.Code},
		{fmt.Errorf("chaos-f2/0: %w", partition.ErrStorage), kerr.KafkaStorageError.Code},
		{errors.New("something else"), kerr.UnknownServerError.Code},
	} {
		if got := errorCode(tc.err); got != tc.want {
			t.Errorf("errorCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
