package batch

import (
	"fmt"
	"slices"
)

// Record layout inside a batch's records section (Kafka record v2; all
// integers zig-zag varints, "varlong" for the 64-bit one):
//
//	length          varint   bytes after this field
//	attributes      int8     unused, written as 0
//	timestampDelta  varlong  record time - batch baseTimestamp
//	offsetDelta     varint   record offset - batch baseOffset
//	keyLength       varint   -1 = null key
//	key             bytes
//	valueLength     varint   -1 = null value
//	value           bytes
//	headerCount     varint
//	headers         headerCount × (keyLength varint >= 0, key bytes,
//	                               valueLength varint (-1 = null), value bytes)

const (
	// recordBodyBytesMin is the smallest record body: attributes and five
	// one-byte varints (timestamp delta, offset delta, key length, value
	// length, header count).
	recordBodyBytesMin = 6
	// recordBytesMin is the smallest encoded record: a one-byte length
	// and the smallest body. It bounds how many records a records section
	// of a given size can hold.
	recordBytesMin = 1 + recordBodyBytesMin
	// recordHeaderBytesMin is the smallest encoded record header: two
	// one-byte lengths. It bounds the header count of a record.
	recordHeaderBytesMin = 2
)

// Record is one record of a batch.
//
// A Record returned by the Records iterator is a view: Key, Value and the
// Headers slice alias the iterator's buffers and stay valid only until the
// iterator's next Next or Reset. Use Clone to keep one.
type Record struct {
	// Offset is the record's absolute offset: the batch's base offset plus
	// the record's offset delta. Builder.Append ignores it.
	Offset int64
	// Timestamp is in milliseconds since the Unix epoch. For a batch whose
	// timestamp type is LogAppendTime, the iterator reports the batch's
	// MaxTimestamp for every record, as Kafka does.
	Timestamp int64
	// Key is the record key; nil is a null key, a non-nil empty slice an
	// empty one.
	Key []byte
	// Value is the record value; nil is a null value (a tombstone), a
	// non-nil empty slice an empty one.
	Value []byte
	// Headers are the record headers in wire order; nil when there are none.
	Headers []RecordHeader
	// Attributes is the record's attribute byte. Kafka defines no bits for
	// it; the iterator reports what the batch holds, Builder.Append always
	// writes 0.
	Attributes int8
}

// RecordHeader is one key/value header of a record.
type RecordHeader struct {
	// Key is the header key. The format has no null key: nil is written as
	// an empty key, and the iterator returns an empty non-nil slice.
	Key []byte
	// Value is the header value; nil is a null value.
	Value []byte
}

// Clone returns a deep copy of r that shares no memory with it, keeping
// null (nil) and empty values distinct.
func (r *Record) Clone() Record {
	c := *r
	c.Key = slices.Clone(r.Key)
	c.Value = slices.Clone(r.Value)
	if r.Headers != nil {
		c.Headers = make([]RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = RecordHeader{Key: slices.Clone(h.Key), Value: slices.Clone(h.Value)}
			if c.Headers[i].Key == nil {
				c.Headers[i].Key = []byte{}
			}
		}
	}
	return c
}

// nullableSize is the encoded size of a length-prefixed nullable field.
func nullableSize(b []byte) int {
	if b == nil {
		return 1 // varint(-1)
	}
	return varintSize(int64(len(b))) + len(b)
}

// appendNullable appends a length-prefixed nullable field.
func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return appendVarint(dst, -1)
	}
	dst = appendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// recordBodySize is the encoded size of r's body: every field after the
// length varint.
func recordBodySize(r *Record, tsDelta int64, offDelta int32) int {
	n := 1 + varintSize(tsDelta) + varintSize(int64(offDelta)) +
		nullableSize(r.Key) + nullableSize(r.Value) + varintSize(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varintSize(int64(len(h.Key))) + len(h.Key) + nullableSize(h.Value)
	}
	return n
}

// appendRecord appends r encoded with the given deltas; bodySize must be
// recordBodySize(r, tsDelta, offDelta). Attributes are written as 0.
func appendRecord(dst []byte, r *Record, bodySize int, tsDelta int64, offDelta int32) []byte {
	dst = appendVarint(dst, int64(bodySize))
	dst = append(dst, 0)
	dst = appendVarint(dst, tsDelta)
	dst = appendVarint(dst, int64(offDelta))
	dst = appendNullable(dst, r.Key)
	dst = appendNullable(dst, r.Value)
	dst = appendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		dst = appendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullable(dst, h.Value)
	}
	return dst
}

// recordDecoder decodes one record at a time from a records section. It
// owns the headers slice it hands out, reusing it from record to record.
type recordDecoder struct {
	rec      Record
	hdrs     []RecordHeader
	tsDelta  int64
	offDelta int32
}

// corruptf returns an error wrapping ErrCorrupt that names record i.
func corruptf(i int32, format string, args ...any) error {
	return fmt.Errorf("%w: record %d: %s", ErrCorrupt, i, fmt.Sprintf(format, args...))
}

// varintErr describes a varint that could not be read (n from readVarint).
func varintErr(i int32, field string, n int) error {
	if n == 0 {
		return corruptf(i, "%s: varint runs past the end", field)
	}
	return corruptf(i, "%s: varint too long or overflows", field)
}

// decode decodes record i at b[p:] into d.rec (deltas in d.tsDelta and
// d.offDelta) and returns where the next record starts. Every length is
// checked against the bytes left before it is used, so nothing is
// allocated from a length field except headers, bounded by the bytes left.
func (d *recordDecoder) decode(b []byte, p int, i int32) (int, error) {
	length, n := readVarint(b, p)
	if n <= 0 {
		return 0, varintErr(i, "length", n)
	}
	p += n
	if length < recordBodyBytesMin || int(length) > len(b)-p {
		return 0, corruptf(i, "length %d with %d bytes left", length, len(b)-p)
	}
	end := p + int(length)
	body := b[:end] // no field may read past the record's own length
	d.rec.Attributes = int8(body[p])
	p++
	if d.tsDelta, n = readVarlong(body, p); n <= 0 {
		return 0, varintErr(i, "timestamp delta", n)
	}
	p += n
	if d.offDelta, n = readVarint(body, p); n <= 0 {
		return 0, varintErr(i, "offset delta", n)
	}
	p += n
	var err error
	if d.rec.Key, p, err = readNullable(body, p, i, "key"); err != nil {
		return 0, err
	}
	if d.rec.Value, p, err = readNullable(body, p, i, "value"); err != nil {
		return 0, err
	}
	if p, err = d.decodeHeaders(body, p, i); err != nil {
		return 0, err
	}
	if p != end {
		return 0, corruptf(i, "length %d but its fields end %d bytes in", length, int(length)-(end-p))
	}
	return end, nil
}

// decodeHeaders decodes the header count and headers of record i at b[p:].
func (d *recordDecoder) decodeHeaders(b []byte, p int, i int32) (int, error) {
	count, n := readVarint(b, p)
	if n <= 0 {
		return 0, varintErr(i, "header count", n)
	}
	p += n
	if count < 0 || int(count) > (len(b)-p)/recordHeaderBytesMin {
		return 0, corruptf(i, "header count %d with %d bytes left", count, len(b)-p)
	}
	d.rec.Headers = nil
	if count == 0 {
		return p, nil
	}
	d.hdrs = d.hdrs[:0]
	for h := int32(0); h < count; h++ {
		klen, n := readVarint(b, p)
		if n <= 0 {
			return 0, varintErr(i, "header key length", n)
		}
		p += n
		if klen < 0 || int(klen) > len(b)-p {
			return 0, corruptf(i, "header %d key length %d with %d bytes left", h, klen, len(b)-p)
		}
		key := b[p : p+int(klen) : p+int(klen)]
		p += int(klen)
		var val []byte
		var err error
		if val, p, err = readNullable(b, p, i, "header value"); err != nil {
			return 0, err
		}
		d.hdrs = append(d.hdrs, RecordHeader{Key: key, Value: val})
	}
	d.rec.Headers = d.hdrs
	return p, nil
}

// readNullable reads a length-prefixed nullable field of record i at b[p:].
// The returned slice aliases b with its capacity cut to its length.
func readNullable(b []byte, p int, i int32, field string) ([]byte, int, error) {
	l, n := readVarint(b, p)
	if n <= 0 {
		return nil, 0, varintErr(i, field+" length", n)
	}
	p += n
	if l == -1 {
		return nil, p, nil
	}
	if l < -1 || int(l) > len(b)-p {
		return nil, 0, corruptf(i, "%s length %d with %d bytes left", field, l, len(b)-p)
	}
	return b[p : p+int(l) : p+int(l)], p + int(l), nil
}
