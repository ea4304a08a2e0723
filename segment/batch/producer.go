package batch

import (
	"encoding/binary"
	"math"
)

// Values that mean "none" in the header, as Kafka writes them.
const (
	// NoProducerID is the producer id of a batch from a producer that is
	// not idempotent.
	NoProducerID int64 = -1
	// NoProducerEpoch is the producer epoch that goes with NoProducerID.
	NoProducerEpoch int16 = -1
	// NoSequence is the base sequence that goes with NoProducerID.
	NoSequence int32 = -1
	// NoPartitionLeaderEpoch is the leader epoch a client writes; the
	// primary stamps the consensus term over it.
	NoPartitionLeaderEpoch int32 = -1
)

// TimestampType says what the record timestamps of a batch mean
// (attribute bit 3).
type TimestampType int8

// Timestamp types. Values are the format; never change.
const (
	// CreateTime: each record carries the producer's timestamp.
	CreateTime TimestampType = 0
	// LogAppendTime: the broker's append time, MaxTimestamp, applies to
	// every record of the batch.
	LogAppendTime TimestampType = 1
)

// String returns the type's name as Kafka spells it.
func (t TimestampType) String() string {
	switch t {
	case CreateTime:
		return "CreateTime"
	case LogAppendTime:
		return "LogAppendTime"
	}
	return "unknown"
}

// TimestampType is the batch's timestamp type.
func (h *Header) TimestampType() TimestampType {
	if h.Attributes&TimestampTypeBit != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports whether the batch belongs to a transaction.
func (h *Header) IsTransactional() bool { return h.Attributes&TransactionalBit != 0 }

// IsControl reports whether the batch holds control records (transaction
// markers) rather than data.
func (h *Header) IsControl() bool { return h.Attributes&ControlBit != 0 }

// HasProducerID reports whether the batch comes from an idempotent (or
// transactional) producer: producer id >= 0.
func (h *Header) HasProducerID() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence number of the batch's last record:
// BaseSequence + LastOffsetDelta, wrapping from math.MaxInt32 to 0 as
// Kafka does (sequences are non-negative int32s that wrap around). It is
// NoSequence when the batch has no base sequence. A broker deduplicating an
// idempotent producer expects the next batch's BaseSequence to be
// IncrementSequence(LastSequence(), 1).
func (h *Header) LastSequence() int32 {
	if h.BaseSequence == NoSequence {
		return NoSequence
	}
	return IncrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

// IncrementSequence returns seq + n in Kafka's sequence space: the
// non-negative int32s, where math.MaxInt32 + 1 wraps to 0.
// REQUIRES: seq >= 0 and n >= 0.
func IncrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// SetProducerState rewrites the producer id, epoch and base sequence of
// the batch b and recomputes its CRC (those fields are covered by it). A
// producer uses it to re-sequence a batch it already built, for example
// after its epoch was bumped.
// REQUIRES: b holds one whole batch (len(b) >= HeaderSize).
func SetProducerState(b []byte, id int64, epoch int16, baseSequence int32) {
	be := binary.BigEndian
	be.PutUint64(b[offProducerID:], uint64(id))
	be.PutUint16(b[offProducerEpoch:], uint16(epoch))
	be.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	be.PutUint32(b[offCRC:], Checksum(b))
}

// SetLogAppendTime marks the batch b as LogAppendTime with the broker's
// append time ts as MaxTimestamp (which readers then report for every
// record), and recomputes its CRC. A broker does this for topics whose
// timestamp type is LogAppendTime; it costs one pass of CRC over the batch.
// REQUIRES: b holds one whole batch (len(b) >= HeaderSize).
func SetLogAppendTime(b []byte, ts int64) {
	be := binary.BigEndian
	attrs := be.Uint16(b[offAttributes:]) | TimestampTypeBit
	be.PutUint16(b[offAttributes:], attrs)
	be.PutUint64(b[offMaxTimestamp:], uint64(ts))
	be.PutUint32(b[offCRC:], Checksum(b))
}
