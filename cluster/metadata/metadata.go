// Package metadata is the cluster's metadata state machine: topics (name,
// id, partition count, replication factor, per-topic config), each
// partition's replica set with its preferred primary first, and the
// producer-id allocator.
//
// The state changes only by applying commands, in log order, and Apply is
// deterministic: every node that applies the same commands holds the same
// state. Decisions that are not deterministic (a new topic's UUID, the
// placement computed from the roster at that moment) are made before the
// command is proposed (see Plan*), and travel inside it. On a single node
// the commands are applied from a local log; in a cluster they are the
// entries of the metadata consensus group.
package metadata

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/corestream/corestream/cluster/placement"
	"github.com/corestream/corestream/netio/wire"
	"github.com/google/uuid"
)

// NodeID identifies a roster node.
type NodeID = placement.NodeID

// TopicID is a topic's UUID, fixed at creation: the history of its
// partitions. A topic deleted and created again gets a new id, so a request
// routed with the old one is refused.
type TopicID [16]byte

// String renders the canonical UUID text.
func (id TopicID) String() string { return uuid.UUID(id).String() }

// MarshalText renders the canonical UUID text (used by JSON).
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the canonical UUID text.
func (id *TopicID) UnmarshalText(b []byte) error {
	u, err := uuid.ParseBytes(b)
	if err != nil {
		return fmt.Errorf("topic id: %w", err)
	}
	*id = TopicID(u)
	return nil
}

// IsZero reports whether id is unset.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// ParseTopicID parses the canonical UUID text.
func ParseTopicID(s string) (TopicID, error) {
	u, err := uuid.Parse(s)
	return TopicID(u), err
}

// Bounds on what a command may ask for.
const (
	// PartitionsPerTopicMax bounds one topic's partition count (the
	// protocol's bound).
	PartitionsPerTopicMax = 16384
	// ReplicationFactorMax bounds a topic's copies.
	ReplicationFactorMax = 32
	// TopicsMax bounds the number of topics in the cluster.
	TopicsMax = 100000
	// ProducerIDsPerAllocationMax bounds one producer-id allocation.
	ProducerIDsPerAllocationMax = 1 << 20
)

// Errors returned by Apply and the planners. They map one to one onto wire
// error codes.
var (
	ErrTopicExists        = errors.New("metadata: topic already exists")
	ErrUnknownTopic       = errors.New("metadata: unknown topic")
	ErrInvalidPartitions  = errors.New("metadata: invalid partition count")
	ErrInvalidReplication = errors.New("metadata: invalid replication factor")
	ErrInvalidTopicName   = errors.New("metadata: invalid topic name")
	ErrInvalidConfig      = errors.New("metadata: invalid topic config")
	ErrInvalidCommand     = errors.New("metadata: invalid command")
)

// TopicConfig holds per-topic overrides; zero values mean "the node's
// storage default".
type TopicConfig struct {
	RetentionMs    int64 `json:"retention_ms,omitempty"`
	RetentionBytes int64 `json:"retention_bytes,omitempty"`
	// MaxMessageBytes bounds a produced batch (Kafka's max.message.bytes);
	// 0: the node's storage.max_batch_bytes, which also bounds it.
	MaxMessageBytes int64 `json:"max_message_bytes,omitempty"`

	// Compaction (docs/design/compaction.md). Kept in a block of its own.
	//
	// CleanupPolicy is Kafka's cleanup.policy: "" (the default) or
	// CleanupDelete, retention deletes old segments; CleanupCompact, the
	// cleaner keeps the latest record of every key and retention deletes
	// nothing; CleanupCompactDelete, both.
	CleanupPolicy string `json:"cleanup_policy,omitempty"`
	// MinCleanableDirtyRatio is the share of the cleanable log not yet
	// cleaned at which the cleaner runs, in (0, 1]; 0: the default 0.5.
	MinCleanableDirtyRatio float64 `json:"min_cleanable_dirty_ratio,omitempty"`
	// DeleteRetentionMs is how long a tombstone (null value) stays after
	// its segment's largest timestamp; 0: the default (one day).
	DeleteRetentionMs int64 `json:"delete_retention_ms,omitempty"`
	// MinCompactionLagMs: a segment whose largest timestamp is younger
	// than this is not cleaned; 0: none.
	MinCompactionLagMs int64 `json:"min_compaction_lag_ms,omitempty"`
	// MaxCompactionLagMs: once the oldest record not yet cleaned is this
	// old, the cleaner cleans the log whatever its dirty ratio, and an
	// active segment rolls this long after its first append (if segment
	// ms is longer); 0: no bound (Kafka's default, Long.MAX_VALUE).
	MaxCompactionLagMs int64 `json:"max_compaction_lag_ms,omitempty"`

	// Segment rolling (Kafka's segment.bytes and segment.ms): the active
	// segment of each replica's log rolls before it would grow past
	// SegmentBytes, or SegmentMs after its first append. 0: the node's
	// storage.segment_bytes / storage.segment_ms. Bounds: Check.
	SegmentBytes int64 `json:"segment_bytes,omitempty"`
	SegmentMs    int64 `json:"segment_ms,omitempty"`
}

// Bounds of a topic's segment configs (TopicConfig.Check).
const (
	// TopicSegmentBytesMin is the smallest segment.bytes (the segment
	// log's own floor; Kafka 3's is 14 bytes, Kafka 4's 1 MiB).
	TopicSegmentBytesMin = 1024
	// TopicSegmentBytesMax is the largest: positions in the offset index
	// are 32-bit, as Kafka's segment.bytes is an int.
	TopicSegmentBytesMax = 1<<31 - 1
	// TopicSegmentMsMax bounds segment.ms (about 35,700 years), as the
	// node's storage.segment_ms.
	TopicSegmentMsMax = 1 << 50
)

// Cleanup policies (TopicConfig.CleanupPolicy), Kafka's names.
const (
	CleanupDelete        = "delete"
	CleanupCompact       = "compact"
	CleanupCompactDelete = "compact,delete"
)

// Compacted reports whether the topic's log is cleaned (compact or
// compact,delete).
func (c TopicConfig) Compacted() bool {
	return c.CleanupPolicy == CleanupCompact || c.CleanupPolicy == CleanupCompactDelete
}

// Deletes reports whether retention deletes the topic's old segments
// (delete, the default, or compact,delete).
func (c TopicConfig) Deletes() bool { return c.CleanupPolicy != CleanupCompact }

// Topic is one topic.
type Topic struct {
	Name              string  `json:"name"`
	ID                TopicID `json:"id"`
	ReplicationFactor int     `json:"replication_factor"`
	// Replicas holds, per partition, its replica set; the first replica is
	// the preferred primary. Invariant: every entry has ReplicationFactor
	// distinct nodes; len(Replicas) is the partition count.
	Replicas  [][]NodeID  `json:"replicas"`
	Config    TopicConfig `json:"config"`
	CreatedMs int64       `json:"created_ms"`
	// LogStarts holds, per partition, the log start DeleteRecords set
	// (records.go; 0: none). Shorter than Replicas when the last
	// partitions have none; nil for most topics.
	LogStarts []int64 `json:"log_starts,omitempty"`
}

// Partitions is the topic's partition count.
func (t *Topic) Partitions() int { return len(t.Replicas) }

// State is the metadata. It is owned by one goroutine; readers get copies
// through Snapshot or the accessors' returned values, which they must not
// modify.
type State struct {
	topics map[string]*Topic
	byID   map[TopicID]*Topic
	// nextProducerID is the first producer id not yet handed out.
	// Invariant: nextProducerID >= 0 and only grows.
	nextProducerID int64
	// offsets holds committed consumer offsets by consumer name.
	offsets map[string]map[OffsetKey]Committed
	// moved holds when the balancer last moved each partition's primary
	// (its mute period survives a metadata-primary change).
	moved map[OffsetKey]int64
	// users holds the users by name (users.go); userGen is the last
	// generation handed to a user. Invariant: every user's Generation <=
	// userGen, and userGen only grows.
	users   map[string]*User
	userGen int64
	// reassign holds the replica moves in progress (reassign.go).
	reassign map[OffsetKey]*Reassignment
	// roster holds the recorded nodes by id (roster.go); empty until
	// seeded. Invariant: at most RosterNodesMax members, at most one
	// not active.
	roster map[NodeID]*Member
	// clusterID is the cluster's id (cluster_id.go; zero until minted).
	clusterID ClusterID
	// drains holds the nodes marked draining (drain.go), by node id.
	drains map[NodeID]*Drain
}

// LastMovedMs is when partition p of topic last had its primary moved by
// the balancer (0: never).
func (s *State) LastMovedMs(topic string, p int32) int64 { return s.moved[OffsetKey{topic, p}] }

// New returns an empty state.
func New() *State {
	return &State{topics: map[string]*Topic{}, byID: map[TopicID]*Topic{}, offsets: map[string]map[OffsetKey]Committed{}, moved: map[OffsetKey]int64{},
		users: map[string]*User{}, reassign: map[OffsetKey]*Reassignment{}, roster: map[NodeID]*Member{}, drains: map[NodeID]*Drain{}}
}

// Topic returns the topic named name, or nil.
func (s *State) Topic(name string) *Topic { return s.topics[name] }

// TopicByID returns the topic with id, or nil.
func (s *State) TopicByID(id TopicID) *Topic { return s.byID[id] }

// Topics returns every topic sorted by name.
func (s *State) Topics() []*Topic {
	out := make([]*Topic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NextProducerID is the first producer id not yet allocated.
func (s *State) NextProducerID() int64 { return s.nextProducerID }

// Load counts, per node, the replicas and preferred primaries it holds.
func (s *State) Load() map[NodeID]placement.Load {
	load := map[NodeID]placement.Load{}
	for _, t := range s.topics {
		for _, reps := range t.Replicas {
			for i, n := range reps {
				l := load[n]
				l.Replicas++
				if i == 0 {
					l.Preferred++
				}
				load[n] = l
			}
		}
	}
	return load
}

// InternalTopicPrefix starts the names of the broker's own topics (the
// metadata group's log, MetaTopic, and those to come: consumer group
// state). A client may not create a topic named so: it would share a name,
// and for MetaTopic a directory name, with the broker's own data.
const InternalTopicPrefix = "__"

// MetaTopic is the metadata group's name: its log's directory in the data
// directory and the topic name its requests carry.
const MetaTopic = InternalTopicPrefix + "meta"

// GroupsTopic holds the consumer groups' state: membership and
// committed offsets, one partition per share of the groups
// (docs/design/groups.md). The node creates it at the first group
// request; clients may read it but not write or delete it.
const GroupsTopic = InternalTopicPrefix + "groups"

// TransactionsTopic holds the transaction coordinators' state, one
// partition per share of the transactional ids
// (docs/design/transactions.md), compacted: a record per id, the newest
// its whole state. The node creates it at the first FindCoordinator for
// a transactional id; clients may read it but not write or delete it.
const TransactionsTopic = InternalTopicPrefix + "transactions"

// IsInternalTopic says whether name is one of the broker's own topics,
// which topic listings leave out unless asked and clients may not
// produce to, delete or create.
func IsInternalTopic(name string) bool { return strings.HasPrefix(name, InternalTopicPrefix) }

// validateInternalTopicName admits the internal topics a node creates
// through the metadata group (GroupsTopic, TransactionsTopic; MetaTopic is the metadata
// group itself and never a topic of it).
func validateInternalTopicName(name string) error {
	if name != GroupsTopic && name != TransactionsTopic {
		return fmt.Errorf("%w: %q is not an internal topic the broker creates (only %s and %s)", ErrInvalidTopicName, name, GroupsTopic, TransactionsTopic)
	}
	return nil
}

// ValidateTopicName applies the protocol's naming rule
// (wire.ValidateTopicName, its one definition: 1..249 bytes of
// [a-zA-Z0-9._-], not "." or ".."). It is checked again when a committed
// command is applied, so it must never become stricter: see
// ValidateNewTopicName for the rules only new topics obey.
func ValidateTopicName(name string) error {
	if err := wire.ValidateTopicName(name); err != nil {
		msg := err.Error()
		var er *wire.ErrorResponse
		if errors.As(err, &er) {
			msg = er.Message
		}
		return fmt.Errorf("%w: %s", ErrInvalidTopicName, msg)
	}
	return nil
}

// ValidateNewTopicName is ValidateTopicName plus the rule that names
// starting with InternalTopicPrefix are the broker's.
func ValidateNewTopicName(name string) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, InternalTopicPrefix) {
		return fmt.Errorf("%w: %q starts with %q, which is reserved for the broker's internal topics (%s holds the cluster metadata); choose another name",
			ErrInvalidTopicName, name, InternalTopicPrefix, MetaTopic)
	}
	return nil
}
