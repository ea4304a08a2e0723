package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// frozen is the table as released: a native code's Kafka code is part of
// the protocol clients see, so changing one is a deliberate act that
// edits this list too.
var frozen = map[string]int16{
	"UNKNOWN_SERVER_ERROR": -1, "INVALID_REQUEST": 42, "UNSUPPORTED_VERSION": 35, "CORRUPT_MESSAGE": 2,
	"MESSAGE_TOO_LARGE": 10, "UNKNOWN_TOPIC_OR_PARTITION": 3, "NOT_PRIMARY": 6, "STALE_GENERATION": 74,
	"PRIMARY_NOT_AVAILABLE": 5, "NOT_METADATA_PRIMARY": 41, "REQUEST_TIMED_OUT": 7, "NOT_ENOUGH_REPLICAS": 19,
	"STORAGE_ERROR": 56, "OFFSET_OUT_OF_RANGE": 1, "TOPIC_ALREADY_EXISTS": 36, "INVALID_TOPIC_NAME": 17,
	"INVALID_PARTITIONS": 37, "INVALID_REPLICATION_FACTOR": 38, "INVALID_CONFIG": 40, "DUPLICATE_SEQUENCE": 46,
	"OUT_OF_ORDER_SEQUENCE": 45, "INVALID_PRODUCER_EPOCH": 47, "UNKNOWN_PRODUCER_ID": 59, "BUSY": 7,
	"NOT_IN_SYNC_REPLICA": 83, "REBALANCE_IN_PROGRESS": 27, "UNKNOWN_CONSUMER": 69, "INVALID_CONSUMER_NAME": 24,
	"NOT_COORDINATOR": 16, "NOT_REPLICA": 9, "NODE_NOT_AVAILABLE": 8, "INVALID_TIMESTAMP": 32,
	"INVALID_OFFSET": 1, "INVALID_PRODUCER_ID_MAPPING": 49, "METADATA_NOT_READY": 5,
}

// Every native code has exactly one row, with the frozen Kafka code, and
// every replica kind is answered through exactly one row.
func TestCodesCoverEveryNativeCodeAndKind(t *testing.T) {
	rows := map[int16]bool{}
	kinds := map[error]bool{}
	for _, c := range codes {
		if rows[c.native.Code] {
			t.Errorf("%s has two rows", c.native.Name)
		}
		rows[c.native.Code] = true
		if want, ok := frozen[c.native.Name]; !ok || want != c.kafka.Code {
			t.Errorf("%s maps to %s (%d); frozen: %d", c.native.Name, c.kafka.Message, c.kafka.Code, want)
		}
		if c.kind != nil {
			if kinds[c.kind] {
				t.Errorf("%v has two rows", c.kind)
			}
			kinds[c.kind] = true
		}
	}
	for _, e := range wire.Errors() {
		if !rows[e.Code] {
			t.Errorf("native %s (%d) has no Kafka code", e.Name, e.Code)
		}
	}
	for _, k := range partition.ErrorKinds() {
		if !kinds[k] {
			t.Errorf("replica kind %v has no Kafka code", k)
		}
	}
	if len(frozen) != len(codes) {
		t.Errorf("frozen lists %d codes, the table %d", len(frozen), len(codes))
	}
}

// The table is one to one but for the Kafka codes listed as shared, each
// with its reason in the table.
func TestCodesOneToOne(t *testing.T) {
	by := map[int16][]string{}
	for _, c := range codes {
		by[c.kafka.Code] = append(by[c.kafka.Code], c.native.Name)
	}
	for code, names := range by {
		if len(names) > 1 && !sharedKafkaCodes[code] {
			t.Errorf("Kafka code %d serves %v but is not listed as shared", code, names)
		}
		if len(names) == 1 && sharedKafkaCodes[code] {
			t.Errorf("Kafka code %d is listed as shared but serves only %v", code, names)
		}
	}
}

// The conversions: a replica's error by kind (its own code, even where a
// native code shares the Kafka one), a native response by code, anything
// else unknown.
func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{&partition.Error{Kind: partition.ErrNotPrimary, Message: "x", Leader: 2}, kerr.NotLeaderForPartition.Code},
		{&partition.Error{Kind: partition.ErrStaleGeneration}, kerr.FencedLeaderEpoch.Code},
		{&partition.Error{Kind: partition.ErrDuplicateSequence}, kerr.DuplicateSequenceNumber.Code},
		{wire.Errorf(wire.ErrInvalidReplicationFactor, "3 > 1"), kerr.InvalidReplicationFactor.Code},
		{wire.ErrTopicAlreadyExists, kerr.TopicAlreadyExists.Code},
		{errors.New("something else"), kerr.UnknownServerError.Code},
	} {
		if got := errorCode(tc.err); got != tc.want {
			t.Errorf("errorCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
