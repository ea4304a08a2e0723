package wire

// PartitionRef addresses one partition in a data request (Produce, Fetch,
// ListOffsets). Every data body starts with it, in this layout:
//
//	topic_id    uuid     zero = do not check
//	partition   int32
//	generation  int32    -1 = do not check
//	topic       string   at most TopicNameBytesMax bytes
//
// The server checks, in order: the topic exists by name and, when TopicID
// is not zero, has that id (else UNKNOWN_TOPIC_OR_PARTITION); the partition
// exists (else UNKNOWN_TOPIC_OR_PARTITION); this node is its primary (else
// NOT_PRIMARY with a hint); when Generation is not -1, it is not older than
// the partition's current generation (else STALE_GENERATION with a hint).
type PartitionRef struct {
	// Topic is the topic's name.
	Topic string
	// TopicID is the id the client's metadata gave for Topic; zero before
	// the client has metadata.
	TopicID TopicID
	// Partition is the partition index, 0..partitions-1.
	Partition int32
	// Generation is the primary's consensus term from the client's
	// metadata; GenerationUnknown (-1) before the client has metadata.
	Generation int32
}

// partitionRefMinBytes is the encoded size of a PartitionRef with an empty topic.
const partitionRefMinBytes = 16 + 4 + 4 + 2

func (r *PartitionRef) append(dst []byte) []byte {
	dst = append(dst, r.TopicID[:]...)
	dst = be.AppendUint32(dst, uint32(r.Partition))
	dst = be.AppendUint32(dst, uint32(r.Generation))
	return appendString(dst, r.Topic)
}

func (r *PartitionRef) decode(d *decoder) {
	r.TopicID = d.uuid("topic_id")
	r.Partition = d.i32("partition")
	r.Generation = d.i32("generation")
	d.str("topic", TopicNameBytesMax, &r.Topic)
}

// Validate checks what can be checked without cluster state: the topic
// name rule (INVALID_TOPIC_NAME), a partition index that is not negative
// (UNKNOWN_TOPIC_OR_PARTITION) and a generation of at least -1
// (INVALID_REQUEST).
func (r *PartitionRef) Validate() error {
	if err := ValidateTopicName(r.Topic); err != nil {
		return err
	}
	if r.Partition < 0 {
		return Errorf(ErrUnknownTopicOrPartition, "partition %d of topic %q does not exist: partition indexes start at 0", r.Partition, r.Topic)
	}
	if r.Generation < GenerationUnknown {
		return Errorf(ErrInvalidRequest, "generation %d is invalid: want -1 (unknown) or a term >= 0", r.Generation)
	}
	return nil
}

// PeekPartition returns the topic name (aliasing body) and partition index
// of a data request body (Produce, Fetch or ListOffsets, any version) without
// decoding the rest, so that a network loop can pick the shard that owns the
// partition. ok is false for another API or a body too short to hold them.
// It never allocates.
func PeekPartition(key APIKey, body []byte) (topic []byte, partition int32, ok bool) {
	switch key {
	case APIProduce, APIFetch, APIListOffsets:
	default:
		return nil, 0, false
	}
	if len(body) < partitionRefMinBytes {
		return nil, 0, false
	}
	partition = int32(be.Uint32(body[16:]))
	n := int(be.Uint16(body[24:]))
	if n > TopicNameBytesMax || len(body) < partitionRefMinBytes+n {
		return nil, 0, false
	}
	return body[partitionRefMinBytes : partitionRefMinBytes+n : partitionRefMinBytes+n], partition, true
}
