package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors returned by the Builder.
var (
	// ErrTooLarge is returned by Append when the record would take the
	// batch past its bounds (its records past RecordsBytesMax, or past
	// BatchBytesMax for an uncompressed batch), and by Build when the
	// compressed batch does not fit in BatchBytesMax. Cut the batch earlier.
	ErrTooLarge = errors.New("batch: too large")
	// ErrEmpty is returned by Build when no record was appended: the
	// format has no empty batch.
	ErrEmpty = errors.New("batch: no records")
	// ErrOptions is returned by NewBuilder for options it cannot honour;
	// the error wraps it with the detail.
	ErrOptions = errors.New("batch: invalid options")
)

// Options configure a Builder.
type Options struct {
	// Codec compresses the records. Default CodecNone.
	Codec Codec
	// Level is the codec's compression level; 0 (the default) is the
	// codec's own default. gzip 1-9, lz4 1-9 (0 = fast), zstd 1-22 (zstd's
	// scale, mapped onto klauspost's four speeds); snappy has none.
	Level int
	// TimestampType is CreateTime (default) or LogAppendTime.
	TimestampType TimestampType
	// Transactional marks batches as part of a transaction; it requires
	// Idempotent.
	Transactional bool
	// Idempotent says the producer fields below are used. When false
	// (default) batches carry producer id, epoch and base sequence -1
	// (NoProducerID, NoProducerEpoch, NoSequence): not idempotent.
	Idempotent bool
	// ProducerID, ProducerEpoch and BaseSequence are written when
	// Idempotent is set; SetProducer changes them between batches.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// Builder encodes records into a batch. The producer appends records,
// watches Len and EstimatedBytes to cut the batch, then calls Build (or
// BuildAppend), which resets the Builder for the next batch while keeping
// its buffers: appending and building allocate nothing per record, and
// with BuildAppend into a reused buffer nothing at all once warm.
//
// Built batches have base offset 0 and partition leader epoch -1
// (NoPartitionLeaderEpoch, as Kafka clients write): the primary stamps both
// with SetBaseOffset and SetPartitionLeaderEpoch, which the CRC does not
// cover. A Builder never reads a clock: record timestamps come from the
// caller. A Builder is not safe for concurrent use.
type Builder struct {
	opts Options
	// Producer fields written into the next batch (-1s when not idempotent).
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	// recs holds the encoded, uncompressed records of the batch being built.
	// Invariant: it holds exactly count records, with offset deltas
	// 0..count-1, and len(recs) <= recsMax.
	recs    []byte
	recsMax int
	count   int32
	// baseTS is the first record's timestamp, maxTS the largest one; both
	// are meaningful only when count > 0.
	baseTS, maxTS int64
	out           []byte // scratch for compressed records, kept across batches
}

// NewBuilder returns a Builder for opts. It fails with an error wrapping
// ErrOptions for an unknown codec or timestamp type, a level out of range,
// or a transactional producer that is not idempotent.
func NewBuilder(opts Options) (*Builder, error) {
	if opts.Codec < CodecNone || opts.Codec > CodecZstd {
		return nil, fmt.Errorf("%w: unknown codec %d", ErrOptions, opts.Codec)
	}
	if err := checkLevel(opts.Codec, opts.Level); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOptions, err)
	}
	if opts.TimestampType != CreateTime && opts.TimestampType != LogAppendTime {
		return nil, fmt.Errorf("%w: unknown timestamp type %d", ErrOptions, opts.TimestampType)
	}
	if opts.Transactional && !opts.Idempotent {
		return nil, fmt.Errorf("%w: transactional batches need an idempotent producer", ErrOptions)
	}
	b := &Builder{opts: opts, recsMax: RecordsBytesMax}
	if opts.Codec == CodecNone {
		b.recsMax = BatchBytesMax - HeaderSize
	}
	b.producerID, b.producerEpoch, b.baseSequence = NoProducerID, NoProducerEpoch, NoSequence
	if opts.Idempotent {
		b.SetProducer(opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence)
	}
	return b, nil
}

// SetProducer sets the producer id, epoch and base sequence written into
// the batches built from now on (an idempotent producer sets the base
// sequence before each Build). Passing -1s makes batches non-idempotent.
func (b *Builder) SetProducer(id int64, epoch int16, baseSequence int32) {
	b.producerID, b.producerEpoch, b.baseSequence = id, epoch, baseSequence
}

// Len is the number of records appended since the last Build or Reset.
func (b *Builder) Len() int { return int(b.count) }

// EstimatedBytes is the size of the batch built from the records so far if
// it were not compressed: exact for CodecNone, and for other codecs an
// upper bound in practice (compression of record data rarely grows it by
// more than a few bytes). A producer cuts batches on it.
func (b *Builder) EstimatedBytes() int { return HeaderSize + len(b.recs) }

// RecordBytes is how many bytes r would add to EstimatedBytes if appended
// now, so that a producer can cut before a record that would not fit.
func (b *Builder) RecordBytes(r *Record) int {
	tsDelta := int64(0)
	if b.count > 0 {
		tsDelta = r.Timestamp - b.baseTS
	}
	n := recordBodySize(r, tsDelta, b.count)
	return varintSize(int64(n)) + n
}

// Append adds r to the batch (r.Offset and r.Attributes are ignored; the
// record is copied, r may be reused). It returns an error wrapping
// ErrTooLarge, and leaves the batch unchanged, when the record would take
// the batch past its bounds.
func (b *Builder) Append(r Record) error {
	return b.append(&r)
}

// AppendKV appends a record with no headers: a shorthand for Append.
func (b *Builder) AppendKV(timestamp int64, key, value []byte) error {
	return b.append(&Record{Timestamp: timestamp, Key: key, Value: value})
}

func (b *Builder) append(r *Record) error {
	if len(r.Key) > b.recsMax || len(r.Value) > b.recsMax || len(r.Headers) > b.recsMax {
		return fmt.Errorf("%w: record of over %d bytes", ErrTooLarge, b.recsMax)
	}
	baseTS := r.Timestamp
	if b.count > 0 {
		baseTS = b.baseTS
	}
	tsDelta := r.Timestamp - baseTS
	body := recordBodySize(r, tsDelta, b.count)
	if n := varintSize(int64(body)) + body; n > b.recsMax-len(b.recs) {
		return fmt.Errorf("%w: a %d-byte record after %d bytes of records exceeds %d", ErrTooLarge, n, len(b.recs), b.recsMax)
	}
	b.recs = appendRecord(b.recs, r, body, tsDelta, b.count)
	if b.count == 0 {
		b.baseTS, b.maxTS = r.Timestamp, r.Timestamp
	}
	b.maxTS = max(b.maxTS, r.Timestamp)
	b.count++
	return nil
}

// Reset drops the records appended so far, keeping the buffers, the
// options and the producer fields.
func (b *Builder) Reset() {
	b.recs, b.count = b.recs[:0], 0
}

// Build returns the finished batch in a newly allocated slice of exactly
// its size (one allocation per batch), and resets the Builder. It fails
// with ErrEmpty when there is no record, and with an error wrapping
// ErrTooLarge when the compressed batch exceeds BatchBytesMax; on error the
// records are kept (call Reset to drop them).
func (b *Builder) Build() ([]byte, error) {
	if b.opts.Codec == CodecNone {
		return b.BuildAppend(make([]byte, 0, HeaderSize+len(b.recs)))
	}
	out, err := b.BuildAppend(b.out[:0])
	b.out = out[:0]
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), out...), nil
}

// BuildAppend appends the finished batch to dst and resets the Builder, as
// Build does; the batch is dst[len(dst):] of the result. With a dst of
// enough capacity it allocates nothing. On error it returns dst unchanged.
func (b *Builder) BuildAppend(dst []byte) ([]byte, error) {
	if b.count == 0 {
		return dst, ErrEmpty
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	if b.opts.Codec == CodecNone {
		dst = append(dst, b.recs...)
	} else {
		var err error
		if dst, err = compress(b.opts.Codec, b.opts.Level, dst, b.recs); err != nil {
			return dst[:start], err
		}
	}
	if size := len(dst) - start; size > BatchBytesMax {
		return dst[:start], fmt.Errorf("%w: %d bytes compressed with %s, over %d", ErrTooLarge, size, b.opts.Codec, BatchBytesMax)
	}
	b.putHeader(dst[start:])
	b.Reset()
	return dst, nil
}

// putHeader fills in the header of the finished batch bt and its CRC.
func (b *Builder) putHeader(bt []byte) {
	be := binary.BigEndian
	attrs := int16(b.opts.Codec)
	if b.opts.TimestampType == LogAppendTime {
		attrs |= TimestampTypeBit
	}
	if b.opts.Transactional {
		attrs |= TransactionalBit
	}
	be.PutUint64(bt[offBaseOffset:], 0)
	be.PutUint32(bt[offBatchLength:], uint32(len(bt)-LengthFieldEnd))
	epoch := NoPartitionLeaderEpoch
	be.PutUint32(bt[offLeaderEpoch:], uint32(epoch))
	bt[offMagic] = Magic
	be.PutUint16(bt[offAttributes:], uint16(attrs))
	be.PutUint32(bt[offLastOffsetDelta:], uint32(b.count-1))
	be.PutUint64(bt[offBaseTimestamp:], uint64(b.baseTS))
	be.PutUint64(bt[offMaxTimestamp:], uint64(b.maxTS))
	be.PutUint64(bt[offProducerID:], uint64(b.producerID))
	be.PutUint16(bt[offProducerEpoch:], uint16(b.producerEpoch))
	be.PutUint32(bt[offBaseSequence:], uint32(b.baseSequence))
	be.PutUint32(bt[offRecordCount:], uint32(b.count))
	be.PutUint32(bt[offCRC:], Checksum(bt))
}
