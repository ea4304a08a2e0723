package wire

// Acks says when a produce is acknowledged. The zero value is the safe one.
type Acks int8

const (
	// AcksQuorum (the default) acknowledges once a majority of the replica
	// set has the batch: it is committed and below the high watermark.
	AcksQuorum Acks = 0
	// AcksPrimary acknowledges after the primary's local write. Faster, and
	// able to lose the batch if the primary fails before replicating it.
	AcksPrimary Acks = 1
)

// String returns "quorum" or "primary".
func (a Acks) String() string {
	switch a {
	case AcksQuorum:
		return "quorum"
	case AcksPrimary:
		return "primary"
	}
	return "acks(invalid)"
}

// ProduceRequest appends exactly one record batch (Kafka RecordBatch v2
// bytes, opaque to this package) to one partition.
//
// Body v0 (after the PartitionRef):
//
//	acks         int8     0 quorum, 1 primary
//	timeout_ms   uint32   0 = the server's default
//	records      bytes    one batch, at most RecordsBytesMax bytes
type ProduceRequest struct {
	PartitionRef
	// Acks selects when the response is sent.
	Acks Acks
	// TimeoutMs bounds the wait for the acknowledgement; 0 = the server's
	// default. On expiry the answer is REQUEST_TIMED_OUT.
	TimeoutMs uint32
	// Records holds exactly one batch. After DecodeBody it aliases the
	// frame: it is valid only while the frame's buffer is neither reused nor
	// modified; copy it (or finish with it) before reading the next frame
	// into that buffer.
	Records []byte
}

func (*ProduceRequest) isRequest() {}

// APIKey returns APIProduce.
func (*ProduceRequest) APIKey() APIKey { return APIProduce }

// AppendBody encodes the body. It allocates only if dst must grow.
func (r *ProduceRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = r.PartitionRef.append(dst)
	dst = append(dst, byte(r.Acks))
	dst = be.AppendUint32(dst, r.TimeoutMs)
	return appendBytes(dst, r.Records)
}

// DecodeBody decodes the body without copying the records and, when the
// topic name is unchanged from the struct's previous value, without
// allocating.
func (r *ProduceRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIProduce, version, false)
	r.PartitionRef.decode(&d)
	r.Acks = Acks(d.i8("acks"))
	if d.err == nil && r.Acks != AcksQuorum && r.Acks != AcksPrimary {
		d.off--
		d.failf("acks", "%d is not 0 (quorum) or 1 (primary)", r.Acks)
	}
	r.TimeoutMs = d.u32("timeout_ms")
	r.Records = d.bytes32("records", RecordsBytesMax)
	return d.done()
}

// Validate checks the PartitionRef and that records are present
// (CORRUPT_MESSAGE) and not over RecordsBytesMax (MESSAGE_TOO_LARGE). The
// broker validates the batch itself.
func (r *ProduceRequest) Validate() error {
	if err := r.PartitionRef.Validate(); err != nil {
		return err
	}
	if len(r.Records) == 0 {
		return Errorf(ErrCorruptMessage, "produce to %s/%d carries no record batch", r.Topic, r.Partition)
	}
	if len(r.Records) > RecordsBytesMax {
		return Errorf(ErrMessageTooLarge, "record batch of %d bytes exceeds the maximum %d", len(r.Records), RecordsBytesMax)
	}
	return nil
}

// ProduceResponse acknowledges a produce.
//
// Body v0:
//
//	base_offset         int64  offset given to the batch's first record
//	log_append_time_ms  int64  broker time stamped on the batch; -1 when the
//	                           topic keeps producer (create) time
//	log_start_offset    int64  the partition's first offset
type ProduceResponse struct {
	BaseOffset      int64
	LogAppendTimeMs int64
	LogStartOffset  int64
}

func (*ProduceResponse) isResponse() {}

// APIKey returns APIProduce.
func (*ProduceResponse) APIKey() APIKey { return APIProduce }

// AppendBody encodes the body.
func (r *ProduceResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint64(dst, uint64(r.BaseOffset))
	dst = be.AppendUint64(dst, uint64(r.LogAppendTimeMs))
	return be.AppendUint64(dst, uint64(r.LogStartOffset))
}

// DecodeBody decodes the body.
func (r *ProduceResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIProduce, version, true)
	r.BaseOffset = d.i64("base_offset")
	r.LogAppendTimeMs = d.i64("log_append_time_ms")
	r.LogStartOffset = d.i64("log_start_offset")
	return d.done()
}
