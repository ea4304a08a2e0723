package service

import (
	"errors"
	"strconv"

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
// and the configs (ErrInvalidConfig: see TopicConfigOf).
func ValidateCreateTopic(req *CreateTopicRequest, rosterNodes int) error {
	if err := ValidateTopicName(req.Name); err != nil {
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

func validatePartitions(topic string, n int32) error {
	if n < 1 || n > wire.PartitionsPerTopicMax {
		return Errorf(ErrInvalidPartitions, "topic %s: %d partitions is outside 1..%d", topic, n, wire.PartitionsPerTopicMax)
	}
	return nil
}

// TopicConfigOf reads a topic's configs: at most 1024 entries, each key
// known (retention_ms, retention_bytes, max_message_bytes) and given
// once, each value an integer of -1 (unlimited; not for
// max_message_bytes), 0 (the node's default) or more, max_message_bytes
// at most the batch format's bound. Anything else is ErrInvalidConfig
// naming the entry.
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
		default:
			return tc, Errorf(ErrInvalidConfig, "unknown topic config %q (known: retention_ms, retention_bytes, max_message_bytes)", e.Key)
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
