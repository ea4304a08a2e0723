package batch

import "fmt"

// Records iterates over the records of one batch, decompressing it first
// when needed. The zero value is ready for Reset; reuse one Records for many
// batches so that its decompression buffer and header slice are reused
// (then iteration allocates nothing per record, and nothing per batch once
// the buffers have grown).
//
// Iteration checks every record as it goes: each varint and length in
// bounds, offset deltas 0, 1, …, RecordCount-1 in order (in a compacted
// batch, with fewer records than offsets: increasing, at most the last
// offset delta), exactly
// RecordCount records with no bytes after the last one, and, for
// CreateTime batches, that MaxTimestamp is the largest record timestamp.
// The first violation stops iteration and is reported by Err, wrapping
// ErrCorrupt. So a dense batch that iterates to the end without error is
// exactly a batch ValidateRecords accepts.
//
//	var it batch.Records
//	if err := it.Reset(b); err != nil { ... }
//	for it.Next() {
//		r := it.Record() // valid until the next Next or Reset
//	}
//	if err := it.Err(); err != nil { ... }
type Records struct {
	h    Header
	data []byte // the records section, decompressed; aliases the batch when uncompressed
	pos  int    // offset in data of the next record
	// next is the index of the next record to decode.
	// Invariant: 0 <= next <= h.RecordCount.
	next int32
	// nextDelta is the smallest offset delta the next record may have.
	nextDelta int32
	maxTS     int64 // the largest record timestamp seen (CreateTime)
	dec       recordDecoder
	buf       []byte // decompression buffer, kept across Resets
	done      bool   // no more records: the end was checked, or err is set
	err       error
}

// Reset starts iterating over the batch b: it runs Validate (header bounds
// and CRC), checks the producer fields as ValidateRecords does, and
// decompresses the records. The batch must stay unchanged
// while its records are in use: uncompressed records alias it.
// It returns the error of Validate, or one wrapping ErrCorrupt when the
// records cannot be decompressed or cannot hold RecordCount records; Err
// returns the same error afterwards, and Next returns false.
func (it *Records) Reset(b []byte) error {
	h, err := Validate(b)
	if err != nil {
		it.fail(h, err)
		return err
	}
	return it.resetValidated(h, b)
}

// resetValidated is Reset for a batch that Validate has accepted as h.
func (it *Records) resetValidated(h Header, b []byte) error {
	if err := checkProducer(&h); err != nil {
		it.fail(h, err)
		return err
	}
	it.h, it.pos, it.next, it.nextDelta, it.err, it.done = h, 0, 0, 0, nil, false
	it.maxTS = minInt64
	it.dec.rec = Record{}
	recs := b[HeaderSize:]
	if c := h.Codec(); c == CodecNone {
		it.data = recs
	} else {
		var err error
		it.buf, err = decompress(c, it.buf, recs)
		if err != nil {
			it.fail(h, err)
			return err
		}
		it.data = it.buf
	}
	if int64(h.RecordCount) > int64(len(it.data)/recordBytesMin) {
		err := fmt.Errorf("%w: record count %d cannot fit in %d bytes of records", ErrCorrupt, h.RecordCount, len(it.data))
		it.fail(h, err)
		return err
	}
	return nil
}

const minInt64 = -1 << 63

// fail stops iteration with err.
func (it *Records) fail(h Header, err error) {
	it.h, it.data, it.pos, it.next, it.err, it.done = h, nil, 0, 0, err, true
	it.dec.rec = Record{}
}

// Header returns the header of the batch given to the last Reset.
func (it *Records) Header() Header { return it.h }

// Err returns the error that stopped iteration, or nil when every record
// was read and the batch checked out.
func (it *Records) Err() error { return it.err }

// Next advances to the next record and reports whether there is one. It
// returns false at the end of the batch or on the first corrupt record
// (see Err).
func (it *Records) Next() bool {
	if it.done {
		return false
	}
	if it.next == it.h.RecordCount {
		it.finish()
		return false
	}
	i := it.next
	pos, err := it.dec.decode(it.data, it.pos, i)
	if err == nil {
		err = it.checkDelta(i)
	}
	if err != nil {
		it.fail(it.h, err)
		return false
	}
	it.pos = pos
	it.next++
	r := &it.dec.rec
	r.Offset = it.h.BaseOffset + int64(it.dec.offDelta)
	it.nextDelta = it.dec.offDelta + 1
	r.Timestamp = it.h.BaseTimestamp + it.dec.tsDelta
	it.maxTS = max(it.maxTS, r.Timestamp)
	if it.h.Attributes&TimestampTypeBit != 0 {
		r.Timestamp = it.h.MaxTimestamp // LogAppendTime: the broker's time for all
	}
	return true
}

// checkDelta checks record i's offset delta: i in a dense batch; in a
// compacted one (fewer records than offsets) above the previous record's
// and at most the last offset delta.
func (it *Records) checkDelta(i int32) error {
	d := it.dec.offDelta
	if it.h.IsDense() {
		if d != i {
			return corruptf(i, "offset delta %d, want %d", d, i)
		}
		return nil
	}
	if d < it.nextDelta || d > it.h.LastOffsetDelta {
		return corruptf(i, "offset delta %d, want %d..%d", d, it.nextDelta, it.h.LastOffsetDelta)
	}
	return nil
}

// finish runs the checks that need the whole batch, once all records are
// read, and marks the iteration done so that they run only once.
func (it *Records) finish() {
	switch {
	case it.pos != len(it.data):
		it.err = fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorrupt, len(it.data)-it.pos, it.h.RecordCount)
	case it.h.Attributes&TimestampTypeBit == 0 && it.h.IsDense() && it.maxTS != it.h.MaxTimestamp,
		it.h.Attributes&TimestampTypeBit == 0 && it.maxTS > it.h.MaxTimestamp:
		// A compacted batch keeps its max timestamp; its largest
		// record may have been cleaned away.
		it.err = fmt.Errorf("%w: max timestamp %d but the largest record timestamp is %d", ErrCorrupt, it.h.MaxTimestamp, it.maxTS)
	}
	it.data, it.done = nil, true
	it.dec.rec = Record{}
}

// Record returns the current record. Its Key, Value and Headers alias the
// iterator's buffers (or the batch itself): they are valid until the next
// call to Next or Reset. REQUIRES: the last call to Next returned true.
func (it *Records) Record() *Record { return &it.dec.rec }

// EachRecord calls fn with the offset, key and value of every record at
// or past from in buf, a run of whole batches as a fetch answers them
// (a partial batch at its end is left for the next read), skipping
// control batches; the slices alias buf. It returns the offset after
// the last whole batch (from when there is none), or the first error
// with the offset where it was found.
func EachRecord(buf []byte, from int64, fn func(off int64, key, value []byte)) (next int64, err error) {
	next = from
	for len(buf) > 0 {
		h, err := ReadHeader(buf)
		if err != nil {
			return from, fmt.Errorf("at offset %d: %w", next, err)
		}
		size := h.Size()
		if size > len(buf) {
			break // a partial batch at the end of the answer
		}
		if !h.IsControl() {
			var it Records
			if err := it.Reset(buf[:size]); err != nil {
				return from, fmt.Errorf("at offset %d: %w", h.BaseOffset, err)
			}
			for it.Next() {
				if r := it.Record(); r.Offset >= from {
					fn(r.Offset, r.Key, r.Value)
				}
			}
			if err := it.Err(); err != nil {
				return from, fmt.Errorf("at offset %d: %w", h.BaseOffset, err)
			}
		}
		next = max(next, h.LastOffset()+1)
		buf = buf[size:]
	}
	return next, nil
}
