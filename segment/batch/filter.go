package batch

import (
	"encoding/binary"
	"fmt"
)

// Filter appends to dst the batch b keeping only the records keep accepts,
// as the log cleaner rewrites a batch (docs/design/compaction.md), and
// says how many it kept. Every header field stays — base offset, last
// offset delta, leader epoch, timestamps, producer id, epoch and base
// sequence — but the record count, the batch length and the CRC: offsets
// are never renumbered and a producer's last sequence survives. Kept
// records keep their bytes (their offset and timestamp deltas); a
// compressed batch is recompressed with its codec at the default level,
// and one that keeps no record is left uncompressed and empty. When every
// record is kept, dst gets b unchanged.
//
// The Record given to keep is a view valid during the call only. b must
// pass Validate; a record that does not decode is ErrCorrupt.
func Filter(dst, b []byte, keep func(r *Record) bool) (out []byte, kept int, err error) {
	var it Records
	if err := it.Reset(b); err != nil {
		return dst, 0, err
	}
	h := it.Header()
	recs := make([]byte, 0, len(it.data))
	for {
		start := it.pos
		if !it.Next() {
			break
		}
		if keep(it.Record()) {
			recs = append(recs, it.data[start:it.pos]...)
			kept++
		}
	}
	if err := it.Err(); err != nil {
		return dst, 0, err
	}
	if kept == int(h.RecordCount) {
		return append(dst, b...), kept, nil
	}
	at := len(dst)
	dst = append(dst, b[:HeaderSize]...)
	attrs := h.Attributes
	switch c := h.Codec(); {
	case kept == 0:
		attrs &^= CodecMask
	case c != CodecNone:
		if recs, err = compress(c, 0, nil, recs); err != nil {
			return dst[:at], 0, err
		}
	}
	dst = append(dst, recs...)
	bt := dst[at:]
	if len(bt) > BatchBytesMax {
		return dst[:at], 0, fmt.Errorf("%w: filtered batch of %d bytes, over %d", ErrTooLarge, len(bt), BatchBytesMax)
	}
	be := binary.BigEndian
	be.PutUint32(bt[offBatchLength:], uint32(len(bt)-LengthFieldEnd))
	be.PutUint16(bt[offAttributes:], uint16(attrs))
	be.PutUint32(bt[offRecordCount:], uint32(kept))
	be.PutUint32(bt[offCRC:], Checksum(bt))
	return dst, kept, nil
}
