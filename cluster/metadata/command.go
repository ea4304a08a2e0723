package metadata

import (
	"encoding/json"
	"fmt"
)

// CommandVersion is the encoding version of commands and snapshots. Apply
// refuses a command of a newer version instead of guessing.
const CommandVersion = 1

// Op names a command.
type Op string

// The commands.
const (
	OpCreateTopic       Op = "create_topic"
	OpDeleteTopic       Op = "delete_topic"
	OpAddPartitions     Op = "add_partitions"
	OpAllocateProducers Op = "allocate_producer_ids"
	OpCommitOffsets     Op = "commit_offsets"
	// OpDeleteOffsets drops a consumer's committed offsets: those of
	// Offsets (only their keys are read), or every one when it is empty.
	OpDeleteOffsets Op = "delete_offsets"
	OpPrimaryMoved  Op = "primary_moved"
	// The user commands (users.go); Command.User carries the user, with
	// only the fields the op needs: a credential, never a password.
	OpCreateUser  Op = "create_user"
	OpDeleteUser  Op = "delete_user"
	OpSetPassword Op = "set_password"
	OpGrant       Op = "grant"
	OpRevoke      Op = "revoke"
	// OpAlterScram changes one user's SCRAM credentials as Kafka's
	// AlterUserScramCredentials does (Command.Scram; scram.go), and
	// OpGrantACL grants rules as OpGrant, creating the user without a
	// credential when absent, as Kafka's CreateAcls takes any principal.
	OpAlterScram Op = "alter_scram"
	OpGrantACL   Op = "grant_acl"
)

// Command is one metadata change. Only the fields of its Op are set.
type Command struct {
	Version int `json:"v"`
	Op      Op  `json:"op"`
	// CreateTopic: the whole new topic, placement included.
	Topic *Topic `json:"topic,omitempty"`
	// DeleteTopic, AddPartitions: which topic, by name and id (the id
	// guards against acting on a topic recreated meanwhile).
	Name string  `json:"name,omitempty"`
	ID   TopicID `json:"id,omitempty"`
	// AddPartitions: replica sets of the new partitions.
	NewReplicas [][]NodeID `json:"new_replicas,omitempty"`
	// AllocateProducerIDs: how many ids.
	Count int64 `json:"count,omitempty"`
	// PrimaryMoved: the partition (Name, ID, Partition) and when (AtMs).
	Partition int32 `json:"partition,omitempty"`
	AtMs      int64 `json:"at_ms,omitempty"`
	// CommitOffsets: the consumer and its offsets.
	Consumer string        `json:"consumer,omitempty"`
	Offsets  []OffsetEntry `json:"offsets,omitempty"`
	// The user commands: the user (Grant, Revoke: its name and the rules
	// to add or remove).
	User *User `json:"user,omitempty"`
	// AlterScram: the credentials upserted and deleted (scram.go).
	Scram *ScramChange `json:"scram,omitempty"`
	// Reassign*: the move's target list, the roster it was checked
	// against (start), the step and its node (step); see reassign.go.
	Target []NodeID `json:"target,omitempty"`
	Roster []NodeID `json:"roster,omitempty"`
	Step   string   `json:"step,omitempty"`
	Node   NodeID   `json:"node,omitempty"`
	// RosterSeed: every member; NodeAdd: the new member (roster.go).
	// NodeActive, NodeLeaving, NodeRemove name theirs in Node.
	Members []Member `json:"members,omitempty"`
	Member  *Member  `json:"member,omitempty"`
	// AlterConfig: the topic's new config overrides (configs.go).
	Config *TopicConfig `json:"config,omitempty"`
	// SetClusterID: the cluster's id (cluster_id.go). DrainNode: the
	// node taking Node's place (0: chosen per partition; drain.go).
	Cluster     ClusterID `json:"cluster,omitzero"`
	Replacement NodeID    `json:"replacement,omitempty"`
	// ReassignStart: the catch-up throttle the move asks for (bytes/s
	// per node; 0: the nodes' cluster.reassign_throttle_bytes_per_second).
	ThrottleBytesPerSecond int64 `json:"throttle_bps,omitempty"`
	// DeleteRecords: the partition's new log start (records.go).
	Offset int64 `json:"offset,omitempty"`
}

// Encode returns the command's bytes (JSON: the control plane is small and
// a readable log is worth more than a few bytes).
func (c *Command) Encode() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("metadata: encoding a command cannot fail: %v", err))
	}
	return b
}

// DecodeCommand parses bytes written by Encode.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	if c.Version < 1 || c.Version > CommandVersion {
		return c, fmt.Errorf("%w: version %d, this node understands up to %d", ErrInvalidCommand, c.Version, CommandVersion)
	}
	return c, nil
}

// Result is what applying a command produced.
type Result struct {
	// Topic is the created or changed topic.
	Topic *Topic
	// FirstProducerID is the first id of an allocation.
	FirstProducerID int64
	// Errors holds, for a commit, one verdict per offset (nil: stored).
	Errors []error
	// User is the user created, changed or deleted.
	User *User
	// Member is the roster member added, changed or removed.
	Member *Member
}

// Apply applies c. A command that is invalid against the current state
// (the topic exists, is gone, was recreated) changes nothing and returns
// the error; every node reaches the same verdict.
func (s *State) Apply(c Command) (Result, error) {
	switch c.Op {
	case OpCreateTopic:
		return s.applyCreate(c)
	case OpDeleteTopic:
		t, err := s.lookup(c.Name, c.ID)
		if err != nil {
			return Result{}, err
		}
		delete(s.topics, t.Name)
		delete(s.byID, t.ID)
		s.dropOffsets(t.Name)
		for k := range s.moved {
			if k.Topic == t.Name {
				delete(s.moved, k)
			}
		}
		for k := range s.reassign {
			if k.Topic == t.Name {
				delete(s.reassign, k)
			}
		}
		return Result{Topic: t}, nil
	case OpAddPartitions:
		return s.applyAddPartitions(c)
	case OpCommitOffsets:
		return s.applyCommit(c)
	case OpDeleteOffsets:
		return s.applyDeleteOffsets(c)
	case OpPrimaryMoved:
		t, err := s.lookup(c.Name, c.ID)
		if err != nil {
			return Result{}, err
		}
		if c.Partition < 0 || int(c.Partition) >= len(t.Replicas) {
			return Result{}, fmt.Errorf("%w: %s has no partition %d", ErrUnknownTopic, c.Name, c.Partition)
		}
		s.moved[OffsetKey{Topic: c.Name, Partition: c.Partition}] = c.AtMs
		return Result{Topic: t}, nil
	case OpCreateUser, OpDeleteUser, OpSetPassword, OpGrant, OpRevoke, OpGrantACL:
		return s.applyUser(c)
	case OpAlterScram:
		return s.applyScram(c)
	case OpReassignStart, OpReassignStep, OpReassignComplete, OpReassignCancel:
		return s.applyReassign(c)
	case OpRosterSeed, OpNodeAdd, OpNodeActive, OpNodeLeaving, OpNodeRemove:
		return s.applyRoster(c)
	case OpAlterConfig:
		return s.applyAlterConfig(c)
	case OpDeleteRecords:
		return s.applyDeleteRecords(c)
	case OpSetClusterID:
		return s.applySetClusterID(c)
	case OpDrainNode, OpUndrainNode:
		return s.applyDrain(c)
	case OpAllocateProducers:
		if c.Count < 1 || c.Count > ProducerIDsPerAllocationMax {
			return Result{}, fmt.Errorf("%w: allocate %d producer ids", ErrInvalidCommand, c.Count)
		}
		first := s.nextProducerID
		s.nextProducerID += c.Count
		return Result{FirstProducerID: first}, nil
	}
	return Result{}, fmt.Errorf("%w: unknown op %q", ErrInvalidCommand, c.Op)
}

func (s *State) lookup(name string, id TopicID) (*Topic, error) {
	t := s.topics[name]
	if t == nil || (!id.IsZero() && t.ID != id) {
		return nil, fmt.Errorf("%w: %s (id %s)", ErrUnknownTopic, name, id)
	}
	return t, nil
}

func (s *State) applyCreate(c Command) (Result, error) {
	t := c.Topic
	if t == nil {
		return Result{}, fmt.Errorf("%w: create_topic without a topic", ErrInvalidCommand)
	}
	if err := ValidateTopicName(t.Name); err != nil {
		return Result{}, err
	}
	if s.topics[t.Name] != nil {
		return Result{}, fmt.Errorf("%w: %s", ErrTopicExists, t.Name)
	}
	if t.ID.IsZero() || s.byID[t.ID] != nil {
		return Result{}, fmt.Errorf("%w: topic id %s is zero or in use", ErrInvalidCommand, t.ID)
	}
	if len(s.topics) >= TopicsMax {
		return Result{}, fmt.Errorf("%w: the cluster already has %d topics", ErrInvalidCommand, TopicsMax)
	}
	if err := checkReplicas(t.Replicas, t.ReplicationFactor, 1); err != nil {
		return Result{}, err
	}
	if err := s.checkPlaceable(t.Replicas); err != nil {
		return Result{}, err
	}
	cp := *t
	cp.Replicas = cloneReplicas(t.Replicas)
	s.topics[cp.Name] = &cp
	s.byID[cp.ID] = &cp
	return Result{Topic: &cp}, nil
}

func (s *State) applyAddPartitions(c Command) (Result, error) {
	t, err := s.lookup(c.Name, c.ID)
	if err != nil {
		return Result{}, err
	}
	if len(t.Replicas)+len(c.NewReplicas) > PartitionsPerTopicMax {
		return Result{}, fmt.Errorf("%w: %d + %d exceeds %d", ErrInvalidPartitions, len(t.Replicas), len(c.NewReplicas), PartitionsPerTopicMax)
	}
	if err := checkReplicas(c.NewReplicas, t.ReplicationFactor, 1); err != nil {
		return Result{}, err
	}
	if err := s.checkPlaceable(c.NewReplicas); err != nil {
		return Result{}, err
	}
	// Copy on write: readers may hold the old *Topic.
	cp := *t
	cp.Replicas = append(cloneReplicas(t.Replicas), cloneReplicas(c.NewReplicas)...)
	s.topics[cp.Name] = &cp
	s.byID[cp.ID] = &cp
	return Result{Topic: &cp}, nil
}

func checkReplicas(reps [][]NodeID, rf, minParts int) error {
	if rf < 1 || rf > ReplicationFactorMax {
		return fmt.Errorf("%w: %d is outside 1..%d", ErrInvalidReplication, rf, ReplicationFactorMax)
	}
	if len(reps) < minParts || len(reps) > PartitionsPerTopicMax {
		return fmt.Errorf("%w: %d is outside %d..%d", ErrInvalidPartitions, len(reps), minParts, PartitionsPerTopicMax)
	}
	for p, r := range reps {
		if len(r) != rf {
			return fmt.Errorf("%w: partition %d has %d replicas, factor is %d", ErrInvalidCommand, p, len(r), rf)
		}
		seen := map[NodeID]bool{}
		for _, n := range r {
			if seen[n] {
				return fmt.Errorf("%w: partition %d lists node %d twice", ErrInvalidCommand, p, n)
			}
			seen[n] = true
		}
	}
	return nil
}

func cloneReplicas(in [][]NodeID) [][]NodeID {
	out := make([][]NodeID, len(in))
	for i, r := range in {
		out[i] = append([]NodeID(nil), r...)
	}
	return out
}
