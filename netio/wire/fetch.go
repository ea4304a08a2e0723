package wire

// FetchRequest reads committed records of one partition from an offset.
//
// Body v0 (after the PartitionRef):
//
//	fetch_offset  int64   first offset wanted
//	max_bytes     uint32  soft bound on the records returned
//	min_bytes     uint32  answer early once this many bytes are available
//	max_wait_ms   uint32  long-poll bound while fewer than min_bytes exist
//
// Body v1 appends:
//
//	rack          string  the consumer's rack (node.rack); may be empty
//
// The server returns only committed records (below the high watermark). It
// answers at once when at least MinBytes are available or the request
// cannot be served (an error), and otherwise when MaxWaitMs passes, with
// whatever is available then (possibly nothing). The server caps MaxBytes at
// RecordsBytesMax and MaxWaitMs at FetchWaitMsMax.
type FetchRequest struct {
	PartitionRef
	// FetchOffset is the first offset wanted; it must lie in
	// [log start offset, log end] (else OFFSET_OUT_OF_RANGE); at or above the
	// high watermark it long-polls.
	FetchOffset int64
	// MaxBytes bounds the records returned, except that the first batch
	// at or after FetchOffset is returned whole even when it is larger, so
	// that a consumer always makes progress.
	MaxBytes uint32
	// MinBytes makes the server wait for this many bytes; 0 answers at once.
	MinBytes uint32
	// MaxWaitMs bounds the wait for MinBytes.
	MaxWaitMs uint32
	// Rack is the consumer's rack (v1; empty: none, and always none in
	// v0). With a rack, the primary may answer with a preferred read
	// replica in that rack instead of records, and a follower serves the
	// fetch up to its own high watermark instead of answering NOT_PRIMARY
	// (follower reads, KIP-392).
	Rack string
}

// FetchWaitMsMax caps a fetch's long-poll wait (60 s).
const FetchWaitMsMax = 60_000

func (*FetchRequest) isRequest() {}

// APIKey returns APIFetch.
func (*FetchRequest) APIKey() APIKey { return APIFetch }

// AppendBody encodes the body. It allocates only if dst must grow.
func (r *FetchRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = r.PartitionRef.append(dst)
	dst = be.AppendUint64(dst, uint64(r.FetchOffset))
	dst = be.AppendUint32(dst, r.MaxBytes)
	dst = be.AppendUint32(dst, r.MinBytes)
	dst = be.AppendUint32(dst, r.MaxWaitMs)
	if version >= 1 {
		dst = appendString(dst, r.Rack)
	}
	return dst
}

// DecodeBody decodes the body; it does not allocate when the topic name is
// unchanged from the struct's previous value.
func (r *FetchRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIFetch, version, false)
	r.PartitionRef.decode(&d)
	r.FetchOffset = d.i64("fetch_offset")
	r.MaxBytes = d.u32("max_bytes")
	r.MinBytes = d.u32("min_bytes")
	r.MaxWaitMs = d.u32("max_wait_ms")
	r.Rack = ""
	if version >= 1 {
		d.str("rack", RackBytesMax, &r.Rack)
	}
	return d.done()
}

// Validate checks the PartitionRef and a non-negative FetchOffset
// (INVALID_OFFSET).
func (r *FetchRequest) Validate() error {
	if err := r.PartitionRef.Validate(); err != nil {
		return err
	}
	if r.FetchOffset < 0 {
		return Errorf(ErrInvalidOffset, "fetch offset %d is negative", r.FetchOffset)
	}
	return nil
}

// FetchResponse carries records of one partition. The records come last
// and their length is in the fixed part, so a server writes the first
// FetchResponseHeaderBytes from memory (AppendFetchResponseHeader) and then
// sends the records straight from segment files (sendfile).
//
// Body v0:
//
//	high_watermark    int64   exclusive: the next offset to be committed
//	log_start_offset  int64   the partition's first offset
//	records           bytes   whole batches, except that the last one may
//	                          be cut short; may start with a batch holding
//	                          offsets below fetch_offset
//
// Body v1 puts, between log_start_offset and records:
//
//	preferred_read_replica  int32  a node of the consumer's rack to fetch
//	                               from instead (then records is empty);
//	                               NodeNone (-1): fetch here
//
// A client skips records below its fetch offset, and ignores a trailing
// partial batch (it fetches again from the offset after the last whole
// batch).
type FetchResponse struct {
	HighWatermark  int64
	LogStartOffset int64
	// PreferredReadReplica (v1) is the in-sync replica of the consumer's
	// rack that the primary asks it to fetch from, with no records in
	// this answer; NodeNone (-1, and always in v0): none.
	PreferredReadReplica int32
	// Records aliases the frame after DecodeBody: valid only while the
	// frame's buffer is neither reused nor modified.
	Records []byte
}

// FetchResponseHeaderBytes is the size of everything before the records in
// a v0 fetch response frame: size field, response header, high watermark,
// log start offset and records length. A v1 header is 4 bytes longer
// (FetchResponseHeaderBytesMax).
const FetchResponseHeaderBytes = SizeFieldBytes + ResponseHeaderBytes + 8 + 8 + 4

// FetchResponseHeaderBytesMax is the largest fetch response header of any
// version (v1: with preferred_read_replica).
const FetchResponseHeaderBytesMax = FetchResponseHeaderBytes + 4

// AppendFetchResponseHeader appends a complete successful fetch response
// frame except for its records: the caller sends exactly recordsLen bytes of
// records right after it (from memory or with sendfile). It appends
// FetchResponseHeaderBytes bytes (v0; v1 4 more, with preferred, which v0
// cannot carry) and allocates only if dst must grow.
// REQUIRES: 0 <= recordsLen <= RecordsBytesMax; version is supported.
func AppendFetchResponseHeader(dst []byte, correlationID uint32, version uint16, highWatermark, logStartOffset int64, preferred int32, recordsLen int) []byte {
	fixed := 8 + 8 + 4
	if version >= 1 {
		fixed += 4
	}
	dst = AppendResponseHeader(dst, ResponseHeader{CorrelationID: correlationID}, fixed+recordsLen)
	dst = be.AppendUint64(dst, uint64(highWatermark))
	dst = be.AppendUint64(dst, uint64(logStartOffset))
	if version >= 1 {
		dst = be.AppendUint32(dst, uint32(preferred))
	}
	return be.AppendUint32(dst, uint32(recordsLen))
}

func (*FetchResponse) isResponse() {}

// APIKey returns APIFetch.
func (*FetchResponse) APIKey() APIKey { return APIFetch }

// AppendBody encodes the body, records included.
func (r *FetchResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint64(dst, uint64(r.HighWatermark))
	dst = be.AppendUint64(dst, uint64(r.LogStartOffset))
	if version >= 1 {
		dst = be.AppendUint32(dst, uint32(r.PreferredReadReplica))
	}
	return appendBytes(dst, r.Records)
}

// DecodeBody decodes the body without copying the records.
func (r *FetchResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIFetch, version, true)
	r.HighWatermark = d.i64("high_watermark")
	r.LogStartOffset = d.i64("log_start_offset")
	r.PreferredReadReplica = NodeNone
	if version >= 1 {
		r.PreferredReadReplica = d.i32("preferred_read_replica")
	}
	r.Records = d.bytes32("records", RecordsBytesMax)
	return d.done()
}
