package batch

import (
	"fmt"
	"sync"
)

// maxPooledBufBytes bounds the decompression buffer a pooled iterator
// keeps: a batch that inflated further leaves its buffer to the GC.
const maxPooledBufBytes = 4 << 20

var validators = sync.Pool{New: func() any { return new(Records) }}

// ValidateRecords checks that b holds exactly one well-formed produced
// batch, down to every record. It runs Validate (header bounds, CRC-32C,
// attribute bits, record count against last offset delta, which may be -1
// only for a zero-width consensus batch: see consensus.go), requires a
// dense batch (Header.IsDense: only the log cleaner writes others), checks the producer
// fields, then decompresses and walks every record as Records does:
// RecordCount records with offset deltas 0..RecordCount-1 in order, every
// varint and length in bounds, no bytes after the last record, and for
// CreateTime batches a MaxTimestamp equal to the largest record timestamp
// (Kafka brokers would rewrite a wrong one; ours never re-encode, so they
// refuse it). The broker calls it on every produced batch before it touches
// the disk.
//
// It returns the header, and on failure ErrShort, or an error wrapping
// ErrChecksum or ErrCorrupt that says what is wrong and where (for
// example "batch: corrupt: record 3: offset delta 5, want 3").
// Decompression is bounded by RecordsBytesMax.
func ValidateRecords(b []byte) (Header, error) { return validateRecords(b, false) }

// ValidateKeyedRecords is ValidateRecords for a compacted topic: every
// record of a data batch must also have a key (a null key is refused with
// ErrKeyless; an empty key is a key), as Kafka refuses keyless records at
// produce on a compacted topic: the cleaner keeps the latest record of
// each key, and a record without one would stay forever.
func ValidateKeyedRecords(b []byte) (Header, error) { return validateRecords(b, true) }

func validateRecords(b []byte, keyed bool) (Header, error) {
	h, err := Validate(b)
	if err != nil {
		return h, err
	}
	if !h.IsDense() {
		return h, fmt.Errorf("%w: record count %d with last offset delta %d: a produced batch has a record at every offset", ErrCorrupt, h.RecordCount, h.LastOffsetDelta)
	}
	it := validators.Get().(*Records)
	defer func() {
		if cap(it.buf) > maxPooledBufBytes {
			it.buf = nil
		}
		// Drop every reference into the batch before pooling.
		it.data, it.dec.rec = nil, Record{}
		clear(it.dec.hdrs[:cap(it.dec.hdrs)])
		validators.Put(it)
	}()
	if err := it.resetValidated(h, b); err != nil {
		return h, err
	}
	keyed = keyed && !h.IsControl()
	for it.Next() {
		if h.IsZeroWidth() && !isConsensusKey(it.Record().Key) {
			return h, fmt.Errorf("%w: a zero-width batch (last offset delta -1) whose record is not a consensus control record", ErrCorrupt)
		}
		if keyed && it.Record().Key == nil {
			return h, fmt.Errorf("%w: record %d (offset delta %d)", ErrKeyless, it.next-1, it.Record().Offset-h.BaseOffset)
		}
	}
	return h, it.Err()
}

// checkProducer checks the producer fields: a producer id is -1 (none) or
// non-negative; a transactional batch has one; and a data batch that has
// one also has a non-negative epoch and base sequence (control batches,
// written by a transaction coordinator, carry no sequence). When there is
// no producer id the epoch and sequence are not checked: some clients
// (Sarama) write 0 there.
func checkProducer(h *Header) error {
	switch {
	case h.ProducerID < NoProducerID:
		return fmt.Errorf("%w: producer id %d", ErrCorrupt, h.ProducerID)
	case h.IsTransactional() && !h.HasProducerID():
		return fmt.Errorf("%w: transactional batch without a producer id", ErrCorrupt)
	case h.HasProducerID() && !h.IsControl() && (h.ProducerEpoch < 0 || h.BaseSequence < 0):
		return fmt.Errorf("%w: producer id %d with epoch %d and base sequence %d", ErrCorrupt, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	return nil
}
