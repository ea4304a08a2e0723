package metadata

import (
	"fmt"
	"sort"
)

// Bounds on consumer offsets.
const (
	// ConsumersMax bounds named consumers with committed offsets.
	ConsumersMax = 100000
	// OffsetMetadataBytesMax bounds the opaque string stored with an offset.
	OffsetMetadataBytesMax = 4096
	// OffsetsPerCommitMax bounds the entries of one commit command.
	OffsetsPerCommitMax = 10000
)

// OffsetKey names one partition of one topic.
type OffsetKey struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Committed is a stored consumer offset.
type Committed struct {
	// TopicID is the topic's id when the offset was committed.
	TopicID TopicID `json:"topic_id"`
	// Offset is the next offset the consumer will read.
	Offset   int64  `json:"offset"`
	Metadata string `json:"metadata,omitempty"`
}

// OffsetEntry is one offset in a commit command.
type OffsetEntry struct {
	OffsetKey
	Committed
}

// Committed returns the offset consumer committed for key.
func (s *State) Committed(consumer string, key OffsetKey) (Committed, bool) {
	c, ok := s.offsets[consumer][key]
	return c, ok
}

// CommittedAll returns every offset consumer committed, sorted by key.
func (s *State) CommittedAll(consumer string) []OffsetEntry {
	m := s.offsets[consumer]
	out := make([]OffsetEntry, 0, len(m))
	for k, c := range m {
		out = append(out, OffsetEntry{OffsetKey: k, Committed: c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// CheckOffset reports whether e may be stored: the topic exists with the
// same id (a zero id skips that check), the partition exists, the offset
// is not negative and the metadata is within bounds.
func (s *State) CheckOffset(e OffsetEntry) error {
	t := s.topics[e.Topic]
	if t == nil || (!e.TopicID.IsZero() && t.ID != e.TopicID) {
		return fmt.Errorf("%w: %s (id %s)", ErrUnknownTopic, e.Topic, e.TopicID)
	}
	if e.Partition < 0 || int(e.Partition) >= len(t.Replicas) {
		return fmt.Errorf("%w: %s has no partition %d", ErrUnknownTopic, e.Topic, e.Partition)
	}
	if e.Offset < 0 {
		return fmt.Errorf("%w: offset %d is negative", ErrInvalidCommand, e.Offset)
	}
	if len(e.Metadata) > OffsetMetadataBytesMax {
		return fmt.Errorf("%w: offset metadata of %d bytes exceeds %d", ErrInvalidCommand, len(e.Metadata), OffsetMetadataBytesMax)
	}
	return nil
}

// applyCommit stores every entry that passes CheckOffset; Result.Errors
// holds one entry per input (nil where stored).
func (s *State) applyCommit(c Command) (Result, error) {
	if c.Consumer == "" || len(c.Offsets) == 0 || len(c.Offsets) > OffsetsPerCommitMax {
		return Result{}, fmt.Errorf("%w: commit of %d offsets for consumer %q", ErrInvalidCommand, len(c.Offsets), c.Consumer)
	}
	m := s.offsets[c.Consumer]
	if m == nil {
		if len(s.offsets) >= ConsumersMax {
			return Result{}, fmt.Errorf("%w: %d consumers already have offsets", ErrInvalidCommand, ConsumersMax)
		}
		m = map[OffsetKey]Committed{}
		s.offsets[c.Consumer] = m
	}
	res := Result{Errors: make([]error, len(c.Offsets))}
	for i, e := range c.Offsets {
		if err := s.CheckOffset(e); err != nil {
			res.Errors[i] = err
			continue
		}
		e.Committed.TopicID = s.topics[e.Topic].ID
		m[e.OffsetKey] = e.Committed
	}
	if len(m) == 0 {
		delete(s.offsets, c.Consumer)
	}
	return res, nil
}

// applyDeleteOffsets drops the consumer's offsets of c.Offsets' keys, or
// all of them when c.Offsets is empty (a consumer group deleted). A key
// the consumer has no offset for is no error: deleting is idempotent.
func (s *State) applyDeleteOffsets(c Command) (Result, error) {
	if c.Consumer == "" || len(c.Offsets) > OffsetsPerCommitMax {
		return Result{}, fmt.Errorf("%w: delete of %d offsets for consumer %q", ErrInvalidCommand, len(c.Offsets), c.Consumer)
	}
	m := s.offsets[c.Consumer]
	if len(c.Offsets) == 0 {
		m = nil
	}
	for _, e := range c.Offsets {
		delete(m, e.OffsetKey)
	}
	if len(m) == 0 {
		delete(s.offsets, c.Consumer)
	}
	return Result{}, nil
}

// dropOffsets forgets every offset of topic (it was deleted).
func (s *State) dropOffsets(topic string) {
	for consumer, m := range s.offsets {
		for k := range m {
			if k.Topic == topic {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(s.offsets, consumer)
		}
	}
}
