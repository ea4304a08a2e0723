package service

import (
	"errors"
	"fmt"

	"github.com/corestream/corestream/shard/partition"
)

// The kinds of error the service answers with besides the replica's own
// (partition.ErrNotPrimary, ErrStaleGeneration, …, which it passes
// through). Each reaches the caller in an *Error; test with errors.Is.
var (
	// ErrUnknownTopicOrPartition: the topic does not exist (or has
	// another id than the request's: it was deleted and created again),
	// or has no such partition.
	ErrUnknownTopicOrPartition = errors.New("service: unknown topic or partition")
	// ErrMetadataNotReady: this node has not loaded the committed cluster
	// metadata yet (after a start); retry shortly or ask another node.
	ErrMetadataNotReady = errors.New("service: metadata not ready")
	// ErrNotMetadataPrimary: an admin call reached a node that does not
	// lead the metadata group; the hint names the one that does.
	ErrNotMetadataPrimary = errors.New("service: not the metadata primary")
	// ErrNodeNotAvailable: this node (or the node a request names) is
	// shutting down or down.
	ErrNodeNotAvailable = errors.New("service: node not available")
	// ErrTopicExists: a create named a topic that exists.
	ErrTopicExists = errors.New("service: topic already exists")
	// ErrInvalidTopicName: a topic name breaks the naming rule.
	ErrInvalidTopicName = errors.New("service: invalid topic name")
	// ErrInvalidPartitions: a partition count out of range, or not above
	// the current one for AddPartitions.
	ErrInvalidPartitions = errors.New("service: invalid partitions")
	// ErrInvalidReplicationFactor: a replication factor out of range or
	// above the roster size.
	ErrInvalidReplicationFactor = errors.New("service: invalid replication factor")
	// ErrInvalidReplicaAssignment: a manual replica assignment that
	// breaks a rule (an empty or repeated replica set, a node twice, a
	// node not active in the roster, sets of unequal length, a set of
	// another length than the topic's factor); the message names the
	// partition and the node.
	ErrInvalidReplicaAssignment = errors.New("service: invalid replica assignment")
	// ErrInvalidConfig: an unknown topic config key or a bad value.
	ErrInvalidConfig = errors.New("service: invalid config")
	// ErrInvalidRequest: a request the service refuses for a reason no
	// retry fixes and no other kind names.
	ErrInvalidRequest = errors.New("service: invalid request")
	// ErrInvalidOffset: an offset commit for an offset the partition
	// cannot have.
	ErrInvalidOffset = errors.New("service: invalid offset")
	// ErrInvalidTimestamp: a timestamp the service cannot use.
	ErrInvalidTimestamp = errors.New("service: invalid timestamp")
	// ErrRebalanceInProgress: a primary move is running; retry after it.
	// For a group call: the group is rebalancing; the member rejoins.
	ErrRebalanceInProgress = errors.New("service: rebalance in progress")
	// ErrNotReplica: a primary move named a node that holds no replica.
	ErrNotReplica = errors.New("service: not a replica")
	// ErrNotInSyncReplica: a primary move named a replica that is not in
	// sync.
	ErrNotInSyncReplica = errors.New("service: not an in-sync replica")
	// ErrInvalidConsumerName: an offset commit or fetch named a consumer
	// that breaks the naming rule.
	ErrInvalidConsumerName = errors.New("service: invalid consumer name")
	// ErrAuthorization: the caller's principal may not do this (no rule
	// allows it, or one denies it); the message names the user, the
	// operation and the topic.
	ErrAuthorization = errors.New("service: not authorized")
	// ErrGroupAuthorization: as ErrAuthorization, about a consumer group
	// rather than a topic or the cluster (Kafka tells the two apart).
	ErrGroupAuthorization = errors.New("service: not authorized for the group")
	// ErrAuthentication: the caller did not prove who it is (wrong or
	// unknown user, an expired or forged token, too many failures).
	ErrAuthentication = errors.New("service: authentication failed")
	// ErrUserExists: a create named a user that exists.
	ErrUserExists = errors.New("service: user already exists")
	// ErrUnknownUser: a user call named a user that does not exist.
	ErrUnknownUser = errors.New("service: unknown user")
	// ErrNotCoordinator: a group call reached a node that does not
	// coordinate the group; the hint names the one that does, when known.
	ErrNotCoordinator = errors.New("service: not the group's coordinator")
	// ErrCoordinatorNotAvailable: no node coordinates the group now (no
	// metadata primary, or the coordinator is full); retry shortly.
	ErrCoordinatorNotAvailable = errors.New("service: group coordinator not available")
	// ErrCoordinatorLoading: this node became the group's coordinator
	// and is still recovering its state; retry shortly.
	ErrCoordinatorLoading = errors.New("service: group coordinator loading")
	// ErrUnknownGroup: no such group (describe, delete, delete offsets).
	ErrUnknownGroup = errors.New("service: unknown group")
	// ErrUnknownMember: the member id is not in the group (it expired,
	// left, or never joined); the member rejoins with an empty id.
	ErrUnknownMember = errors.New("service: unknown member")
	// ErrIllegalGeneration: a member named another generation than the
	// group's; it rejoins.
	ErrIllegalGeneration = errors.New("service: illegal generation")
	// ErrMemberIDRequired: a first join that asked for it is answered
	// with the member id to join with (KIP-394); it joins again with it.
	ErrMemberIDRequired = errors.New("service: member id required")
	// ErrInconsistentProtocol: a member's protocol type or assignors
	// share nothing with the group's.
	ErrInconsistentProtocol = errors.New("service: inconsistent group protocol")
	// ErrInvalidSessionTimeout: a session timeout outside the
	// coordinator's bounds.
	ErrInvalidSessionTimeout = errors.New("service: invalid session timeout")
	// ErrNonEmptyGroup: a group with members cannot be deleted, nor its
	// offsets reset.
	ErrNonEmptyGroup = errors.New("service: group has members")
	// ErrGroupFull: the group has as many members as it may.
	ErrGroupFull = errors.New("service: group is full")
	// ErrFencedInstance: a static member's instance id is held by a newer
	// member.
	ErrFencedInstance = errors.New("service: instance id fenced")
	// ErrGroupSubscribedToTopic: an offset delete named a topic a member
	// of the group subscribes to.
	ErrGroupSubscribedToTopic = errors.New("service: group subscribed to topic")
	// ErrConcurrentTransactions: another change of the transactional id
	// is under way (a prepared transaction's markers, an earlier call's
	// write); retry shortly.
	ErrConcurrentTransactions = errors.New("service: concurrent transactions")
	// ErrProducerFenced: a newer producer of the same transactional id
	// took over (its epoch is newer); this one stops.
	ErrProducerFenced = errors.New("service: producer fenced")
	// ErrInvalidProducerIDMapping: the producer id is not the one the
	// transactional id holds, or the id is unknown.
	ErrInvalidProducerIDMapping = errors.New("service: invalid producer id mapping")
	// ErrInvalidTxnState: the call does not fit the transaction's state
	// (ending one that never began, committing one being aborted).
	ErrInvalidTxnState = errors.New("service: invalid transaction state")
	// ErrInvalidTransactionTimeout: a transaction timeout out of range.
	ErrInvalidTransactionTimeout = errors.New("service: invalid transaction timeout")
	// ErrUnstableOffsetCommit: a fetch of offsets that asked for stable
	// ones found offsets staged by an open transaction; retry once it
	// ends.
	ErrUnstableOffsetCommit = errors.New("service: unstable offset commit")
	// ErrTransactionalIDNotFound: no such transactional id (describe).
	ErrTransactionalIDNotFound = errors.New("service: transactional id not found")
	// ErrPolicyViolation: the topic's configuration forbids the change
	// (DeleteRecords on a topic that is compacted only, as Kafka
	// refuses it).
	ErrPolicyViolation = errors.New("service: policy violation")
	// ErrInternal: a fault of this node (a bug, or a state it cannot
	// explain); the message says what.
	ErrInternal = errors.New("service: internal error")
)

// serviceKinds lists the kinds above.
var serviceKinds = []error{ErrUnknownTopicOrPartition, ErrMetadataNotReady, ErrNotMetadataPrimary, ErrNodeNotAvailable,
	ErrTopicExists, ErrInvalidTopicName, ErrInvalidPartitions, ErrInvalidReplicationFactor, ErrInvalidConfig,
	ErrInvalidRequest, ErrInvalidOffset, ErrInvalidTimestamp, ErrRebalanceInProgress, ErrNotReplica,
	ErrNotInSyncReplica, ErrInvalidConsumerName, ErrAuthorization, ErrAuthentication, ErrUserExists, ErrUnknownUser, ErrInternal,
	ErrNotCoordinator, ErrCoordinatorNotAvailable, ErrCoordinatorLoading, ErrUnknownGroup, ErrUnknownMember,
	ErrIllegalGeneration, ErrMemberIDRequired, ErrInconsistentProtocol, ErrInvalidSessionTimeout, ErrNonEmptyGroup,
	ErrGroupFull, ErrFencedInstance, ErrGroupSubscribedToTopic, ErrGroupAuthorization, ErrInvalidReplicaAssignment,
	ErrConcurrentTransactions, ErrProducerFenced, ErrInvalidProducerIDMapping, ErrInvalidTxnState, ErrInvalidTransactionTimeout,
	ErrUnstableOffsetCommit, ErrTransactionalIDNotFound,
	ErrPolicyViolation}

// ErrorKinds lists every kind an *Error of the service can carry: this
// package's and the replica's (partition.ErrorKinds). A front end's
// table of codes has a test that it covers them all.
func ErrorKinds() []error {
	return append(append([]error(nil), serviceKinds...), partition.ErrorKinds()...)
}

// Error is the service's answer to a call it refuses.
type Error struct {
	// Kind is one of ErrorKinds.
	Kind error
	// Message says what failed and why, for the client.
	Message string
	// Hint names where to send the request instead (after ErrNotPrimary,
	// ErrStaleGeneration, ErrNotMetadataPrimary, ErrMetadataNotReady);
	// nil when there is none.
	Hint *Hint
	// RetryAfterMs is the advice to wait before retrying; 0 when none.
	RetryAfterMs uint32
}

// Hint names the node a request should go to.
type Hint struct {
	// NodeID is the node; Generation its term for the partition (or the
	// metadata group), -1 when unknown.
	NodeID, Generation int32
	// ClientAddr is the node's advertised client address ("" when the
	// roster has none); front ends that need another address look the
	// node up in Brokers.
	ClientAddr string
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the kind, so that errors.Is(err, ErrTopicExists) works.
func (e *Error) Unwrap() error { return e.Kind }

// Errorf builds an *Error of kind with a formatted message.
func Errorf(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}
