package service

import (
	"time"

	"github.com/corestream/corestream/cluster/metadata"
)

// Config is one topic config given at creation (retention_ms,
// retention_bytes), as text.
type Config struct {
	Key, Value string
}

// CreateTopicRequest creates a topic. Timeout (0: the default) bounds
// the wait for the command to commit and every partition to have a
// primary.
type CreateTopicRequest struct {
	Name       string
	Partitions int32
	// ReplicationFactor 0 is the cluster's default.
	ReplicationFactor int16
	// Assignment, when not empty, places the replicas by hand instead of
	// the placement: Assignment[i] is partition i's replica node ids, the
	// first its preferred primary. Its length is the partition count and
	// every set's length the replication factor (fixed for the topic's
	// life); Partitions and ReplicationFactor are then 0 or equal to
	// them. Refusals: ErrInvalidReplicaAssignment, and
	// ErrInvalidReplicationFactor for sets longer than 32.
	Assignment [][]int32
	Configs    []Config
	// ValidateOnly plans the topic and answers without creating it.
	ValidateOnly bool
	Timeout      time.Duration
}

// CreateTopicResult is the topic created (ID zero for ValidateOnly).
type CreateTopicResult struct {
	ID                metadata.TopicID
	Partitions        int32
	ReplicationFactor int16
}

// DeleteTopicRequest deletes a topic; a non-zero ID fences its history.
type DeleteTopicRequest struct {
	Name    string
	ID      metadata.TopicID
	Timeout time.Duration
}

// AddPartitionsRequest raises a topic's partition count to Partitions (a
// total, above the current one).
type AddPartitionsRequest struct {
	Name       string
	ID         metadata.TopicID
	Partitions int32
	// Assignment, when not empty, places the new partitions' replicas by
	// hand: Assignment[i] is the replica node ids of new partition
	// (current count + i), the first its preferred primary; one set per
	// new partition, each of the topic's replication factor
	// (ErrInvalidReplicaAssignment).
	Assignment   [][]int32
	ValidateOnly bool
	Timeout      time.Duration
}

// AlterTopicConfigRequest changes a topic's config overrides
// (retention_ms, retention_bytes); every node applies the new values to
// the topic's replicas at run time. With Replace the topic's configs are
// exactly Set, the others back to the node's default (Kafka's
// AlterConfigs); else only the keys in Set and Reset change (Kafka's
// IncrementalAlterConfigs).
type AlterTopicConfigRequest struct {
	Name string
	// ID, when not zero, fences the topic's history (a recreated topic
	// of the same name is not changed).
	ID    metadata.TopicID
	Set   []Config
	Reset []string
	// Replace sets every config not in Set back to its default.
	Replace bool
	// ValidateOnly checks the change and answers without making it.
	ValidateOnly bool
	Timeout      time.Duration
}

// OffsetCommit is one committed offset of a consumer.
type OffsetCommit struct {
	Topic     string
	TopicID   metadata.TopicID
	Partition int32
	Offset    int64
	Metadata  string
}

// CommitOffsetsRequest stores a named consumer's offsets; each entry
// succeeds or fails on its own.
type CommitOffsetsRequest struct {
	Consumer string
	Offsets  []OffsetCommit
}

// TopicPartition names one partition by topic name.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// FetchOffsetsRequest reads a named consumer's committed offsets: of
// Partitions, or of every partition it committed when that is empty.
type FetchOffsetsRequest struct {
	Consumer   string
	Partitions []TopicPartition
}

// CommittedOffset is one partition's stored offset; Offset -1 and a zero
// TopicID when nothing is committed.
type CommittedOffset struct {
	Topic     string
	TopicID   metadata.TopicID
	Partition int32
	Offset    int64
	Metadata  string
}

// MovePrimaryRequest moves a partition's primary to TargetNodeID (an
// in-sync replica) by leadership transfer; it answers once the target
// leads.
type MovePrimaryRequest struct {
	Topic        string
	TopicID      metadata.TopicID
	Partition    int32
	TargetNodeID int32
	Timeout      time.Duration
}

// MovePrimaryResult is the partition's primary after the move.
type MovePrimaryResult struct {
	PrimaryID, Generation int32
}

// RebalanceRequest asks the balancer for its plan and, unless DryRun,
// starts it (moves run one at a time, in the background).
type RebalanceRequest struct {
	DryRun bool
	// MovesMax bounds the plan; 0 is PartitionsPerTopicMax moves.
	MovesMax uint32
	// Preferred plans only moves back to preferred primaries (the first
	// replica), every partition led away, whatever the imbalance allowed
	// (Kafka's preferred leader election on demand).
	Preferred bool
}

// PrimaryMove is one planned move.
type PrimaryMove struct {
	Topic            string
	TopicID          metadata.TopicID
	Partition        int32
	FromNode, ToNode int32
}

// RebalanceResult is the plan in execution order, and whether it
// started.
type RebalanceResult struct {
	Started bool
	Moves   []PrimaryMove
}
