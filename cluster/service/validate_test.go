package service

import (
	"errors"
	"strings"
	"testing"
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
