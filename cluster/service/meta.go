package service

import "github.com/corestream/corestream/cluster/metadata"

// Identity is this node as a front end introduces it.
type Identity struct {
	NodeID int32
	// ClusterID names the cluster in handshakes.
	ClusterID string
	// Version is the server version; every node of a cluster runs the
	// same.
	Version string
}

// Broker is one node of the roster as clients see it.
type Broker struct {
	ID         int32
	ClientAddr string
	HTTPAddr   string
	// KafkaAddr is its Kafka listener's advertised address ("" when it
	// has none: Kafka clients are not told of it).
	KafkaAddr string
	// Alive says this node believes it up (itself, or a peer heard from
	// within the liveness timeout).
	Alive bool
	// Rack is the node's rack (node.rack; empty: none), which consumers
	// match for follower reads (Kafka's rack in Metadata).
	Rack string
}

// PartitionRoute is one partition's route: where its primary is and how
// its replicas stand.
type PartitionRoute struct {
	Partition int32
	// PrimaryID and Generation are -1 when no primary is known or its
	// node is down.
	PrimaryID          int32
	Generation         int32
	PreferredPrimaryID int32
	Replicas           []int32
	// InSync lists the replicas in sync with the primary (empty without
	// a primary); Offline the replicas on nodes believed down.
	InSync  []int32
	Offline []int32
	// Err is nil when the partition has a primary, else why not:
	// partition.ErrPrimaryNotAvailable (an election, or its node is
	// down), partition.ErrNotEnoughReplicas (too few replicas reachable
	// to elect one), partition.ErrStorage (this node could not open its
	// replica).
	Err error
}

// TopicMetadata is a topic with every partition's route.
type TopicMetadata struct {
	Name              string
	ID                metadata.TopicID
	ReplicationFactor int16
	Partitions        []PartitionRoute
	// Err is ErrUnknownTopicOrPartition for a topic asked for by name
	// that does not exist (the other fields are then empty); nil
	// otherwise.
	Err error
}

// MetadataRequest asks for the routes of Topics, or of every topic when
// Topics is empty.
type MetadataRequest struct {
	Topics []string
}

// MetadataResult answers Metadata.
type MetadataResult struct {
	Brokers []Broker
	// MetadataPrimaryID and MetadataGeneration are the metadata group's
	// primary and term (-1 when none is known).
	MetadataPrimaryID  int32
	MetadataGeneration int32
	// Topics are in the order asked, or sorted by name.
	Topics []TopicMetadata
}

// TopicSummary is a topic without its routes.
type TopicSummary struct {
	Name              string
	ID                metadata.TopicID
	Partitions        int32
	ReplicationFactor int16
}

// ConfigEntry is one effective topic config.
type ConfigEntry struct {
	Key, Value string
	// IsDefault says the value is the node's default, not the topic's
	// own.
	IsDefault bool
}

// TopicDescription answers DescribeTopic.
type TopicDescription struct {
	Topic TopicMetadata
	// Configs is sorted by key.
	Configs []ConfigEntry
}

// ClusterStatus describes the cluster as this node sees it.
type ClusterStatus struct {
	MetadataPrimaryID   int32
	MetadataGeneration  int32
	RebalanceInProgress bool
	Partitions          int32
	UnderReplicated     int32
	Offline             int32
	Nodes               []NodeStatus
	// ClusterID is the cluster's UUID ("" until the first metadata
	// primary minted it).
	ClusterID string
}

// NodeStatus is one node with its share of partitions.
type NodeStatus struct {
	Broker
	Primaries          int32
	Replicas           int32
	PreferredPrimaries int32
	// Draining says the node is marked draining (replicas move off it).
	Draining bool
}

// InitProducerRequest asks for an idempotent producer id, or a new epoch
// of one.
type InitProducerRequest struct {
	// ProducerID < 0 asks for a new id; else the epoch is bumped (a new
	// id when the epoch is exhausted).
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerResult is the id and epoch to produce with.
type InitProducerResult struct {
	ProducerID    int64
	ProducerEpoch int16
}
