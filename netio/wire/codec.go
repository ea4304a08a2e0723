package wire

import (
	"encoding/binary"
	"fmt"
)

// This file holds the primitive encoders and the decoder every body uses.
// Primitives (big-endian):
//
//	int8/uint8, int16/uint16, int32/uint32, int64   fixed width
//	bool       uint8, exactly 0 or 1
//	uuid       16 raw bytes
//	string     uint16 length, then that many bytes (no terminator)
//	bytes      uint32 length, then that many bytes
//	array      uint32 count, then count elements

var be = binary.BigEndian

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// appendString writes a uint16 length and the bytes. A string longer than
// 65535 bytes is cut to 65535, which every string bound lies below, so the
// receiver rejects the frame rather than reading a different value.
func appendString(dst []byte, s string) []byte {
	if len(s) > 0xFFFF {
		s = s[:0xFFFF]
	}
	dst = be.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = be.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

func appendCount(dst []byte, n int) []byte { return be.AppendUint32(dst, uint32(n)) }

func appendInt32s(dst []byte, v []int32) []byte {
	dst = appendCount(dst, len(v))
	for _, x := range v {
		dst = be.AppendUint32(dst, uint32(x))
	}
	return dst
}

// decoder reads one body. The first failure sticks: later reads return zero
// values and done reports the first error, so bodies decode as straight-line
// code and check once. It allocates only to build an error.
type decoder struct {
	b   []byte
	off int
	// key, version and response name the body in error messages.
	key      APIKey
	version  uint16
	response bool
	err      error
}

func newDecoder(b []byte, key APIKey, version uint16, response bool) decoder {
	return decoder{b: b, key: key, version: version, response: response}
}

func (d *decoder) failf(field, format string, args ...any) {
	if d.err == nil {
		detail := fmt.Sprintf(format, args...)
		if d.response {
			d.err = fmt.Errorf("%w: %s v%d: field %s at byte %d: %s",
				ErrMalformedResponse, d.key, d.version, field, d.off, detail)
		} else {
			d.err = &ErrorResponse{Err: ErrInvalidRequest,
				Message: fmt.Sprintf("%s v%d request: field %s at byte %d: %s", d.key, d.version,
					field, d.off, detail)}
		}
		d.b, d.off = nil, 0 // every later read now fails without a check of err
	}
}

// take returns the next n bytes, or nil after recording a failure.
func (d *decoder) take(field string, n int) []byte {
	if n > len(d.b)-d.off {
		d.short(field, n)
		return nil
	}
	p := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return p
}

// short records that field needs n bytes that are not there. It is kept
// out of line so that the fixed-width readers inline.
//
//go:noinline
func (d *decoder) short(field string, n int) {
	if d.err == nil {
		d.failf(field, "need %d bytes, have %d", n, len(d.b)-d.off)
	}
}

func (d *decoder) u8(field string) uint8 {
	if d.off < len(d.b) {
		v := d.b[d.off]
		d.off++
		return v
	}
	d.short(field, 1)
	return 0
}

func (d *decoder) u16(field string) uint16 {
	if p := d.b[d.off:]; len(p) >= 2 {
		d.off += 2
		return be.Uint16(p)
	}
	d.short(field, 2)
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if p := d.b[d.off:]; len(p) >= 4 {
		d.off += 4
		return be.Uint32(p)
	}
	d.short(field, 4)
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if p := d.b[d.off:]; len(p) >= 8 {
		d.off += 8
		return be.Uint64(p)
	}
	d.short(field, 8)
	return 0
}

func (d *decoder) i8(field string) int8   { return int8(d.u8(field)) }
func (d *decoder) i16(field string) int16 { return int16(d.u16(field)) }
func (d *decoder) i32(field string) int32 { return int32(d.u32(field)) }
func (d *decoder) i64(field string) int64 { return int64(d.u64(field)) }

func (d *decoder) boolean(field string) bool {
	v := d.u8(field)
	if v > 1 {
		d.off-- // report the field's own offset
		d.failf(field, "bool is %d, want 0 or 1", v)
	}
	return v == 1
}

func (d *decoder) uuid(field string) (id TopicID) {
	if p := d.take(field, len(id)); p != nil {
		copy(id[:], p)
	}
	return id
}

// str reads a string into *dst. When *dst already holds the same bytes it
// is kept, so a struct reused across frames for the same topic decodes
// without allocating.
func (d *decoder) str(field string, max int, dst *string) {
	n := int(d.u16(field))
	if d.err != nil {
		return
	}
	if n > max {
		d.off -= 2
		d.failf(field, "string of %d bytes exceeds the maximum %d", n, max)
		return
	}
	p := d.take(field, n)
	if p == nil {
		return
	}
	if *dst != string(p) {
		*dst = string(p)
	}
}

// bytes32 reads a uint32 length and returns the bytes, aliasing the input.
func (d *decoder) bytes32(field string, max int) []byte {
	n := d.u32(field)
	if d.err != nil {
		return nil
	}
	if n > uint32(max) {
		d.off -= 4
		d.failf(field, "length %d exceeds the maximum %d", n, max)
		return nil
	}
	if n == 0 {
		return nil // nil, not empty: decode then encode round-trips structs
	}
	return d.take(field, int(n))
}

// count reads an array count and checks it against max and against the
// bytes left, given that each element needs at least elemMin bytes, so a
// hostile count can never make the caller allocate more than the input
// justifies.
func (d *decoder) count(field string, max, elemMin int) int {
	n := d.u32(field)
	if d.err != nil {
		return 0
	}
	if n > uint32(max) {
		d.off -= 4
		d.failf(field, "count %d exceeds the maximum %d", n, max)
		return 0
	}
	if left := len(d.b) - d.off; uint64(n)*uint64(elemMin) > uint64(left) {
		d.off -= 4
		d.failf(field, "count %d needs at least %d bytes, have %d", n, uint64(n)*uint64(elemMin), left)
		return 0
	}
	return int(n)
}

// int32s reads an array of int32 into dst[:0].
func (d *decoder) int32s(field string, max int, dst []int32) []int32 {
	n := d.count(field, max, 4)
	dst = dst[:0]
	for i := 0; i < n && d.err == nil; i++ {
		dst = append(dst, d.i32(field))
	}
	return dst
}

// done returns the first failure, or an error when bytes are left over:
// a body must be consumed exactly.
func (d *decoder) done() error {
	if d.err == nil && d.off != len(d.b) {
		d.failf("(end)", "%d trailing bytes after the body", len(d.b)-d.off)
	}
	return d.err
}

// grow returns s resized to n elements, reusing its backing array when it
// is large enough. Elements beyond the old length are zero.
func grow[T any](s []T, n int) []T {
	if n == 0 {
		return s[:0] // nil stays nil
	}
	if cap(s) >= n {
		s = s[:n]
		var zero T
		for i := range s {
			s[i] = zero
		}
		return s
	}
	return make([]T, n)
}
