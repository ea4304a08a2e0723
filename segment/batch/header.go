// Package batch is the record batch format shared by the client SDK and the
// broker: Kafka's RecordBatch v2 (magic 2), byte-identical on the wire and on
// disk. It imports nothing of the log, so a client can use it alone.
//
// Layout (big-endian; offsets in bytes; these never change):
//
//	 0  baseOffset            int64   stamped by the primary
//	 8  batchLength           int32   bytes after this field
//	12  partitionLeaderEpoch  int32   stamped by the primary (consensus term)
//	16  magic                 int8    = 2
//	17  crc                   uint32  CRC-32C (Castagnoli) of bytes [21, end)
//	21  attributes            int16   bits 0-2 codec, 3 timestamp type,
//	                                  4 transactional, 5 control
//	23  lastOffsetDelta       int32
//	27  baseTimestamp         int64   milliseconds since the Unix epoch
//	35  maxTimestamp          int64
//	43  producerId            int64   -1 when not idempotent
//	51  producerEpoch         int16
//	53  baseSequence          int32
//	57  recordCount           int32
//	61  records...                    possibly compressed as a whole
//
// Because the CRC starts at attributes, the broker can stamp baseOffset and
// partitionLeaderEpoch without hashing the batch again.
//
// The records section holds RecordCount records in Kafka's record v2
// encoding (layout in record.go), compressed as a whole when the codec
// bits say so. What each side uses:
//
//   - Producers (the client SDK): a Builder appends Records and builds a
//     batch with base offset 0 and leader epoch -1, compressed with the
//     codec of its Options.
//   - The broker: ValidateRecords checks a produced batch down to every
//     record before it touches the disk; the primary then stamps
//     SetBaseOffset and SetPartitionLeaderEpoch. Header.LastSequence and
//     IncrementSequence are Kafka's sequence arithmetic for idempotence.
//   - Consumers and log readers: Cut and Split separate concatenated
//     batches, stopping cleanly at a truncated tail; Records iterates the
//     records of a batch, decompressing when needed, without allocating
//     per record.
//
// Bounds: BatchBytesMax (16 MiB) for a batch, RecordsBytesMax (64 MiB) for
// its records after decompression. The compressed formats are those Kafka's
// Java producer writes (the choices are documented in compress.go).
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Byte offsets of the header fields. Never change: they are the format.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// HeaderSize is the size of the fixed batch header in bytes.
	HeaderSize = 61
	// LengthFieldEnd is where the bytes counted by batchLength begin: a
	// batch occupies LengthFieldEnd + batchLength bytes in total.
	LengthFieldEnd = 12
	// Magic is the only batch format version this package reads or writes.
	Magic = 2
	// BatchBytesMax bounds one batch (16 MiB): a larger batchLength is
	// treated as corruption, never as an allocation request.
	BatchBytesMax = 16 << 20
)

// Attribute bits.
const (
	CodecMask           = 0x07
	TimestampTypeBit    = 0x08
	TransactionalBit    = 0x10
	ControlBit          = 0x20
	attributesKnownMask = CodecMask | TimestampTypeBit | TransactionalBit | ControlBit
)

// Errors returned by the functions of this package. Callers use errors.Is.
var (
	// ErrShort is returned when fewer bytes than a header or than the
	// declared batch length are available.
	ErrShort = errors.New("batch: short buffer")
	// ErrCorrupt is returned for a structurally invalid batch (bad length,
	// magic, counts or deltas). Returned errors wrap it with the detail.
	ErrCorrupt = errors.New("batch: corrupt")
	// ErrChecksum is returned when the CRC-32C does not match.
	ErrChecksum = errors.New("batch: checksum mismatch")
	// ErrKeyless is returned by ValidateKeyedRecords for a record without
	// a key.
	ErrKeyless = errors.New("batch: a record without a key, on a compacted topic")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed header of a batch.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the total size of the batch in bytes.
func (h *Header) Size() int { return LengthFieldEnd + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression codec in the attributes.
func (h *Header) Codec() Codec { return Codec(h.Attributes & CodecMask) }

// ReadHeader decodes the fixed header at the start of b and checks the
// fields that bound the rest (length, magic). It does not verify the CRC.
func ReadHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	be := binary.BigEndian
	h := Header{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(be.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		RecordCount:          int32(be.Uint32(b[offRecordCount:])),
	}
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: magic %d, want %d", ErrCorrupt, h.Magic, Magic)
	}
	if h.BatchLength < HeaderSize-LengthFieldEnd || int(h.BatchLength) > BatchBytesMax-LengthFieldEnd {
		return h, fmt.Errorf("%w: batch length %d out of range", ErrCorrupt, h.BatchLength)
	}
	return h, nil
}

// Validate checks that b holds exactly one well-formed batch: header bounds,
// CRC-32C, known attribute bits, and consistent record count and offset
// delta (at most one record per offset: a compacted batch may hold fewer,
// even none). It does not decompress or walk the records (see Records for
// that).
func Validate(b []byte) (Header, error) { return validate(b, true) }

// ValidateChecked is Validate without the CRC-32C, for a batch the caller
// validated (Validate or ValidateRecords) and has not changed since: the
// CRC of a 64 KiB batch is about a tenth of a broker's CPU per message, and
// the produce path would otherwise compute it twice (once when it checks
// the batch, once when the log appends it).
func ValidateChecked(b []byte) (Header, error) { return validate(b, false) }

// validate is Validate; with crc false it skips the CRC-32C.
func validate(b []byte, crc bool) (Header, error) {
	h, err := ReadHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		if h.Size() > len(b) {
			return h, ErrShort
		}
		return h, fmt.Errorf("%w: batch length %d but %d bytes given", ErrCorrupt, h.Size(), len(b))
	}
	if crc {
		if got := crc32.Checksum(b[offAttributes:], castagnoli); got != h.CRC {
			return h, fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, h.CRC, got)
		}
	}
	if h.Attributes&^attributesKnownMask != 0 {
		return h, fmt.Errorf("%w: unknown attribute bits %#x", ErrCorrupt, h.Attributes)
	}
	if h.Codec() > CodecZstd {
		return h, fmt.Errorf("%w: unknown codec %d", ErrCorrupt, h.Codec())
	}
	// A compacted batch (docs/design/compaction.md) keeps its offsets
	// and lost records: fewer records than offsets, none at all when
	// every one was superseded. A produced batch is dense
	// (ValidateRecords).
	if !h.IsZeroWidth() && (h.LastOffsetDelta < 0 || h.RecordCount < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1) {
		return h, fmt.Errorf("%w: record count %d with last offset delta %d", ErrCorrupt, h.RecordCount, h.LastOffsetDelta)
	}
	if h.BaseOffset < 0 {
		return h, fmt.Errorf("%w: negative base offset %d", ErrCorrupt, h.BaseOffset)
	}
	return h, nil
}

// SetBaseOffset stamps the base offset. The CRC does not cover it.
// REQUIRES: len(b) >= HeaderSize.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch stamps the leader epoch (the consensus term). The
// CRC does not cover it.
// REQUIRES: len(b) >= HeaderSize.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// Checksum computes the CRC-32C a batch must carry, over b[21:].
// REQUIRES: len(b) >= HeaderSize.
func Checksum(b []byte) uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }

// IsDense reports whether the batch holds a record at every one of its
// offsets (as every produced batch does), or is zero-width. A batch the
// log cleaner rewrote may not be.
func (h *Header) IsDense() bool {
	return h.IsZeroWidth() || h.RecordCount > 0 && h.LastOffsetDelta == h.RecordCount-1
}
