package service

import "github.com/corestream/corestream/cluster/metadata"

// LogDirsResult is this node's one log directory (node.data_dir) and the
// logs of the replicas it hosts there.
type LogDirsResult struct {
	// Dir is the data directory's path as the node was configured with
	// it.
	Dir string
	// TotalBytes and UsableBytes are the size and the free space of the
	// file system that holds Dir; -1 when not known.
	TotalBytes, UsableBytes int64
	// Replicas are the open replicas of topics in the metadata, internal
	// ones included (their logs take disk too), sorted by topic and
	// partition. A replica still opening, or that failed to open, is not
	// listed.
	Replicas []ReplicaLog
}

// ReplicaLog is one replica's log on this node.
type ReplicaLog struct {
	Topic     string
	TopicID   metadata.TopicID
	Partition int32
	// SizeBytes is the log's size: every segment, data appended but not
	// yet committed included.
	SizeBytes int64
	// Primary says this node is the partition's primary.
	Primary bool
}
