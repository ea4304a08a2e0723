package kafka

import (
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// Backend is what the listener needs from the node: the typed calls of
// the service every front end uses (produce, fetch, list offsets,
// metadata, admin). The listener decodes Kafka requests, calls these,
// and encodes the answers; it holds no partition state and reaches the
// node through nothing else.
//
// Threading: every method is called on the connection's shard (home).
// The data and admin calls run where the work lives (the partition's
// shard, the metadata controller's shard) and call done exactly once,
// back on home.
type Backend interface {
	// Brokers lists the roster as Kafka clients see it, sorted by id;
	// a node without a Kafka address is left out.
	Brokers() []Broker
	// ClusterID names the cluster; ControllerID is the node that answers
	// admin requests now (the metadata primary), -1 when none.
	ClusterID() string
	ControllerID() int32
	// Topics describes the named topics, or every topic when all is
	// set. A name that does not exist comes back with Err set. The error
	// is the node's when it cannot answer yet (metadata not loaded).
	Topics(names []string, all bool) ([]TopicInfo, error)
	// Produce appends one RecordBatch v2 to a partition.
	Produce(home *shard.Shard, req *ProduceReq, done func(ProduceRes))
	// Fetch reads committed batches of a partition.
	Fetch(home *shard.Shard, req *FetchReq, done func(FetchRes))
	// ListOffsets finds an offset by timestamp (or the earliest, latest).
	ListOffsets(home *shard.Shard, req *ListOffsetsReq, done func(ListOffsetsRes))
	// InitProducerID hands out a producer id and epoch for an idempotent
	// producer: a new id when id < 0, else the next epoch of id.
	InitProducerID(home *shard.Shard, id int64, epoch int16, done func(int64, int16, error))
	// CreateTopic creates a topic (or only validates the request).
	CreateTopic(home *shard.Shard, req *CreateTopicReq, done func(TopicInfo, error))
	// DeleteTopic deletes a topic by name.
	DeleteTopic(home *shard.Shard, name string, timeout time.Duration, done func(error))
	// AddPartitions raises a topic's partition count to total.
	AddPartitions(home *shard.Shard, name string, total int32, timeout time.Duration, validateOnly bool, done func(error))
}

// Broker is a node as Kafka clients see it.
type Broker struct {
	ID   int32
	Host string
	Port int32
	Rack *string
}

// TopicInfo is a topic's metadata.
type TopicInfo struct {
	Name string
	ID   [16]byte
	// Err is set for a topic that cannot be described (unknown name).
	Err               error
	ReplicationFactor int16
	Partitions        []PartitionInfo
}

// PartitionInfo is a partition's route.
type PartitionInfo struct {
	Index int32
	// Leader is the primary (-1: none); LeaderEpoch its generation.
	Leader, LeaderEpoch int32
	Replicas, ISR       []int32
	Offline             []int32
	// Err is why there is no leader (nil when there is one).
	Err *wire.Error
}

// Acks levels a produce can ask for (Kafka's values).
const (
	AcksNone    int16 = 0  // no answer at all
	AcksPrimary int16 = 1  // durable on the primary
	AcksAll     int16 = -1 // committed by a quorum of the replicas
)

// ProduceReq is one partition's part of a Produce request.
type ProduceReq struct {
	Topic     string
	Partition int32
	Acks      int16
	Timeout   time.Duration
	// Records is one RecordBatch v2; the listener owns a copy the
	// backend may keep.
	Records []byte
}

// ProduceRes answers a ProduceReq.
type ProduceRes struct {
	BaseOffset      int64
	LogAppendTimeMs int64
	LogStartOffset  int64
	Err             error
}

// FetchReq is one partition's part of a Fetch request.
type FetchReq struct {
	Topic     string
	Partition int32
	// LeaderEpoch is the client's current_leader_epoch, -1 when unknown.
	LeaderEpoch int32
	Offset      int64
	MaxBytes    int32
	// MaxWait, when non-zero, parks the fetch until MinBytes are there.
	MinBytes int32
	MaxWait  time.Duration
}

// FetchRes answers a FetchReq. Records are whole batches, byte for byte
// as stored (control batches included: Kafka clients skip them).
type FetchRes struct {
	HighWatermark  int64
	LogStartOffset int64
	Records        []byte
	Err            error
}

// ListOffsetsReq is one partition's part of a ListOffsets request.
type ListOffsetsReq struct {
	Topic       string
	Partition   int32
	LeaderEpoch int32
	// Timestamp is a time in ms, or -1 (latest), -2 (earliest).
	Timestamp int64
}

// ListOffsetsRes answers a ListOffsetsReq.
type ListOffsetsRes struct {
	Offset, Timestamp int64
	// LeaderEpoch is the partition's generation when it answered.
	LeaderEpoch int32
	Err         error
}

// CreateTopicReq creates a topic.
type CreateTopicReq struct {
	Name       string
	Partitions int32
	// ReplicationFactor -1 takes the cluster's default.
	ReplicationFactor int16
	Configs           map[string]string
	Timeout           time.Duration
	ValidateOnly      bool
}
