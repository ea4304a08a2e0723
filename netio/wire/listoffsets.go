package wire

// ListOffsetsRequest finds an offset of one partition.
//
// Body v0 (after the PartitionRef):
//
//	timestamp  int64  -2 earliest, -1 latest, else milliseconds since the
//	                  Unix epoch: the first offset whose batch max timestamp
//	                  is at or after it
type ListOffsetsRequest struct {
	PartitionRef
	// Timestamp is TimestampEarliest, TimestampLatest or a time in ms.
	Timestamp int64
}

func (*ListOffsetsRequest) isRequest() {}

// APIKey returns APIListOffsets.
func (*ListOffsetsRequest) APIKey() APIKey { return APIListOffsets }

// AppendBody encodes the body.
func (r *ListOffsetsRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = r.PartitionRef.append(dst)
	return be.AppendUint64(dst, uint64(r.Timestamp))
}

// DecodeBody decodes the body.
func (r *ListOffsetsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIListOffsets, version, false)
	r.PartitionRef.decode(&d)
	r.Timestamp = d.i64("timestamp")
	return d.done()
}

// Validate checks the PartitionRef and a timestamp of at least -2
// (INVALID_TIMESTAMP).
func (r *ListOffsetsRequest) Validate() error {
	if err := r.PartitionRef.Validate(); err != nil {
		return err
	}
	if r.Timestamp < TimestampEarliest {
		return Errorf(ErrInvalidTimestamp, "timestamp %d: want -2 (earliest), -1 (latest) or milliseconds >= 0", r.Timestamp)
	}
	return nil
}

// ListOffsetsResponse answers a ListOffsets.
//
// Body v0:
//
//	offset            int64  the offset found; -1 when no batch has a
//	                         timestamp at or after the one asked for
//	timestamp         int64  that batch's max timestamp; -1 for earliest,
//	                         latest and not found
//	log_start_offset  int64
//	high_watermark    int64
type ListOffsetsResponse struct {
	Offset         int64
	Timestamp      int64
	LogStartOffset int64
	HighWatermark  int64
}

func (*ListOffsetsResponse) isResponse() {}

// APIKey returns APIListOffsets.
func (*ListOffsetsResponse) APIKey() APIKey { return APIListOffsets }

// AppendBody encodes the body.
func (r *ListOffsetsResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint64(dst, uint64(r.Offset))
	dst = be.AppendUint64(dst, uint64(r.Timestamp))
	dst = be.AppendUint64(dst, uint64(r.LogStartOffset))
	return be.AppendUint64(dst, uint64(r.HighWatermark))
}

// DecodeBody decodes the body.
func (r *ListOffsetsResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIListOffsets, version, true)
	r.Offset = d.i64("offset")
	r.Timestamp = d.i64("timestamp")
	r.LogStartOffset = d.i64("log_start_offset")
	r.HighWatermark = d.i64("high_watermark")
	return d.done()
}
