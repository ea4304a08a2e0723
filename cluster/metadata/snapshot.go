package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

type snapshot struct {
	Version        int               `json:"v"`
	Topics         []*Topic          `json:"topics"`
	NextProducerID int64             `json:"next_producer_id"`
	Offsets        []consumerOffsets `json:"offsets,omitempty"`
	Moved          []movedAt         `json:"moved,omitempty"`
	Users          []*User           `json:"users,omitempty"`
	UserGeneration int64             `json:"user_generation,omitempty"`
	Reassignments  []*Reassignment   `json:"reassignments,omitempty"`
	Roster         []*Member         `json:"roster,omitempty"`
	ClusterID      ClusterID         `json:"cluster_id,omitzero"`
	Drains         []*Drain          `json:"drains,omitempty"`
}

type movedAt struct {
	OffsetKey
	AtMs int64 `json:"at_ms"`
}

type consumerOffsets struct {
	Consumer string        `json:"consumer"`
	Offsets  []OffsetEntry `json:"offsets"`
}

// Snapshot encodes the whole state. The caller frames it with a checksum
// when it stores or sends it.
func (s *State) Snapshot() []byte {
	snap := snapshot{Version: CommandVersion, Topics: s.Topics(), NextProducerID: s.nextProducerID, Users: s.Users(), UserGeneration: s.userGen}
	names := make([]string, 0, len(s.offsets))
	for c := range s.offsets {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		snap.Offsets = append(snap.Offsets, consumerOffsets{Consumer: c, Offsets: s.CommittedAll(c)})
	}
	for k, at := range s.moved {
		snap.Moved = append(snap.Moved, movedAt{k, at})
	}
	sort.Slice(snap.Moved, func(i, j int) bool {
		a, b := snap.Moved[i], snap.Moved[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	snap.Reassignments = s.Reassignments()
	snap.Roster = s.Roster()
	snap.ClusterID, snap.Drains = s.clusterID, s.Drains()
	b, err := json.Marshal(snap)
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
	for _, co := range snap.Offsets {
		res, err := s.applyCommit(Command{Consumer: co.Consumer, Offsets: co.Offsets})
		if err == nil {
			for _, e := range res.Errors {
				err = errors.Join(err, e)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot offsets of %q: %w", co.Consumer, err)
		}
	}
	for _, m := range snap.Moved {
		s.moved[m.OffsetKey] = m.AtMs
	}
	for _, u := range snap.Users {
		if err := s.restoreUser(u); err != nil {
			return nil, fmt.Errorf("snapshot user %q: %w", u.Name, err)
		}
		if u.Generation < 1 || u.Generation > snap.UserGeneration {
			return nil, fmt.Errorf("%w: snapshot user %q has generation %d above %d", ErrInvalidCommand, u.Name, u.Generation, snap.UserGeneration)
		}
		cp := *s.users[u.Name]
		cp.Generation = u.Generation
		s.users[u.Name] = &cp
	}
	s.userGen = snap.UserGeneration
	for _, r := range snap.Reassignments {
		t := s.TopicByID(r.TopicID)
		if t == nil || t.Name != r.Topic || r.Partition < 0 || int(r.Partition) >= len(t.Replicas) ||
			len(r.Target) != t.ReplicationFactor || len(r.From) != t.ReplicationFactor {
			return nil, fmt.Errorf("%w: snapshot reassignment of %s/%d does not fit its topic", ErrInvalidCommand, r.Topic, r.Partition)
		}
		s.reassign[OffsetKey{r.Topic, r.Partition}] = r
	}
	if err := s.restoreRoster(snap.Roster); err != nil {
		return nil, fmt.Errorf("snapshot roster: %w", err)
	}
	s.clusterID = snap.ClusterID
	for _, d := range snap.Drains {
		if d.Node <= 0 || d.Replacement < 0 || d.Replacement == d.Node || s.drains[d.Node] != nil {
			return nil, fmt.Errorf("%w: snapshot drain of node %d (replacement %d)", ErrInvalidCommand, d.Node, d.Replacement)
		}
		s.drains[d.Node] = d
	}
	return s, nil
}
