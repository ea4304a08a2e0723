package wire

// Bounds of the protocol. A decoder rejects a value past its bound with
// INVALID_REQUEST (or closes the connection for a frame size); encoders do
// not check them, so an out-of-bounds field yields a frame the receiver
// rejects, never a different valid one. Changing a bound is a protocol
// change: raise it only together with a version.
const (
	// RecordsBytesMax bounds the record bytes of one produce request and of
	// one fetch response (16 MiB), the same bound as one batch.
	RecordsBytesMax = 16 << 20
	// FrameSlackBytes is the room a frame needs besides its records: the
	// frame and body headers and a topic name, with margin.
	FrameSlackBytes = 64 << 10
	// FrameBytesMaxDefault is the default bound on a frame's size field
	// (the bytes after it): RecordsBytesMax plus FrameSlackBytes. Readers
	// may be configured with another bound.
	FrameBytesMaxDefault = RecordsBytesMax + FrameSlackBytes

	// TopicNameBytesMax bounds a topic name (Kafka's rule).
	TopicNameBytesMax = 249
	// ConsumerNameBytesMax bounds a consumer name.
	ConsumerNameBytesMax = 249
	// AddressBytesMax bounds an advertised HOST:PORT address.
	AddressBytesMax = 255
	// RackBytesMax bounds a node's rack label.
	RackBytesMax = 255
	// ClientIDBytesMax bounds the client id and software strings of the handshake.
	ClientIDBytesMax = 255
	// ClusterIDBytesMax bounds the cluster id and server version strings.
	ClusterIDBytesMax = 255
	// ConfigKeyBytesMax bounds a topic configuration key.
	ConfigKeyBytesMax = 255
	// ConfigValueBytesMax bounds a topic configuration value.
	ConfigValueBytesMax = 4096
	// CommitMetadataBytesMax bounds the opaque metadata of a committed offset.
	CommitMetadataBytesMax = 4096
	// ErrorMessageBytesMax bounds an error message; encoders truncate longer ones.
	ErrorMessageBytesMax = 1024

	// NodesMax bounds the roster, and so every list of nodes.
	NodesMax = 32
	// ReplicationFactorMax bounds a replica set, and so every list of replicas.
	ReplicationFactorMax = 32
	// PartitionsPerTopicMax bounds a topic's partition count.
	PartitionsPerTopicMax = 16384
	// TopicsMax bounds the topics in one request or response.
	TopicsMax = 1 << 16
	// ConfigsMax bounds the configuration entries of one topic.
	ConfigsMax = 1024
	// OffsetEntriesMax bounds the partitions in one commit or offset fetch.
	OffsetEntriesMax = 1 << 16
	// APIsMax bounds the API version entries of a handshake response.
	APIsMax = 1024
	// MovesMax bounds the primary moves listed by one rebalance response.
	MovesMax = 1 << 16

	// IdempotentWindow is how many batches an idempotent producer may have
	// in flight to one partition, and so how many recent batches per
	// producer a partition remembers to recognise a retry. Kafka's is 5;
	// ours was too until measurements showed one producer under fsync
	// always on three nodes waiting on its window (214k msg/s with 5,
	// 290-313k with 32). Set before the first release.
	IdempotentWindow = 32
)

// Special values.
const (
	// NodeNone is the node id meaning "no node" or "unknown".
	NodeNone int32 = -1
	// GenerationUnknown in a data request means "the client does not know
	// the generation; do not check it".
	GenerationUnknown int32 = -1
	// TimestampLatest asks ListOffsets for the high watermark.
	TimestampLatest int64 = -1
	// TimestampEarliest asks ListOffsets for the log start offset.
	TimestampEarliest int64 = -2
	// OffsetNone is an offset that does not exist (no committed offset, no
	// record at or after a timestamp).
	OffsetNone int64 = -1
	// ProducerIDNone is the producer id of a batch that is not idempotent,
	// and of an InitProducer request that wants a new id.
	ProducerIDNone int64 = -1
)
