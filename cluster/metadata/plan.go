package metadata

import (
	"fmt"

	"github.com/corestream/corestream/cluster/placement"
	"github.com/google/uuid"
)

// CreateRequest is what a client asks for.
type CreateRequest struct {
	Name       string
	Partitions int
	// ReplicationFactor 0 means the cluster default.
	ReplicationFactor int
	Config            TopicConfig
	// Racks is each roster node's rack (node.rack; missing: none), over
	// which the placement spreads every partition's replicas.
	Racks map[NodeID]string
	// Internal creates one of the broker's own topics (IsInternalTopic):
	// only the node asks for it, never a client's request.
	Internal bool
	// Assignment, when not empty, is the manual replica assignment used
	// instead of the placement: partition i's replica set, its first
	// replica the preferred primary. Its length is the partition count
	// and its sets' length the replication factor (Partitions and
	// ReplicationFactor are then 0 or equal to them).
	Assignment [][]NodeID
}

// PlanCreateTopic validates req against the state and the roster and
// returns the command to propose: a fresh UUID and a placement over the
// eligible nodes that evens out the current load, or req's Assignment
// (checkAssignment: ErrInvalidAssignment, ErrInvalidReplication).
// defaultRF is the resolved cluster default (already ≤ the roster).
func (s *State) PlanCreateTopic(req CreateRequest, roster, eligible []NodeID, defaultRF int, nowMs int64) (Command, error) {
	validate := ValidateNewTopicName
	if req.Internal {
		validate = validateInternalTopicName
	}
	if err := validate(req.Name); err != nil {
		return Command{}, err
	}
	if s.topics[req.Name] != nil {
		return Command{}, fmt.Errorf("%w: %s", ErrTopicExists, req.Name)
	}
	if len(req.Assignment) > 0 {
		return s.planAssigned(req, roster, nowMs)
	}
	if req.Partitions < 1 || req.Partitions > PartitionsPerTopicMax {
		return Command{}, fmt.Errorf("%w: %d is outside 1..%d", ErrInvalidPartitions, req.Partitions, PartitionsPerTopicMax)
	}
	rf := req.ReplicationFactor
	if rf == 0 {
		rf = defaultRF
	}
	if rf < 1 || rf > ReplicationFactorMax {
		return Command{}, fmt.Errorf("%w: %d is outside 1..%d", ErrInvalidReplication, rf, ReplicationFactorMax)
	}
	if rf > len(roster) {
		return Command{}, fmt.Errorf("%w: %d exceeds the %d nodes of the roster", ErrInvalidReplication, rf, len(roster))
	}
	if err := req.Config.Check(); err != nil {
		return Command{}, err
	}
	reps, err := placement.PlaceRacks(eligible, req.Racks, s.Load(), req.Partitions, rf)
	if err != nil {
		return Command{}, fmt.Errorf("%w: %v (live nodes: %d)", ErrInvalidReplication, err, len(eligible))
	}
	t := &Topic{Name: req.Name, ID: TopicID(uuid.New()), ReplicationFactor: rf,
		Replicas: reps, Config: req.Config, CreatedMs: nowMs}
	return Command{Version: CommandVersion, Op: OpCreateTopic, Topic: t}, nil
}

// planAssigned is PlanCreateTopic for a request with an Assignment,
// whose name is checked.
func (s *State) planAssigned(req CreateRequest, roster []NodeID, nowMs int64) (Command, error) {
	n := len(req.Assignment)
	if n > PartitionsPerTopicMax {
		return Command{}, fmt.Errorf("%w: the assignment lists %d partitions; at most %d", ErrInvalidPartitions, n, PartitionsPerTopicMax)
	}
	if req.Partitions != 0 && req.Partitions != n {
		return Command{}, fmt.Errorf("%w: topic %s: %d partitions asked, but the assignment lists %d",
			ErrInvalidAssignment, req.Name, req.Partitions, n)
	}
	rf, err := s.checkAssignment(req.Name, req.Assignment, 0, req.ReplicationFactor, roster)
	if err != nil {
		return Command{}, err
	}
	if err := req.Config.Check(); err != nil {
		return Command{}, err
	}
	t := &Topic{Name: req.Name, ID: TopicID(uuid.New()), ReplicationFactor: rf,
		Replicas: cloneReplicas(req.Assignment), Config: req.Config, CreatedMs: nowMs}
	return Command{Version: CommandVersion, Op: OpCreateTopic, Topic: t}, nil
}

// PlanAddPartitions returns the command that grows name to total
// partitions, keeping its replication factor, with the new replicas
// spread over racks (each roster node's rack; missing: none), or, when
// assign is not empty, on the nodes it lists: assign[i] is the replica
// set of new partition i, of the topic's factor (checkAssignment), and
// there is one per new partition (ErrInvalidAssignment).
func (s *State) PlanAddPartitions(name string, id TopicID, total int, eligible []NodeID, racks map[NodeID]string,
	assign [][]NodeID) (Command, error) {
	t, err := s.lookup(name, id)
	if err != nil {
		return Command{}, err
	}
	if total == len(t.Replicas) {
		// As Kafka's CreatePartitions: asking for the count a topic
		// already has is an error, not a success that changed nothing.
		return Command{}, fmt.Errorf("%w: %s already has %d partitions; ask for more (partitions cannot be removed)",
			ErrInvalidPartitions, name, total)
	}
	if total < len(t.Replicas) || total > PartitionsPerTopicMax {
		return Command{}, fmt.Errorf("%w: %s has %d partitions; the new total %d must be larger and at most %d",
			ErrInvalidPartitions, name, len(t.Replicas), total, PartitionsPerTopicMax)
	}
	if len(assign) > 0 {
		if len(assign) != total-len(t.Replicas) {
			return Command{}, fmt.Errorf("%w: topic %s: %d partitions added (%d to %d), but the assignment lists %d",
				ErrInvalidAssignment, name, total-len(t.Replicas), len(t.Replicas), total, len(assign))
		}
		if _, err := s.checkAssignment(name, assign, len(t.Replicas), t.ReplicationFactor, eligible); err != nil {
			return Command{}, err
		}
		return Command{Version: CommandVersion, Op: OpAddPartitions, Name: name, ID: t.ID, NewReplicas: cloneReplicas(assign)}, nil
	}
	reps, err := placement.PlaceRacks(eligible, racks, s.Load(), total-len(t.Replicas), t.ReplicationFactor)
	if err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrInvalidReplication, err)
	}
	return Command{Version: CommandVersion, Op: OpAddPartitions, Name: name, ID: t.ID, NewReplicas: reps}, nil
}

// PlanDeleteTopic returns the command that deletes name.
func (s *State) PlanDeleteTopic(name string, id TopicID) (Command, error) {
	t, err := s.lookup(name, id)
	if err != nil {
		return Command{}, err
	}
	return Command{Version: CommandVersion, Op: OpDeleteTopic, Name: name, ID: t.ID}, nil
}
