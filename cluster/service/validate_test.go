package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/corestream/corestream/cluster/metadata"
)

// Every admin rule answers its own kind with a message naming what was
// wrong; a request within every bound passes.
func TestValidators(t *testing.T) {
	long := strings.Repeat("a", 250)
	for _, tc := range []struct {
		name string
		err  error
		kind error // nil: accepted
		says string
	}{
		{"good create", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 3, ReplicationFactor: 3,
			Configs: []Config{{"retention_ms", "-1"}, {"retention_bytes", "0"}}}, 3), nil, ""},
		{"default factor", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1}, 1), nil, ""},
		{"name with a slash", ValidateCreateTopic(&CreateTopicRequest{Name: "a/b", Partitions: 1}, 1), ErrInvalidTopicName, "'/'"},
		{"empty name", ValidateCreateTopic(&CreateTopicRequest{Name: "", Partitions: 1}, 1), ErrInvalidTopicName, "empty"},
		{"long name", ValidateCreateTopic(&CreateTopicRequest{Name: long, Partitions: 1}, 1), ErrInvalidTopicName, "250 bytes"},
		{"dot", ValidateCreateTopic(&CreateTopicRequest{Name: ".", Partitions: 1}, 1), ErrInvalidTopicName, `"."`},
		{"internal name", ValidateCreateTopic(&CreateTopicRequest{Name: "__meta", Partitions: 1}, 1), ErrInvalidTopicName, "reserved"},
		{"no partitions", ValidateCreateTopic(&CreateTopicRequest{Name: "t"}, 1), ErrInvalidPartitions, "outside 1..16384"},
		{"too many partitions", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 16385}, 1), ErrInvalidPartitions, "16385"},
		{"negative factor", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: -1}, 3), ErrInvalidReplicationFactor, "outside 0"},
		{"factor 33", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 33}, 32), ErrInvalidReplicationFactor, "1..32"},
		{"factor over the roster", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 4}, 3), ErrInvalidReplicationFactor, "3 nodes of the roster"},
		{"empty config key", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1, Configs: []Config{{"", "1"}}}, 1), ErrInvalidConfig, "empty key"},
		{"config twice", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1, Configs: []Config{{"retention_ms", "1"}, {"retention_ms", "2"}}}, 1), ErrInvalidConfig, "twice"},
		{"unknown config", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1, Configs: []Config{{"colour", "1"}}}, 1), ErrInvalidConfig, "unknown topic config"},
		{"config not a number", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1, Configs: []Config{{"retention_ms", "soon"}}}, 1), ErrInvalidConfig, "not an integer"},
		{"config below -1", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 1, Configs: []Config{{"retention_bytes", "-2"}}}, 1), ErrInvalidConfig, "-1 (unlimited)"},
		{"assigned", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Assignment: [][]int32{{1, 2}, {2, 3}}}, 3), nil, ""},
		{"assigned with its count and factor", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 2, ReplicationFactor: 2,
			Assignment: [][]int32{{1, 2}, {2, 3}}}, 3), nil, ""},
		// Longer than the roster: the metadata names the node twice or
		// outside the roster (INVALID_REPLICA_ASSIGNMENT, as Kafka).
		{"assigned longer than the roster", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Assignment: [][]int32{{1, 2, 3, 4}}}, 3), nil, ""},
		{"assigned, another count", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Partitions: 3, Assignment: [][]int32{{1}}}, 3),
			ErrInvalidRequest, "3 partitions asked, but the replica assignment lists 1"},
		{"assigned, another factor", ValidateCreateTopic(&CreateTopicRequest{Name: "t", ReplicationFactor: 3, Assignment: [][]int32{{1}}}, 3),
			ErrInvalidRequest, "replication factor 3 asked, but partition 0 is assigned 1"},
		{"assigned 33 replicas", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Assignment: [][]int32{make([]int32, 33)}}, 32),
			ErrInvalidReplicationFactor, "33 replicas; at most 32"},
		{"assigned, bad name", ValidateCreateTopic(&CreateTopicRequest{Name: "a/b", Assignment: [][]int32{{1}}}, 3), ErrInvalidTopicName, "'/'"},
		{"assigned, bad config", ValidateCreateTopic(&CreateTopicRequest{Name: "t", Assignment: [][]int32{{1}},
			Configs: []Config{{"colour", "1"}}}, 3), ErrInvalidConfig, "unknown topic config"},
		{"add partitions", ValidateAddPartitions(&AddPartitionsRequest{Name: "t", Partitions: 4}), nil, ""},
		{"add partitions bad name", ValidateAddPartitions(&AddPartitionsRequest{Name: "a b", Partitions: 4}), ErrInvalidTopicName, "' '"},
		{"add partitions 0", ValidateAddPartitions(&AddPartitionsRequest{Name: "t", Partitions: 0}), ErrInvalidPartitions, "outside"},
		{"consumer", ValidateConsumerName("group-1"), nil, ""},
		{"consumer empty", ValidateConsumerName(""), ErrInvalidConsumerName, "empty"},
	} {
		if tc.kind == nil {
			if tc.err != nil {
				t.Errorf("%s: refused: %v", tc.name, tc.err)
			}
			continue
		}
		var se *Error
		if !errors.As(tc.err, &se) || !errors.Is(tc.err, tc.kind) || !strings.Contains(se.Message, tc.says) {
			t.Errorf("%s: %#v, want %v saying %q", tc.name, tc.err, tc.kind, tc.says)
		}
	}
}

// The compaction configs take Kafka's values: a policy (delete,compact in
// either order), a ratio in [0, 1], non-negative milliseconds; anything
// else is ErrInvalidConfig naming the key.
func TestTopicConfigCompaction(t *testing.T) {
	tc, err := TopicConfigOf("t", []Config{{"cleanup_policy", "delete, compact"}, {"min_cleanable_dirty_ratio", "0.25"},
		{"delete_retention_ms", "1000"}, {"min_compaction_lag_ms", "5"}, {"retention_ms", "-1"}})
	if err != nil || tc.CleanupPolicy != "compact,delete" || tc.MinCleanableDirtyRatio != 0.25 ||
		tc.DeleteRetentionMs != 1000 || tc.MinCompactionLagMs != 5 || tc.RetentionMs != -1 {
		t.Fatalf("%+v, %v", tc, err)
	}
	// max.compaction.lag.ms: Kafka's default (Long.MAX_VALUE) is no
	// bound, as 0 is; below the min lag the metadata refuses it.
	for v, want := range map[string]int64{"60000": 60000, "9223372036854775807": 0, "0": 0} {
		if lc, err := TopicConfigOf("t", []Config{{"max_compaction_lag_ms", v}}); err != nil || lc.MaxCompactionLagMs != want {
			t.Errorf("max_compaction_lag_ms=%s: %d, %v; want %d", v, lc.MaxCompactionLagMs, err, want)
		}
	}
	lc, err := TopicConfigOf("t", []Config{{"min_compaction_lag_ms", "10"}, {"max_compaction_lag_ms", "5"}})
	if err == nil {
		err = lc.Check()
	}
	if !errors.Is(err, metadata.ErrInvalidConfig) || !strings.Contains(err.Error(), "max compaction lag 5 ms is below the min compaction lag 10 ms") {
		t.Errorf("max lag below min: %v", err)
	}
	if !tc.Compacted() || !tc.Deletes() {
		t.Fatalf("compact,delete: compacted %v deletes %v", tc.Compacted(), tc.Deletes())
	}
	for _, bad := range []Config{{"cleanup_policy", "shred"}, {"min_cleanable_dirty_ratio", "1.5"},
		{"min_cleanable_dirty_ratio", "NaN"}, {"delete_retention_ms", "-1"}, {"min_compaction_lag_ms", "x"}, {"max_compaction_lag_ms", "-5"}} {
		if _, err := TopicConfigOf("t", []Config{bad}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), bad.Key) {
			t.Errorf("%v: %v, want ErrInvalidConfig naming it", bad, err)
		}
	}
}
