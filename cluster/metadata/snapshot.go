package metadata

import (
	"encoding/json"
	"fmt"
)

type snapshot struct {
	Version        int      `json:"v"`
	Topics         []*Topic `json:"topics"`
	NextProducerID int64    `json:"next_producer_id"`
}

// Snapshot encodes the whole state. The caller frames it with a checksum
// when it stores or sends it.
func (s *State) Snapshot() []byte {
	b, err := json.Marshal(snapshot{Version: CommandVersion, Topics: s.Topics(), NextProducerID: s.nextProducerID})
	if err != nil {
		panic(fmt.Sprintf("metadata: encoding a snapshot cannot fail: %v", err))
	}
	return b
}

// Restore replaces the state with a snapshot, checking the invariants.
func Restore(b []byte) (*State, error) {
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrInvalidCommand, err)
	}
	if snap.Version < 1 || snap.Version > CommandVersion {
		return nil, fmt.Errorf("%w: snapshot version %d", ErrInvalidCommand, snap.Version)
	}
	s := New()
	for _, t := range snap.Topics {
		if _, err := s.applyCreate(Command{Version: snap.Version, Op: OpCreateTopic, Topic: t}); err != nil {
			return nil, fmt.Errorf("snapshot topic %q: %w", t.Name, err)
		}
	}
	if snap.NextProducerID < 0 {
		return nil, fmt.Errorf("%w: snapshot producer id %d", ErrInvalidCommand, snap.NextProducerID)
	}
	s.nextProducerID = snap.NextProducerID
	return s, nil
}
