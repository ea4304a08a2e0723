package wire

// Consumer offsets are stored per named consumer by the node the server
// calls its coordinator; in this version that is the metadata primary, but
// a client follows NOT_COORDINATOR hints rather than assume it.

// OffsetCommit is one partition's offset to store.
//
//	topic      string
//	topic_id   uuid     zero = do not check
//	partition  int32
//	offset     int64    the next offset the consumer will read (>= 0)
//	metadata   string   opaque to the server, at most 4096 bytes
type OffsetCommit struct {
	Topic     string
	TopicID   TopicID
	Partition int32
	Offset    int64
	Metadata  string
}

// CommitOffsetsRequest stores offsets for a named consumer. Each entry
// succeeds or fails on its own (see the response).
//
// Body v0:
//
//	consumer  string
//	offsets   array of OffsetCommit
type CommitOffsetsRequest struct {
	Consumer string
	Offsets  []OffsetCommit
}

func (*CommitOffsetsRequest) isRequest() {}

// APIKey returns APICommitOffsets.
func (*CommitOffsetsRequest) APIKey() APIKey { return APICommitOffsets }

// AppendBody encodes the body.
func (r *CommitOffsetsRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Consumer)
	dst = appendCount(dst, len(r.Offsets))
	for _, o := range r.Offsets {
		dst = appendString(dst, o.Topic)
		dst = append(dst, o.TopicID[:]...)
		dst = be.AppendUint32(dst, uint32(o.Partition))
		dst = be.AppendUint64(dst, uint64(o.Offset))
		dst = appendString(dst, o.Metadata)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *CommitOffsetsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APICommitOffsets, version, false)
	d.str("consumer", ConsumerNameBytesMax, &r.Consumer)
	r.Offsets = grow(r.Offsets, d.count("offsets", OffsetEntriesMax, 2+16+4+8+2))
	for i := range r.Offsets {
		o := &r.Offsets[i]
		d.str("offsets[].topic", TopicNameBytesMax, &o.Topic)
		o.TopicID = d.uuid("offsets[].topic_id")
		o.Partition = d.i32("offsets[].partition")
		o.Offset = d.i64("offsets[].offset")
		d.str("offsets[].metadata", CommitMetadataBytesMax, &o.Metadata)
	}
	return d.done()
}

// Validate checks the consumer name (INVALID_CONSUMER_NAME); entries are
// checked one by one by the server and answered per entry.
func (r *CommitOffsetsRequest) Validate() error { return ValidateConsumerName(r.Consumer) }

// PartitionResult is one entry's outcome.
//
//	topic       string
//	partition   int32
//	error_code  int16   0, or e.g. UNKNOWN_TOPIC_OR_PARTITION, INVALID_OFFSET
type PartitionResult struct {
	Topic     string
	Partition int32
	ErrorCode int16
}

// CommitOffsetsResponse answers CommitOffsets with one result per entry, in
// request order. A request-wide failure (NOT_COORDINATOR,
// INVALID_CONSUMER_NAME) is an error response instead.
//
// Body v0:
//
//	results  array of PartitionResult
type CommitOffsetsResponse struct {
	Results []PartitionResult
}

func (*CommitOffsetsResponse) isResponse() {}

// APIKey returns APICommitOffsets.
func (*CommitOffsetsResponse) APIKey() APIKey { return APICommitOffsets }

// AppendBody encodes the body.
func (r *CommitOffsetsResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.Results))
	for _, p := range r.Results {
		dst = appendString(dst, p.Topic)
		dst = be.AppendUint32(dst, uint32(p.Partition))
		dst = be.AppendUint16(dst, uint16(p.ErrorCode))
	}
	return dst
}

// DecodeBody decodes the body.
func (r *CommitOffsetsResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APICommitOffsets, version, true)
	r.Results = grow(r.Results, d.count("results", OffsetEntriesMax, 2+4+2))
	for i := range r.Results {
		p := &r.Results[i]
		d.str("results[].topic", TopicNameBytesMax, &p.Topic)
		p.Partition = d.i32("results[].partition")
		p.ErrorCode = d.i16("results[].error_code")
	}
	return d.done()
}

// TopicPartition names one partition.
//
//	topic      string
//	partition  int32
type TopicPartition struct {
	Topic     string
	Partition int32
}

// FetchOffsetsRequest reads a named consumer's committed offsets.
//
// Body v0:
//
//	consumer    string
//	partitions  array of TopicPartition   empty = every partition the
//	                                      consumer has committed
type FetchOffsetsRequest struct {
	Consumer   string
	Partitions []TopicPartition
}

func (*FetchOffsetsRequest) isRequest() {}

// APIKey returns APIFetchOffsets.
func (*FetchOffsetsRequest) APIKey() APIKey { return APIFetchOffsets }

// AppendBody encodes the body.
func (r *FetchOffsetsRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Consumer)
	dst = appendCount(dst, len(r.Partitions))
	for _, p := range r.Partitions {
		dst = appendString(dst, p.Topic)
		dst = be.AppendUint32(dst, uint32(p.Partition))
	}
	return dst
}

// DecodeBody decodes the body.
func (r *FetchOffsetsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIFetchOffsets, version, false)
	d.str("consumer", ConsumerNameBytesMax, &r.Consumer)
	r.Partitions = grow(r.Partitions, d.count("partitions", OffsetEntriesMax, 2+4))
	for i := range r.Partitions {
		p := &r.Partitions[i]
		d.str("partitions[].topic", TopicNameBytesMax, &p.Topic)
		p.Partition = d.i32("partitions[].partition")
	}
	return d.done()
}

// Validate checks the consumer name (INVALID_CONSUMER_NAME).
func (r *FetchOffsetsRequest) Validate() error { return ValidateConsumerName(r.Consumer) }

// CommittedOffset is one partition's stored offset.
//
//	topic       string
//	topic_id    uuid    the topic id stored with the commit; a client whose
//	                    metadata shows another id ignores the offset (the
//	                    topic was deleted and created again)
//	partition   int32
//	offset      int64   -1 = nothing committed
//	metadata    string
//	error_code  int16
type CommittedOffset struct {
	Topic     string
	TopicID   TopicID
	Partition int32
	Offset    int64
	Metadata  string
	ErrorCode int16
}

// FetchOffsetsResponse answers FetchOffsets, one entry per partition asked
// (in request order), or per committed partition when none was named.
//
// Body v0:
//
//	offsets  array of CommittedOffset
type FetchOffsetsResponse struct {
	Offsets []CommittedOffset
}

func (*FetchOffsetsResponse) isResponse() {}

// APIKey returns APIFetchOffsets.
func (*FetchOffsetsResponse) APIKey() APIKey { return APIFetchOffsets }

// AppendBody encodes the body.
func (r *FetchOffsetsResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.Offsets))
	for _, o := range r.Offsets {
		dst = appendString(dst, o.Topic)
		dst = append(dst, o.TopicID[:]...)
		dst = be.AppendUint32(dst, uint32(o.Partition))
		dst = be.AppendUint64(dst, uint64(o.Offset))
		dst = appendString(dst, o.Metadata)
		dst = be.AppendUint16(dst, uint16(o.ErrorCode))
	}
	return dst
}

// DecodeBody decodes the body.
func (r *FetchOffsetsResponse) DecodeBody(body []byte, version uint16) error {
	return r.decode(body, APIFetchOffsets, version)
}

// decode decodes the body of key's response (FetchOffsets, or
// FetchGroupOffsets, which shares it).
func (r *FetchOffsetsResponse) decode(body []byte, key APIKey, version uint16) error {
	d := newDecoder(body, key, version, true)
	r.Offsets = grow(r.Offsets, d.count("offsets", OffsetEntriesMax, 2+16+4+8+2+2))
	for i := range r.Offsets {
		o := &r.Offsets[i]
		d.str("offsets[].topic", TopicNameBytesMax, &o.Topic)
		o.TopicID = d.uuid("offsets[].topic_id")
		o.Partition = d.i32("offsets[].partition")
		o.Offset = d.i64("offsets[].offset")
		d.str("offsets[].metadata", CommitMetadataBytesMax, &o.Metadata)
		o.ErrorCode = d.i16("offsets[].error_code")
	}
	return d.done()
}

// InitProducerRequest obtains an idempotent producer identity. Any node
// answers (an id is the node id in the top bits and a per-node persisted
// counter below, unique across the cluster).
//
// Body v0:
//
//	producer_id     int64  -1 = a new id; else the id to bump
//	producer_epoch  int16  -1 with a new id; else the id's current epoch
//
// Given an id and its current epoch the server returns the same id with
// the epoch plus one (fencing older instances), or a new id with epoch 0
// when the epoch is exhausted (32767).
type InitProducerRequest struct {
	ProducerID    int64
	ProducerEpoch int16
}

func (*InitProducerRequest) isRequest() {}

// APIKey returns APIInitProducer.
func (*InitProducerRequest) APIKey() APIKey { return APIInitProducer }

// AppendBody encodes the body.
func (r *InitProducerRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint64(dst, uint64(r.ProducerID))
	return be.AppendUint16(dst, uint16(r.ProducerEpoch))
}

// DecodeBody decodes the body.
func (r *InitProducerRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIInitProducer, version, false)
	r.ProducerID = d.i64("producer_id")
	r.ProducerEpoch = d.i16("producer_epoch")
	return d.done()
}

// InitProducerResponse answers InitProducer.
//
// Body v0:
//
//	producer_id     int64
//	producer_epoch  int16
type InitProducerResponse struct {
	ProducerID    int64
	ProducerEpoch int16
}

func (*InitProducerResponse) isResponse() {}

// APIKey returns APIInitProducer.
func (*InitProducerResponse) APIKey() APIKey { return APIInitProducer }

// AppendBody encodes the body.
func (r *InitProducerResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint64(dst, uint64(r.ProducerID))
	return be.AppendUint16(dst, uint16(r.ProducerEpoch))
}

// DecodeBody decodes the body.
func (r *InitProducerResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIInitProducer, version, true)
	r.ProducerID = d.i64("producer_id")
	r.ProducerEpoch = d.i16("producer_epoch")
	return d.done()
}
