package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error is one entry of the wire error table: the code that travels in a
// response header, its stable name, whether a client may retry the same
// request unchanged (possibly after refreshing metadata or backing off), and
// a description for operators and client authors.
//
// Errors are compared by code: errors.Is(err, ErrNotPrimary) holds for any
// error whose chain contains an *Error with the same code, including the
// *ErrorResponse a client decodes from a response.
type Error struct {
	// Code is the value on the wire. Never reused, never renumbered.
	Code int16
	// Name is the stable upper-case name (NOT_PRIMARY).
	Name string
	// Retriable is true when the same request may succeed if sent again.
	Retriable bool
	// Description says when the error is returned and what a client does.
	Description string
}

// Error returns the name and the description.
func (e *Error) Error() string { return e.Name + ": " + e.Description }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && e != nil && t.Code == e.Code
}

// The error table. Codes are the wire format: a code, once published, keeps
// its meaning forever; retired codes are left in place and never reused.
// Append new codes at the end. TestErrorCodesAppendOnly pins every code.
var (
	ErrUnknownServerError = &Error{1, "UNKNOWN_SERVER_ERROR", false,
		"The server failed in a way no other code describes; the message says how. Not retriable as-is."}
	ErrInvalidRequest = &Error{2, "INVALID_REQUEST", false,
		"The request body is malformed (truncated field, count over its bound, trailing bytes, unknown enum value or flag) or breaks a protocol rule such as sending a request before the handshake. The message names the field."}
	ErrUnsupportedVersion = &Error{3, "UNSUPPORTED_VERSION", false,
		"The API key is unknown to this server or the API version is outside the server's supported range (see the handshake response), or the handshake's protocol version range does not overlap the server's."}
	ErrCorruptMessage = &Error{4, "CORRUPT_MESSAGE", true,
		"The record batch failed validation: bad CRC-32C, bad magic, inconsistent lengths or counts, unknown attribute bits, or not exactly one batch. Retriable because corruption in transit is possible; a client that builds the same bad batch again gets the same answer."}
	ErrMessageTooLarge = &Error{5, "MESSAGE_TOO_LARGE", false,
		"The record batch is larger than the topic's or the server's maximum batch size."}
	ErrUnknownTopicOrPartition = &Error{6, "UNKNOWN_TOPIC_OR_PARTITION", true,
		"The topic or partition does not exist on this node, or the request's topic id names an older (deleted or replaced) topic of that name. Refresh metadata; retriable because a new topic may still be propagating."}
	ErrNotPrimary = &Error{7, "NOT_PRIMARY", true,
		"This node is not the partition's primary. The hint names the current primary (node id, client address, generation) when known; send there, or refresh metadata."}
	ErrStaleGeneration = &Error{8, "STALE_GENERATION", true,
		"The request's generation is older than the partition's current generation: the client's route is out of date. The hint carries the current primary and generation; refresh metadata and retry."}
	ErrPrimaryNotAvailable = &Error{9, "PRIMARY_NOT_AVAILABLE", true,
		"The partition has no primary right now (an election is in progress or too many replicas are down). Back off and retry."}
	ErrNotMetadataPrimary = &Error{10, "NOT_METADATA_PRIMARY", true,
		"The request changes cluster metadata and this node is not the metadata primary. The hint names the metadata primary when known."}
	ErrRequestTimedOut = &Error{11, "REQUEST_TIMED_OUT", true,
		"The request's timeout passed before it completed. For a produce the batch may still be committed later: retry only with an idempotent producer to avoid duplicates."}
	ErrNotEnoughReplicas = &Error{12, "NOT_ENOUGH_REPLICAS", true,
		"Fewer in-sync replicas are reachable than the partition needs for a quorum, so the write was refused before it was appended."}
	ErrStorageError = &Error{13, "STORAGE_ERROR", true,
		"The partition's log on this node is poisoned or its disk failed. The partition is unavailable on this node until an operator or a primary move repairs it; refresh metadata."}
	ErrOffsetOutOfRange = &Error{14, "OFFSET_OUT_OF_RANGE", false,
		"The fetch offset is below the log start offset or above the log end. Use ListOffsets to find a valid offset."}
	ErrTopicAlreadyExists = &Error{15, "TOPIC_ALREADY_EXISTS", false,
		"A topic with that name already exists."}
	ErrInvalidTopicName = &Error{16, "INVALID_TOPIC_NAME", false,
		"The topic name is empty, longer than 249 bytes, \".\" or \"..\", or holds a byte outside [a-zA-Z0-9._-]; or, for a new topic, starts with \"__\" (reserved for the broker's internal topics such as __meta)."}
	ErrInvalidPartitions = &Error{17, "INVALID_PARTITIONS", false,
		"The partition count is out of range (1..16384) or, for AddPartitions, not larger than the current count."}
	ErrInvalidReplicationFactor = &Error{18, "INVALID_REPLICATION_FACTOR", false,
		"The replication factor is outside 0 (cluster default) or 1..32, or exceeds the number of nodes in the roster."}
	ErrInvalidConfig = &Error{19, "INVALID_CONFIG", false,
		"A topic configuration key is unknown or its value is out of range; the message names the key."}
	ErrDuplicateSequence = &Error{20, "DUPLICATE_SEQUENCE", false,
		"The idempotent batch's sequence numbers were written long ago, older than the broker's window of recent batches. The data is in the log; the producer must not resend it."}
	ErrOutOfOrderSequence = &Error{21, "OUT_OF_ORDER_SEQUENCE", false,
		"The idempotent batch's base sequence is not the next one expected for this producer and partition (a gap). Usually an earlier in-flight batch failed: resend the batches in sequence order."}
	ErrInvalidProducerEpoch = &Error{22, "INVALID_PRODUCER_EPOCH", false,
		"The producer epoch is older than one this partition has seen for the producer id: this producer was fenced by a newer instance."}
	ErrUnknownProducerID = &Error{23, "UNKNOWN_PRODUCER_ID", false,
		"The partition has no state for this producer id (never seen, or expired) and the batch does not start at sequence 0. Call InitProducer again to bump the epoch."}
	ErrBusy = &Error{24, "BUSY", true,
		"The server is applying backpressure (an inbox, queue or in-flight window is full). Retry after retry_after_ms when it is set."}
	ErrNotInSyncReplica = &Error{25, "NOT_IN_SYNC_REPLICA", true,
		"The target of a primary move is a replica but is not in sync; retry once it has caught up."}
	ErrRebalanceInProgress = &Error{26, "REBALANCE_IN_PROGRESS", true,
		"A rebalance or another primary move is running; the cluster moves one primary at a time."}
	ErrUnknownConsumer = &Error{27, "UNKNOWN_CONSUMER", false,
		"The named consumer has no committed offsets (admin APIs only; FetchOffsets answers offset -1 instead)."}
	ErrInvalidConsumerName = &Error{28, "INVALID_CONSUMER_NAME", false,
		"The consumer name breaks the naming rules (the same as topic names)."}
	ErrNotCoordinator = &Error{29, "NOT_COORDINATOR", true,
		"This node does not coordinate the named consumer group (nor store its offsets). The hint names the node that does; find the coordinator again."}
	ErrNotReplica = &Error{30, "NOT_REPLICA", false,
		"The node named as the target of a primary move is not in the partition's replica set."}
	ErrNodeNotAvailable = &Error{31, "NODE_NOT_AVAILABLE", true,
		"The node named in the request is not alive."}
	ErrInvalidTimestamp = &Error{32, "INVALID_TIMESTAMP", false,
		"A timestamp is invalid: a ListOffsets timestamp below -2, or a batch timestamp outside the topic's accepted range."}
	ErrInvalidOffset = &Error{33, "INVALID_OFFSET", false,
		"An offset in the request is negative where it may not be (fetch offset, committed offset)."}
	ErrInvalidProducerIDMapping = &Error{34, "INVALID_PRODUCER_ID_MAPPING", false,
		"InitProducer was given a producer id and epoch that do not belong together (the epoch is not the id's current one). Reserved: this version's server keeps no record of epochs (the partitions fence older ones) and does not return it."}
	ErrMetadataNotReady = &Error{35, "METADATA_NOT_READY", true,
		"This node has not yet loaded the committed cluster metadata (after a start it learns the commit point from the metadata primary and replays its log up to it), so it cannot answer metadata, topic or offset reads without possibly leaving things out. The message says what it waits for; retry after a short back-off or ask another node."}
	ErrAuthorizationFailed = &Error{36, "AUTHORIZATION_FAILED", false,
		"The authenticated user may not do this: no permission rule allows the operation on the topic (or the cluster), or a rule denies it. The message names the user, the operation and the topic; an administrator grants it with `corestream user grant`."}
	ErrAuthenticationFailed = &Error{37, "AUTHENTICATION_FAILED", false,
		"The node requires authentication (security.auth = scram) and the connection has not authenticated, or the username or password is wrong (the two are not told apart), or too many logins failed from this address recently (retry_after_ms says when to try again)."}
	ErrUserAlreadyExists = &Error{38, "USER_ALREADY_EXISTS", false,
		"A user with that name already exists."}
	ErrUnknownUser = &Error{39, "UNKNOWN_USER", false,
		"The named user does not exist (an admin call about a user: set password, grant, revoke, delete)."}
	ErrUnknownGroup = &Error{40, "UNKNOWN_GROUP", false,
		"The consumer group does not exist on its coordinator (describe, delete, delete offsets)."}
	ErrUnknownMember = &Error{41, "UNKNOWN_MEMBER", false,
		"The member id is not in the group: it expired (no heartbeat within its session timeout), left, or never joined. The member rejoins with an empty member id."}
	ErrIllegalGeneration = &Error{42, "ILLEGAL_GENERATION", false,
		"The request names another generation of the group than the current one: the group rebalanced meanwhile. The member rejoins."}
	ErrMemberIDRequired = &Error{43, "MEMBER_ID_REQUIRED", false,
		"A first join is answered with the member id the member must use (in the response); it joins again with that id at once."}
	ErrInconsistentGroupProtocol = &Error{44, "INCONSISTENT_GROUP_PROTOCOL", false,
		"The member's protocol type or assignors share nothing with those of the group's members."}
	ErrInvalidSessionTimeout = &Error{45, "INVALID_SESSION_TIMEOUT", false,
		"The session timeout is outside the coordinator's bounds (1 s to 30 min)."}
	ErrNonEmptyGroup = &Error{46, "NON_EMPTY_GROUP", false,
		"The group has members: it cannot be deleted, nor its offsets reset, until they leave or expire."}
	ErrGroupFull = &Error{47, "GROUP_FULL", false,
		"The group has as many members as a group may have (1000)."}
	ErrFencedInstance = &Error{48, "FENCED_INSTANCE_ID", false,
		"A newer member joined with this static member's instance id; this one must stop."}
	ErrCoordinatorNotAvailable = &Error{49, "COORDINATOR_NOT_AVAILABLE", true,
		"No node coordinates the group right now (no metadata primary is known, or the coordinator is full). Back off and find the coordinator again."}
	ErrCoordinatorLoading = &Error{50, "COORDINATOR_LOADING", true,
		"This node just became the group's coordinator and is still recovering the group's state. Retry shortly."}
	ErrGroupSubscribedToTopic = &Error{51, "GROUP_SUBSCRIBED_TO_TOPIC", false,
		"An offset delete named a topic that a member of the group subscribes to; its offsets can be deleted only once no member consumes it."}
	ErrConcurrentTransactions = &Error{52, "CONCURRENT_TRANSACTIONS", true,
		"Another change of this transactional id is under way (an earlier call's write, or a transaction's markers). Retry shortly."}
	ErrProducerFenced = &Error{53, "PRODUCER_FENCED", false,
		"A newer producer of the same transactional id took over; this producer must stop."}
	ErrInvalidTxnState = &Error{54, "INVALID_TXN_STATE", false,
		"The call does not fit the transaction's state (ending a transaction that never began, committing one being aborted)."}
	ErrInvalidTransactionTimeout = &Error{55, "INVALID_TRANSACTION_TIMEOUT", false,
		"The transaction timeout is out of range; give one between 1 ms and the coordinator's maximum (15 minutes)."}
	ErrUnstableOffsetCommit = &Error{56, "UNSTABLE_OFFSET_COMMIT", true,
		"An open transaction staged offsets of this partition for the group; retry once it ends."}
	ErrTransactionalIDNotFound = &Error{57, "TRANSACTIONAL_ID_NOT_FOUND", false,
		"The coordinator knows no such transactional id."}
)

// errorTable lists every code, in code order. It is the single source: the
// lookup, the docs and the tests all read it.
var errorTable = []*Error{
	ErrUnknownServerError,
	ErrInvalidRequest,
	ErrUnsupportedVersion,
	ErrCorruptMessage,
	ErrMessageTooLarge,
	ErrUnknownTopicOrPartition,
	ErrNotPrimary,
	ErrStaleGeneration,
	ErrPrimaryNotAvailable,
	ErrNotMetadataPrimary,
	ErrRequestTimedOut,
	ErrNotEnoughReplicas,
	ErrStorageError,
	ErrOffsetOutOfRange,
	ErrTopicAlreadyExists,
	ErrInvalidTopicName,
	ErrInvalidPartitions,
	ErrInvalidReplicationFactor,
	ErrInvalidConfig,
	ErrDuplicateSequence,
	ErrOutOfOrderSequence,
	ErrInvalidProducerEpoch,
	ErrUnknownProducerID,
	ErrBusy,
	ErrNotInSyncReplica,
	ErrRebalanceInProgress,
	ErrUnknownConsumer,
	ErrInvalidConsumerName,
	ErrNotCoordinator,
	ErrNotReplica,
	ErrNodeNotAvailable,
	ErrInvalidTimestamp,
	ErrInvalidOffset,
	ErrInvalidProducerIDMapping,
	ErrMetadataNotReady,
	ErrAuthorizationFailed,
	ErrAuthenticationFailed,
	ErrUserAlreadyExists,
	ErrUnknownUser,
	ErrUnknownGroup,
	ErrUnknownMember,
	ErrIllegalGeneration,
	ErrMemberIDRequired,
	ErrInconsistentGroupProtocol,
	ErrInvalidSessionTimeout,
	ErrNonEmptyGroup,
	ErrGroupFull,
	ErrFencedInstance,
	ErrCoordinatorNotAvailable,
	ErrCoordinatorLoading,
	ErrGroupSubscribedToTopic,
	ErrConcurrentTransactions,
	ErrProducerFenced,
	ErrInvalidTxnState,
	ErrInvalidTransactionTimeout,
	ErrUnstableOffsetCommit,
	ErrTransactionalIDNotFound,
}

// CodeNone is the error code of a successful response.
const CodeNone int16 = 0

// Errors returns the table of every error, in code order. The slice is a
// copy; the *Error values are shared and must not be modified.
func Errors() []*Error { return append([]*Error(nil), errorTable...) }

// ErrorForCode returns the error for a wire code: nil for CodeNone, the
// table's *Error for a known code, and for a code this package does not
// know (a newer server) a fresh non-retriable *Error that keeps the code, so
// errors.Is still matches by code.
func ErrorForCode(code int16) error {
	if code == CodeNone {
		return nil
	}
	if e := lookupCode(code); e != nil {
		return e
	}
	return &Error{Code: code, Name: "UNKNOWN_CODE_" + strconv.Itoa(int(code)),
		Description: "an error code this client does not know"}
}

// lookupCode returns the table entry for code, or nil.
func lookupCode(code int16) *Error {
	// Codes are dense from 1: the table index is code-1.
	if i := int(code) - 1; i >= 0 && i < len(errorTable) && errorTable[i].Code == code {
		return errorTable[i]
	}
	return nil
}

// CodeOf maps any error to the code a server puts on the wire: CodeNone for
// nil, the code of the first *Error in the chain, else UNKNOWN_SERVER_ERROR.
func CodeOf(err error) int16 {
	if err == nil {
		return CodeNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrUnknownServerError.Code
}

// IsRetriable reports whether err carries a retriable wire error.
func IsRetriable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retriable
}

// Hint tells a client where to send a request instead, after NOT_PRIMARY,
// STALE_GENERATION, NOT_METADATA_PRIMARY or NOT_COORDINATOR.
type Hint struct {
	// NodeID is the node to send to; -1 when unknown.
	NodeID int32
	// Address is that node's advertised client address (HOST:PORT); empty
	// when unknown.
	Address string
	// Generation is the current generation (the primary's consensus term)
	// of the partition, or of the metadata group; -1 when unknown.
	Generation int32
}

// ErrorResponse is the body of a response whose error code is not NONE,
// and the error a decoder returns for a malformed request. It unwraps to
// its table *Error, so errors.Is(err, ErrNotPrimary) works, and
// errors.As(err, &er) gives the message and hint.
type ErrorResponse struct {
	// Err is the table entry; its Code is the response's error code.
	Err *Error
	// Message is the precise text: what failed and why. At most
	// ErrorMessageBytesMax bytes on the wire (encoders truncate).
	Message string
	// RetryAfterMs is the server's advice to wait before retrying (BUSY,
	// PRIMARY_NOT_AVAILABLE); 0 when there is none.
	RetryAfterMs uint32
	// Hint, when not nil, names where to send the request instead.
	Hint *Hint
}

// Error renders NAME: message, with the hint when there is one.
func (e *ErrorResponse) Error() string {
	var b strings.Builder
	if e.Err == nil {
		b.WriteString("UNKNOWN_SERVER_ERROR")
	} else {
		b.WriteString(e.Err.Name)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if h := e.Hint; h != nil {
		fmt.Fprintf(&b, " (hint: node %d at %q, generation %d)", h.NodeID, h.Address, h.Generation)
	}
	if e.RetryAfterMs > 0 {
		fmt.Fprintf(&b, " (retry after %d ms)", e.RetryAfterMs)
	}
	return b.String()
}

// Unwrap returns the table entry (nil when Err is not set).
func (e *ErrorResponse) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// Errorf builds an *ErrorResponse for code err with a formatted message,
// the form a server hands to AppendErrorResponse.
func Errorf(err *Error, format string, args ...any) *ErrorResponse {
	return &ErrorResponse{Err: err, Message: fmt.Sprintf(format, args...)}
}

// asErrorResponse turns any error into the response a server sends for it:
// an *ErrorResponse in the chain as is, an *Error with its text as the
// message, anything else as UNKNOWN_SERVER_ERROR with err.Error().
func asErrorResponse(err error) *ErrorResponse {
	var er *ErrorResponse
	if errors.As(err, &er) && er.Err != nil {
		return er
	}
	var e *Error
	if errors.As(err, &e) {
		if err == error(e) {
			return &ErrorResponse{Err: e, Message: e.Description}
		}
		return &ErrorResponse{Err: e, Message: err.Error()}
	}
	return &ErrorResponse{Err: ErrUnknownServerError, Message: err.Error()}
}
