package wire

import (
	"errors"
	"fmt"
	"testing"
)

// frozenCodes is the published error table. NEVER edit or delete a line:
// a code keeps its name forever. Add lines only, for new codes.
var frozenCodes = map[int16]string{
	1: "UNKNOWN_SERVER_ERROR", 2: "INVALID_REQUEST", 3: "UNSUPPORTED_VERSION", 4: "CORRUPT_MESSAGE",
	5: "MESSAGE_TOO_LARGE", 6: "UNKNOWN_TOPIC_OR_PARTITION", 7: "NOT_PRIMARY", 8: "STALE_GENERATION",
	9: "PRIMARY_NOT_AVAILABLE", 10: "NOT_METADATA_PRIMARY", 11: "REQUEST_TIMED_OUT", 12: "NOT_ENOUGH_REPLICAS",
	13: "STORAGE_ERROR", 14: "OFFSET_OUT_OF_RANGE", 15: "TOPIC_ALREADY_EXISTS", 16: "INVALID_TOPIC_NAME",
	17: "INVALID_PARTITIONS", 18: "INVALID_REPLICATION_FACTOR", 19: "INVALID_CONFIG", 20: "DUPLICATE_SEQUENCE",
	21: "OUT_OF_ORDER_SEQUENCE", 22: "INVALID_PRODUCER_EPOCH", 23: "UNKNOWN_PRODUCER_ID", 24: "BUSY",
	25: "NOT_IN_SYNC_REPLICA", 26: "REBALANCE_IN_PROGRESS", 27: "UNKNOWN_CONSUMER", 28: "INVALID_CONSUMER_NAME",
	29: "NOT_COORDINATOR", 30: "NOT_REPLICA", 31: "NODE_NOT_AVAILABLE", 32: "INVALID_TIMESTAMP",
	33: "INVALID_OFFSET", 34: "INVALID_PRODUCER_ID_MAPPING", 35: "METADATA_NOT_READY",
	36: "AUTHORIZATION_FAILED", 37: "AUTHENTICATION_FAILED", 38: "USER_ALREADY_EXISTS", 39: "UNKNOWN_USER",
	40: "UNKNOWN_GROUP", 41: "UNKNOWN_MEMBER", 42: "ILLEGAL_GENERATION", 43: "MEMBER_ID_REQUIRED",
	44: "INCONSISTENT_GROUP_PROTOCOL", 45: "INVALID_SESSION_TIMEOUT", 46: "NON_EMPTY_GROUP", 47: "GROUP_FULL",
	48: "FENCED_INSTANCE_ID", 49: "COORDINATOR_NOT_AVAILABLE", 50: "COORDINATOR_LOADING", 51: "GROUP_SUBSCRIBED_TO_TOPIC",
	52: "CONCURRENT_TRANSACTIONS", 53: "PRODUCER_FENCED", 54: "INVALID_TXN_STATE", 55: "INVALID_TRANSACTION_TIMEOUT",
	56: "UNSTABLE_OFFSET_COMMIT", 57: "TRANSACTIONAL_ID_NOT_FOUND",
}

// frozenKeys is the published API key list, under the same rule.
var frozenKeys = map[APIKey]string{
	0: "Handshake", 1: "Produce", 2: "Fetch", 3: "ListOffsets", 4: "Metadata", 5: "CreateTopic",
	6: "DeleteTopic", 7: "ListTopics", 8: "DescribeTopic", 9: "AddPartitions", 10: "CommitOffsets",
	11: "FetchOffsets", 12: "InitProducer", 13: "ClusterStatus", 14: "MovePrimary", 15: "Rebalance",
	16: "DescribePartition", 17: "Authenticate", 18: "Reassign",
	19: "FindCoordinator", 20: "JoinGroup", 21: "SyncGroup", 22: "Heartbeat", 23: "LeaveGroup",
	24: "CommitGroupOffsets", 25: "FetchGroupOffsets", 26: "ListGroups", 27: "DescribeGroup", 28: "DeleteGroup",
	29: "DeleteGroupOffsets", 30: "ChangeRoster", 31: "Home",
}

func TestErrorCodesAppendOnly(t *testing.T) {
	for code, name := range frozenCodes {
		e, ok := ErrorForCode(code).(*Error)
		if !ok || e.Name != name {
			t.Errorf("code %d must stay %s, is %v", code, name, e)
		}
	}
	names := map[string]bool{}
	for i, e := range Errors() {
		if e.Code != int16(i+1) {
			t.Errorf("table entry %d has code %d: keep the table dense and in code order", i, e.Code)
		}
		if names[e.Name] {
			t.Errorf("name %s used twice", e.Name)
		}
		names[e.Name] = true
		if frozenCodes[e.Code] == "" {
			t.Errorf("code %d (%s) is not in frozenCodes: add it there", e.Code, e.Name)
		}
		if e.Description == "" {
			t.Errorf("%s has no description", e.Name)
		}
	}
	for key, name := range frozenKeys {
		if key.String() != name {
			t.Errorf("API key %d must stay %s, is %s", key, name, key)
		}
	}
	if len(APIs()) != len(frozenKeys) {
		t.Errorf("API table has %d keys, frozenKeys %d: add new keys there", len(APIs()), len(frozenKeys))
	}
}

func TestErrorMatching(t *testing.T) {
	if ErrorForCode(CodeNone) != nil {
		t.Fatal("code 0 must map to nil")
	}
	if ErrorForCode(7) != ErrNotPrimary {
		t.Fatal("code 7")
	}
	wrapped := fmt.Errorf("send: %w", &ErrorResponse{Err: ErrNotPrimary, Message: "x"})
	if !errors.Is(wrapped, ErrNotPrimary) || errors.Is(wrapped, ErrStaleGeneration) {
		t.Fatal("errors.Is must match by code")
	}
	if !errors.Is(ErrorForCode(7), &Error{Code: 7}) {
		t.Fatal("a copy with the same code must match")
	}
	unknown := ErrorForCode(500)
	if !errors.Is(unknown, &Error{Code: 500}) || IsRetriable(unknown) || CodeOf(unknown) != 500 {
		t.Fatalf("unknown code: %v", unknown)
	}
	if CodeOf(nil) != CodeNone || CodeOf(errors.New("x")) != ErrUnknownServerError.Code || CodeOf(wrapped) != 7 {
		t.Fatal("CodeOf")
	}
	if !IsRetriable(wrapped) || IsRetriable(ErrInvalidRequest) || IsRetriable(errors.New("x")) {
		t.Fatal("IsRetriable")
	}
}

func TestErrorResponseWithoutErr(t *testing.T) {
	er := &ErrorResponse{Message: "m"}
	if er.Error() != "UNKNOWN_SERVER_ERROR: m" || errors.Is(er, ErrUnknownServerError) || er.Unwrap() != nil {
		t.Fatal("an ErrorResponse without Err must be safe to print and match")
	}
	if CodeOf(er) != ErrUnknownServerError.Code {
		t.Fatal("CodeOf")
	}
	frame := AppendErrorResponse(nil, 1, er)
	h, _, _ := ParseResponseHeader(frame[SizeFieldBytes:])
	if h.ErrorCode != ErrUnknownServerError.Code {
		t.Fatalf("sent as %d", h.ErrorCode)
	}
}
