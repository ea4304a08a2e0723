package service

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// The admin calls' validators. Every front end (the native protocol,
// HTTP, the Kafka listener) hands the service its request as it came and
// gets the refusal in one of the service's kinds, so that a rule answers
// the same kind whichever front end asked: a front end only maps kinds
// onto its codes. The rules and bounds are the protocol's, defined once
// (netio/wire: the naming rule, which the client applies too, and the
// limits; cluster/metadata: the names reserved for the broker's own
// topics); what needs the cluster's state (a topic that exists, a factor
// above the live nodes) is the metadata state machine's to refuse.

// ValidateTopicName checks a new topic's name: the protocol's naming rule
// (1..249 bytes of [a-zA-Z0-9._-], not "." or "..") and no name of the
// broker's internal topics. ErrInvalidTopicName says which rule failed.
func ValidateTopicName(name string) error {
	if err := metadata.ValidateNewTopicName(name); err != nil {
		return Errorf(ErrInvalidTopicName, "%s", ruleMessage(err))
	}
	return nil
}

// ValidateConsumerName checks a consumer's name against the naming rule;
// ErrInvalidConsumerName says which rule failed.
func ValidateConsumerName(name string) error {
	if err := wire.ValidateConsumerName(name); err != nil {
		return Errorf(ErrInvalidConsumerName, "%s", ruleMessage(err))
	}
	return nil
}

// ValidateCreateTopic checks what a CreateTopic needs no cluster state
// for, given the roster's size (rosterNodes, at most 32): the name
// (ErrInvalidTopicName), the partition count, 1..16384
// (ErrInvalidPartitions), the replication factor, 0 (the cluster's
// default) or 1..32 and at most the roster (ErrInvalidReplicationFactor),
// and the configs (ErrInvalidConfig: see TopicConfigOf). With an
// Assignment the partition count and the factor are its own (Partitions
// and ReplicationFactor 0 or equal to them, else ErrInvalidRequest); its
// nodes are the metadata's to check. A replica set longer than the
// roster is not refused here as a factor above the roster: it names a
// node twice or one outside the roster, and the metadata refuses it
// naming that node (ErrInvalidReplicaAssignment), as Kafka refuses such
// an assignment (INVALID_REPLICA_ASSIGNMENT naming the broker, never
// INVALID_REPLICATION_FACTOR).
func ValidateCreateTopic(req *CreateTopicRequest, rosterNodes int) error {
	if err := ValidateTopicName(req.Name); err != nil {
		return err
	}
	if len(req.Assignment) > 0 {
		if err := validateAssignmentShape(req); err != nil {
			return err
		}
		_, err := TopicConfigOf(req.Name, req.Configs)
		return err
	}
	if err := validatePartitions(req.Name, req.Partitions); err != nil {
		return err
	}
	switch rf := int(req.ReplicationFactor); {
	case rf < 0 || rf > wire.ReplicationFactorMax:
		return Errorf(ErrInvalidReplicationFactor, "topic %s: replication factor %d is outside 0 (cluster default) or 1..%d",
			req.Name, rf, wire.ReplicationFactorMax)
	case rf > rosterNodes:
		return Errorf(ErrInvalidReplicationFactor, "topic %s: replication factor %d exceeds the %d nodes of the roster",
			req.Name, rf, rosterNodes)
	}
	_, err := TopicConfigOf(req.Name, req.Configs)
	return err
}

// ValidateAddPartitions checks an AddPartitions' name (the naming rule
// only: an internal topic is refused as unknown) and its new total,
// 1..16384 (ErrInvalidPartitions; that it is above the current count is
// the metadata's to check).
func ValidateAddPartitions(req *AddPartitionsRequest) error {
	if err := wire.ValidateTopicName(req.Name); err != nil {
		return Errorf(ErrInvalidTopicName, "%s", ruleMessage(err))
	}
	return validatePartitions(req.Name, req.Partitions)
}

// validateAssignmentShape refuses an Assignment whose partition count
// or factor contradicts the request's (ErrInvalidRequest, as Kafka
// refuses a count or factor given with an assignment), or with more
// partitions than a topic has room for (ErrInvalidPartitions) or a set
// longer than 32 (ErrInvalidReplicationFactor). REQUIRES: an Assignment.
func validateAssignmentShape(req *CreateTopicRequest) error {
	n := len(req.Assignment)
	if n > wire.PartitionsPerTopicMax {
		return Errorf(ErrInvalidPartitions, "topic %s: the assignment lists %d partitions; at most %d", req.Name, n, wire.PartitionsPerTopicMax)
	}
	if req.Partitions != 0 && int(req.Partitions) != n {
		return Errorf(ErrInvalidRequest, "topic %s: %d partitions asked, but the replica assignment lists %d; give one or the other",
			req.Name, req.Partitions, n)
	}
	for p, r := range req.Assignment {
		if len(r) > wire.ReplicationFactorMax {
			return Errorf(ErrInvalidReplicationFactor, "topic %s: partition %d is assigned %d replicas; at most %d",
				req.Name, p, len(r), wire.ReplicationFactorMax)
		}
	}
	if rf := int(req.ReplicationFactor); rf != 0 && rf != len(req.Assignment[0]) {
		return Errorf(ErrInvalidRequest, "topic %s: replication factor %d asked, but partition 0 is assigned %d replicas; give one or the other",
			req.Name, rf, len(req.Assignment[0]))
	}
	return nil
}

func validatePartitions(topic string, n int32) error {
	if n < 1 || n > wire.PartitionsPerTopicMax {
		return Errorf(ErrInvalidPartitions, "topic %s: %d partitions is outside 1..%d", topic, n, wire.PartitionsPerTopicMax)
	}
	return nil
}

// TopicConfigOf reads a topic's configs: at most 1024 entries, each key
// known (retention_ms, retention_bytes, max_message_bytes, segment_bytes,
// segment_ms, and the compaction keys of compactionConfig) and given
// once, each integer value -1 (unlimited; only for retention), 0 (the
// node's default) or more, max_message_bytes at most the batch format's
// bound, the segment configs within metadata's bounds. Anything else is
// ErrInvalidConfig naming the entry.
func TopicConfigOf(topic string, entries []Config) (metadata.TopicConfig, error) {
	var tc metadata.TopicConfig
	if len(entries) > wire.ConfigsMax {
		return tc, Errorf(ErrInvalidConfig, "topic %s: %d config entries; at most %d", topic, len(entries), wire.ConfigsMax)
	}
	for i, e := range entries {
		if e.Key == "" {
			return tc, Errorf(ErrInvalidConfig, "topic %s: config entry %d has an empty key", topic, i)
		}
		for _, prev := range entries[:i] {
			if prev.Key == e.Key {
				return tc, Errorf(ErrInvalidConfig, "topic %s: config key %q given twice", topic, e.Key)
			}
		}
		if ok, err := compactionConfig(&tc, e); ok || err != nil {
			if err != nil {
				return tc, err
			}
			continue
		}
		v, err := strconv.ParseInt(e.Value, 10, 64)
		if err != nil {
			return tc, Errorf(ErrInvalidConfig, "config %s=%q is not an integer", e.Key, e.Value)
		}
		retention := func() (int64, error) {
			if v < -1 {
				return 0, Errorf(ErrInvalidConfig, "config %s=%d: give -1 (unlimited), 0 (the node's default) or a positive value", e.Key, v)
			}
			return v, nil
		}
		switch e.Key {
		case "retention_ms":
			if tc.RetentionMs, err = retention(); err != nil {
				return tc, err
			}
		case "retention_bytes":
			if tc.RetentionBytes, err = retention(); err != nil {
				return tc, err
			}
		case "max_message_bytes":
			if v < 0 || v > batch.BatchBytesMax {
				return tc, Errorf(ErrInvalidConfig, "config %s=%d: give 0 (the node's storage.max_batch_bytes) or 1..%d bytes", e.Key, v, batch.BatchBytesMax)
			}
			tc.MaxMessageBytes = v
		case "segment_bytes":
			if v != 0 && (v < metadata.TopicSegmentBytesMin || v > metadata.TopicSegmentBytesMax) {
				return tc, Errorf(ErrInvalidConfig, "config %s=%d: give 0 (the node's storage.segment_bytes) or %d..%d bytes", e.Key, v,
					metadata.TopicSegmentBytesMin, metadata.TopicSegmentBytesMax)
			}
			tc.SegmentBytes = v
		case "segment_ms":
			if v < 0 || v > metadata.TopicSegmentMsMax {
				return tc, Errorf(ErrInvalidConfig, "config %s=%d: give 0 (the node's storage.segment_ms) or 1..%d ms", e.Key, v, int64(metadata.TopicSegmentMsMax))
			}
			tc.SegmentMs = v
		default:
			return tc, Errorf(ErrInvalidConfig, "unknown topic config %q (known: retention_ms, retention_bytes, max_message_bytes, segment_bytes, segment_ms, cleanup_policy, min_cleanable_dirty_ratio, delete_retention_ms, min_compaction_lag_ms, max_compaction_lag_ms)", e.Key)
		}
	}
	return tc, nil
}

// ruleMessage is a rule's refusal without its package's prefix: the
// protocol's message, or the metadata's detail.
func ruleMessage(err error) string {
	var we *wire.ErrorResponse
	if errors.As(err, &we) {
		return we.Message
	}
	msg := err.Error()
	if p := metadata.ErrInvalidTopicName.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}

// compactionConfig reads e into tc when it is a compaction key:
// cleanup_policy (delete, compact, compact,delete; "0" or "": the
// default, delete), min_cleanable_dirty_ratio (a number in [0, 1]; 0:
// the default), delete_retention_ms and min_compaction_lag_ms (0 or
// more; 0: the default) and max_compaction_lag_ms (1 or more; 0 or
// Kafka's 9223372036854775807: no bound). ok says e was one of them.
func compactionConfig(tc *metadata.TopicConfig, e Config) (ok bool, err error) {
	switch e.Key {
	case "cleanup_policy":
		switch v := strings.ToLower(strings.ReplaceAll(e.Value, " ", "")); v {
		case "", "0":
			tc.CleanupPolicy = ""
		case metadata.CleanupDelete, metadata.CleanupCompact, metadata.CleanupCompactDelete:
			tc.CleanupPolicy = v
		case "delete,compact":
			tc.CleanupPolicy = metadata.CleanupCompactDelete
		default:
			return true, Errorf(ErrInvalidConfig, "config %s=%q: give delete, compact or compact,delete", e.Key, e.Value)
		}
	case "min_cleanable_dirty_ratio":
		v, perr := strconv.ParseFloat(e.Value, 64)
		if perr != nil || !(v >= 0 && v <= 1) {
			return true, Errorf(ErrInvalidConfig, "config %s=%q: give a number from 0 to 1 (0: the default 0.5)", e.Key, e.Value)
		}
		tc.MinCleanableDirtyRatio = v
	case "delete_retention_ms", "min_compaction_lag_ms":
		v, perr := strconv.ParseInt(e.Value, 10, 64)
		if perr != nil || v < 0 {
			return true, Errorf(ErrInvalidConfig, "config %s=%q: give 0 (the default) or more milliseconds", e.Key, e.Value)
		}
		if e.Key == "delete_retention_ms" {
			tc.DeleteRetentionMs = v
		} else {
			tc.MinCompactionLagMs = v
		}
	case "max_compaction_lag_ms":
		v, perr := strconv.ParseInt(e.Value, 10, 64)
		if perr != nil || v < 0 {
			return true, Errorf(ErrInvalidConfig, "config %s=%q: give 1 or more milliseconds (0 or 9223372036854775807: no bound, the default)", e.Key, e.Value)
		}
		if v == math.MaxInt64 {
			v = 0
		}
		tc.MaxCompactionLagMs = v
	default:
		return false, nil
	}
	return true, nil
}
