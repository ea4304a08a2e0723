package batch

import "math/bits"

// Kafka's record fields use zig-zag varints: a signed value v is mapped to
// the unsigned (v << 1) ^ (v >> 63) and written as base-128 groups, low
// group first, high bit set on every byte but the last. For any value in
// int32 range the 32-bit and 64-bit zig-zag mappings give the same number,
// so one encoder serves both; the decoders differ only in how many bytes
// they accept (5 for a varint, 10 for a varlong).

const (
	varintBytesMax  = 5  // a zig-zag int32 needs at most 5 bytes
	varlongBytesMax = 10 // a zig-zag int64 needs at most 10 bytes
)

// zigzag maps a signed value to its unsigned zig-zag form.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// varintSize is the number of bytes appendVarint writes for v.
func varintSize(v int64) int {
	return (bits.Len64(zigzag(v)|1) + 6) / 7
}

// appendVarint appends the zig-zag varint encoding of v.
func appendVarint(b []byte, v int64) []byte {
	u := zigzag(v)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// readVarint decodes a zig-zag varint (int32) at b[p:]. It returns the value
// and the number of bytes read; n == 0 means b ended inside the varint, and
// n < 0 means the encoding is longer than 5 bytes or overflows 32 bits.
// Non-minimal encodings (padding groups of zero) are accepted, as Kafka does.
func readVarint(b []byte, p int) (v int32, n int) {
	if p < len(b) && b[p] < 0x80 { // fast path: one byte
		u := uint32(b[p])
		return int32(u>>1) ^ -int32(u&1), 1
	}
	var u uint32
	for i := 0; i < varintBytesMax; i++ {
		if p+i >= len(b) {
			return 0, 0
		}
		c := b[p+i]
		if i == varintBytesMax-1 && c > 0x0f {
			return 0, -1 // a continuation bit or bits past 32
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
	}
	return 0, -1 // unreachable: the last byte returns or fails above
}

// readVarlong decodes a zig-zag varlong (int64) at b[p:], with the same
// results as readVarint but up to 10 bytes.
func readVarlong(b []byte, p int) (v int64, n int) {
	if p < len(b) && b[p] < 0x80 {
		u := uint64(b[p])
		return int64(u>>1) ^ -int64(u&1), 1
	}
	var u uint64
	for i := 0; i < varlongBytesMax; i++ {
		if p+i >= len(b) {
			return 0, 0
		}
		c := b[p+i]
		if i == varlongBytesMax-1 && c > 0x01 {
			return 0, -1
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, -1
}
