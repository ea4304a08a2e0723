package service

import (
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/shard"
)

// Service is the broker's typed service, the one thing front ends call.
// It is the interfaces below (Groups in groups.go); a front end may take
// only the ones it uses.
type Service interface {
	Data
	Meta
	Admin
	Groups
	Txns
}

// Data are the partition calls. Each runs on the shard that owns the
// partition (inline when that is from, else through the owner's inbox)
// and calls done exactly once, on from; with from nil, on the owner
// shard (done must not block then). An error found before the call
// leaves the caller (no such topic or partition in this node's
// metadata) is answered through done before the call returns, on the
// caller's goroutine. Routing errors come back through
// done too: ErrUnknownTopicOrPartition (no such topic, partition or
// topic id), ErrMetadataNotReady, partition.ErrNotPrimary (hint: the
// primary), partition.ErrStaleGeneration, partition.ErrPrimaryNotAvailable
// (the replica is still opening), partition.ErrStorage (it could not be
// opened here), partition.ErrBusy (the owner's inbox is full), and
// ErrNodeNotAvailable (the node is stopping).
type Data interface {
	// Produce appends req.Records and answers once it is acknowledged
	// under req.Acks, or with the replica's error.
	Produce(from *shard.Shard, req *ProduceRequest, done func(ProduceResult, error))
	// Fetch answers committed batches from req.Offset, waiting up to
	// req.MaxWait for req.MinBytes. A node that is stopping answers at
	// once. On success the caller owns res.Records (Release it).
	Fetch(from *shard.Shard, req *FetchRequest, done func(FetchResult, error))
	// ListOffsets answers on the partition's primary.
	ListOffsets(from *shard.Shard, req *ListOffsetsRequest, done func(ListOffsetsResult, error))
	// OffsetForGeneration answers on the partition's primary where a
	// generation ends in its log.
	OffsetForGeneration(from *shard.Shard, req *OffsetForGenerationRequest, done func(OffsetForGenerationResult, error))
	// DescribePartition answers on the partition's primary with its log
	// and its followers' progress.
	DescribePartition(from *shard.Shard, ref PartitionRef, done func(PartitionDetail, error))
	// DeleteRecords answers on the partition's primary, once every
	// replica will read the new start (it is committed in the metadata),
	// with the partition's log start after it.
	DeleteRecords(from *shard.Shard, req *DeleteRecordsRequest, done func(int64, error))
	// LogDirs answers with the logs of every replica this node hosts
	// (each node answers for its own, as a Kafka broker for its log
	// directories). ErrMetadataNotReady until the metadata is loaded.
	LogDirs(from *shard.Shard, done func(LogDirsResult, error))
}

// Meta are the read-only calls any node answers from its published
// metadata and route table. They are synchronous and safe on any
// goroutine. Those that list topics answer ErrMetadataNotReady until the
// node has loaded the committed metadata, never a list that leaves
// topics out.
type Meta interface {
	// Identity is this node's id, cluster name and version; always
	// available.
	Identity() Identity
	// Brokers lists the roster sorted by id, with liveness; always
	// available.
	Brokers() []Broker
	// MetadataRoute is the metadata group's primary and term (-1, -1 when
	// none is known); always available.
	MetadataRoute() (primaryID, generation int32)
	// Locate is the partition's reference by id, at an unknown
	// generation, and the node this node's route table says leads it (-1
	// when none), whether or not that node is believed up: for a front end
	// that forwards a request to the primary (HTTP) rather than telling the
	// client. ErrUnknownTopicOrPartition, ErrMetadataNotReady.
	Locate(topic string, partition int32) (ref PartitionRef, primaryID int32, err error)
	// Metadata answers the routes of the topics asked for.
	Metadata(req MetadataRequest) (MetadataResult, error)
	// ListTopics lists every topic, sorted by name.
	ListTopics() ([]TopicSummary, error)
	// DescribeTopic is one topic with its routes and effective configs;
	// ErrUnknownTopicOrPartition when it does not exist.
	DescribeTopic(name string) (TopicDescription, error)
	// ClusterStatus counts partitions and primaries over the roster.
	ClusterStatus() (ClusterStatus, error)
	// InitProducer hands out an idempotent producer id (unique in the
	// cluster without asking anyone) or bumps an epoch.
	InitProducer(req InitProducerRequest) (InitProducerResult, error)
}

// Admin are the calls that change (or, FetchOffsets, read) the cluster
// metadata. Each runs on the metadata controller's shard and calls done
// exactly once, on from (with from nil, on the controller's shard; done
// must not block then). Those that change metadata must reach the
// metadata primary: elsewhere they answer ErrNotMetadataPrimary with a
// hint. partition.ErrTimedOut says the command did not commit in time
// (it may still).
type Admin interface {
	CreateTopic(from *shard.Shard, req *CreateTopicRequest, done func(CreateTopicResult, error))
	// DeleteTopic answers the id of the topic deleted.
	DeleteTopic(from *shard.Shard, req *DeleteTopicRequest, done func(metadata.TopicID, error))
	// AddPartitions answers the new total.
	AddPartitions(from *shard.Shard, req *AddPartitionsRequest, done func(partitions int32, err error))
	// AlterTopicConfig answers the topic's config overrides once the
	// change committed (ErrInvalidConfig for an unknown key or a value
	// out of range, ErrUnknownTopicOrPartition).
	AlterTopicConfig(from *shard.Shard, req *AlterTopicConfigRequest, done func(metadata.TopicConfig, error))
	// CommitOffsets answers one error per entry, in request order (nil:
	// stored; ErrUnknownTopicOrPartition; ErrInvalidOffset), or a
	// request-wide error.
	CommitOffsets(from *shard.Shard, req *CommitOffsetsRequest, done func(entries []error, err error))
	// FetchOffsets reads this node's applied copy of the metadata; any
	// node answers it.
	FetchOffsets(from *shard.Shard, req *FetchOffsetsRequest, done func([]CommittedOffset, error))
	MovePrimary(from *shard.Shard, req *MovePrimaryRequest, done func(MovePrimaryResult, error))
	Rebalance(from *shard.Shard, req *RebalanceRequest, done func(RebalanceResult, error))
	// Reassign starts, cancels or lists replica moves; a start checks the
	// whole plan before it starts any move.
	Reassign(from *shard.Shard, req *ReassignRequest, done func(ReassignResult, error))
	// ChangeRoster adds a node to the roster, starts removing a drained
	// one, or lists the roster (roster.go); a change is answered once
	// recorded, and the metadata group's membership follows.
	ChangeRoster(from *shard.Shard, req *RosterRequest, done func(RosterResult, error))
}
