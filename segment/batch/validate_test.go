package batch

import (
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// rawHeader is a header for count records with a client's defaults.
func rawHeader(count int32) Header {
	return Header{PartitionLeaderEpoch: -1, LastOffsetDelta: count - 1, RecordCount: count,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

// rawBatch assembles a batch from h and the records section recs, as the
// Builder would but without checking anything: BatchLength, Magic and the
// CRC are computed, every other field is taken from h.
func rawBatch(h Header, recs []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(recs))
	b = append(b, recs...)
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[offBatchLength:], uint32(len(b)-LengthFieldEnd))
	be.PutUint32(b[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = Magic
	be.PutUint16(b[offAttributes:], uint16(h.Attributes))
	be.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[offBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(b[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[offRecordCount:], uint32(h.RecordCount))
	be.PutUint32(b[offCRC:], Checksum(b))
	return b
}

// rawRecord encodes a record from explicit field values (key and value -1
// for null), prefixing the body with its true length unless length >= 0.
func rawRecord(length int64, tsDelta int64, offDelta int32, key, value []byte, tail ...byte) []byte {
	var body []byte
	body = append(body, 0)
	body = appendVarint(body, tsDelta)
	body = appendVarint(body, int64(offDelta))
	body = appendNullable(body, key)
	body = appendNullable(body, value)
	if tail == nil {
		tail = []byte{0} // no headers
	}
	body = append(body, tail...)
	if length < 0 {
		length = int64(len(body))
	}
	return append(appendVarint(nil, length), body...)
}

// v encodes varints, for hand-made fields.
func v(vals ...int64) []byte {
	var b []byte
	for _, x := range vals {
		b = appendVarint(b, x)
	}
	return b
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestValidateRecordsErrors corrupts batches one field at a time and checks
// that ValidateRecords refuses each with the error that names the fault.
func TestValidateRecordsErrors(t *testing.T) {
	k, val := []byte("key"), []byte("0123456789")
	two := cat(rawRecord(-1, 0, 0, k, val), rawRecord(-1, 10, 1, k, val))
	withHeader := func(count int32, mod func(*Header)) Header {
		h := rawHeader(count)
		h.MaxTimestamp = 10
		if mod != nil {
			mod(&h)
		}
		return h
	}
	type tc struct {
		name  string
		b     []byte
		is    error  // nil: valid
		error string // substring of the message
	}
	cases := []tc{
		{"valid", rawBatch(withHeader(2, nil), two), nil, ""},
		{"log append time ignores max", rawBatch(withHeader(2, func(h *Header) { h.Attributes = TimestampTypeBit; h.MaxTimestamp = 99 }), two), nil, ""},
		{"no producer id, sequence 0 (Sarama)", rawBatch(withHeader(2, func(h *Header) { h.BaseSequence = 0 }), two), nil, ""},
		{"control batch without sequence", rawBatch(withHeader(2, func(h *Header) {
			h.Attributes = ControlBit | TransactionalBit
			h.ProducerID, h.ProducerEpoch = 5, 0
		}), two), nil, ""},
		{"short", rawBatch(withHeader(2, nil), two)[:HeaderSize+3], ErrShort, "short"},
		{"checksum", func() []byte { b := rawBatch(withHeader(2, nil), two); b[len(b)-1] ^= 1; return b }(), ErrChecksum, "checksum"},
		{"unknown codec", rawBatch(withHeader(2, func(h *Header) { h.Attributes = 5 }), two), ErrCorrupt, "unknown codec 5"},
		{"unknown attribute", rawBatch(withHeader(2, func(h *Header) { h.Attributes = 0x40 }), two), ErrCorrupt, "unknown attribute bits"},
		{"last offset delta", rawBatch(withHeader(2, func(h *Header) { h.LastOffsetDelta = 5 }), two), ErrCorrupt, "last offset delta 5"},
		{"negative base offset", rawBatch(withHeader(2, func(h *Header) { h.BaseOffset = -3 }), two), ErrCorrupt, "negative base offset"},
		{"producer id -2", rawBatch(withHeader(2, func(h *Header) { h.ProducerID = -2 }), two), ErrCorrupt, "producer id -2"},
		{"transactional without producer", rawBatch(withHeader(2, func(h *Header) { h.Attributes = TransactionalBit }), two), ErrCorrupt, "transactional batch without a producer id"},
		{"producer without sequence", rawBatch(withHeader(2, func(h *Header) { h.ProducerID, h.ProducerEpoch = 5, 0 }), two), ErrCorrupt, "base sequence -1"},
		{"offset delta", rawBatch(withHeader(2, nil), cat(rawRecord(-1, 0, 0, k, val), rawRecord(-1, 10, 5, k, val))), ErrCorrupt, "record 1: offset delta 5, want 1"},
		{"max timestamp", rawBatch(withHeader(2, func(h *Header) { h.MaxTimestamp = 99 }), two), ErrCorrupt, "max timestamp 99 but the largest record timestamp is 10"},
		{"trailing bytes", rawBatch(withHeader(2, nil), cat(two, []byte{1, 2, 3})), ErrCorrupt, "3 bytes after the last of 2 records"},
		{"fewer records than count", rawBatch(withHeader(3, nil), two), ErrCorrupt, "record 2: length: varint runs past the end"},
		{"count cannot fit", rawBatch(withHeader(9, nil), two), ErrCorrupt, "record count 9 cannot fit in 40 bytes"},
		{"record length too small", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), cat(v(3), []byte{0, 0, 0}, make([]byte, 8))), ErrCorrupt, "record 0: length 3 with"},
		{"record length past end", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), rawRecord(90, 0, 0, k, val)), ErrCorrupt, "record 0: length 90 with 19 bytes left"},
		{"record length past fields", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), cat(rawRecord(22, 0, 0, k, val), []byte{0, 0, 0})), ErrCorrupt, "record 0: length 22 but its fields end 19 bytes in"},
		{"offset delta varint overflow", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), cat(v(12), []byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x1f}, v(-1, -1, 0), make([]byte, 8))), ErrCorrupt, "offset delta: varint too long or overflows"},
		{"key length past end", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), cat(v(10), []byte{0}, v(0, 0, 100), make([]byte, 5))), ErrCorrupt, "record 0: key length 100 with 5 bytes left"},
		{"key length -2", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), cat(v(10), []byte{0}, v(0, 0, -2), make([]byte, 6))), ErrCorrupt, "key length -2"},
		{"value length past end", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), cat(v(10), []byte{0}, v(0, 0, -1, 9), make([]byte, 5))), ErrCorrupt, "value length 9 with 5 bytes left"},
		{"header count negative", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), rawRecord(-1, 0, 0, k, val, v(-1)...)), ErrCorrupt, "header count -1"},
		{"header count too large", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), rawRecord(-1, 0, 0, k, val, cat(v(1000), make([]byte, 10))...)), ErrCorrupt, "header count 1000 with 10 bytes left"},
		{"header key length negative", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), rawRecord(-1, 0, 0, k, val, v(1, -1, 0)...)), ErrCorrupt, "header 0 key length -1"},
		{"header value past end", rawBatch(withHeader(1, func(h *Header) { h.MaxTimestamp = 0 }), rawRecord(-1, 0, 0, k, val, v(1, 0, 7)...)), ErrCorrupt, "header value length 7 with 0 bytes left"},
		{"garbage gzip", rawBatch(withHeader(2, func(h *Header) { h.Attributes = int16(CodecGzip) }), two), ErrCorrupt, "gzip records"},
		{"garbage snappy", rawBatch(withHeader(2, func(h *Header) { h.Attributes = int16(CodecSnappy) }), two), ErrCorrupt, "snappy records"},
		{"garbage lz4", rawBatch(withHeader(2, func(h *Header) { h.Attributes = int16(CodecLZ4) }), two), ErrCorrupt, "lz4 records"},
		{"garbage zstd", rawBatch(withHeader(2, func(h *Header) { h.Attributes = int16(CodecZstd) }), two), ErrCorrupt, "zstd records"},
	}
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		comp, err := compress(c, 0, nil, two)
		if err != nil {
			t.Fatal(err)
		}
		attrs := func(h *Header) { h.Attributes = int16(c) }
		cases = append(cases,
			tc{c.String() + " valid", rawBatch(withHeader(2, attrs), comp), nil, ""},
			tc{c.String() + " truncated", rawBatch(withHeader(2, attrs), comp[:len(comp)-3]), ErrCorrupt, c.String() + " records"},
			tc{c.String() + " count cannot fit", rawBatch(withHeader(9, attrs), comp), ErrCorrupt, "record count 9 cannot fit in 40 bytes"},
		)
		if c != CodecSnappy { // a snappy block has no end marker: garbage after it is a bad xerial block or trailing block data
			cases = append(cases, tc{c.String() + " garbage after", rawBatch(withHeader(2, attrs), cat(comp, []byte("garbage"))), ErrCorrupt, c.String() + " records"})
		}
	}
	for _, tc := range cases {
		h, err := ValidateRecords(tc.b)
		switch {
		case tc.is == nil && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.is != nil && (!errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.error)):
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.is, tc.error)
		}
		if err == nil && h.Size() != len(tc.b) {
			t.Errorf("%s: header size %d of %d", tc.name, h.Size(), len(tc.b))
		}
		// Iteration agrees with ValidateRecords.
		var it Records
		if err := it.Reset(tc.b); err == nil {
			n := 0
			for it.Next() {
				n++
			}
			err = it.Err()
			if h := it.Header(); (err == nil) != (tc.is == nil) && h.IsDense() {
				t.Errorf("%s: iteration ended with %v after %d records; ValidateRecords said %v", tc.name, err, n, tc.is)
			}
		}
	}
}

// TestDecompressionBombs checks that records inflating past
// RecordsBytesMax are refused with ErrCorrupt for every codec, and that
// refusing them allocates a bounded amount, not the claimed size.
func TestDecompressionBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates several 64 MiB buffers")
	}
	zeros := make([]byte, RecordsBytesMax+1)
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		comp, err := compress(c, 0, nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		h := rawHeader(1)
		h.Attributes = int16(c)
		b := rawBatch(h, comp)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = ValidateRecords(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "inflates past") {
			t.Errorf("%s bomb (%d compressed bytes): %v", c, len(comp), err)
		}
		// Cumulative over the buffer's doublings: about twice the
		// bound, a little more when the race detector empties pools.
		alloc := after.TotalAlloc - before.TotalAlloc
		if alloc > 4*RecordsBytesMax {
			t.Errorf("%s bomb: refusing it allocated %d MiB", c, alloc>>20)
		}
		t.Logf("%s bomb: %d compressed bytes, refused after allocating %d MiB", c, len(comp), alloc>>20)
	}
	// Claims alone allocate nothing: a raw snappy block and a zstd frame
	// that declare 1 GiB.
	snappyClaim := appendVarintU(nil, 1<<30)
	zstdClaim := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0, 0, 0, 0x40} // magic, FCS flag 4 bytes, single segment, FCS = 1 GiB
	for _, tc := range []struct {
		c   Codec
		src []byte
	}{{CodecSnappy, snappyClaim}, {CodecZstd, zstdClaim}} {
		h := rawHeader(1)
		h.Attributes = int16(tc.c)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ValidateRecords(rawBatch(h, append(tc.src, make([]byte, 16)...)))
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s claim: %v", tc.c, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%s claim: allocated %d KiB", tc.c, alloc>>10)
		}
	}
}

// appendVarintU appends an unsigned LEB128 varint (snappy's length prefix).
func appendVarintU(b []byte, x uint64) []byte {
	return binary.AppendUvarint(b, x)
}

// TestValidateCheckedSkipsOnlyTheCRC: ValidateChecked accepts a batch
// whose CRC is wrong, which Validate refuses, and refuses every other
// fault Validate finds.
func TestValidateCheckedSkipsOnlyTheCRC(t *testing.T) {
	k, val := []byte("key"), []byte("0123456789")
	two := cat(rawRecord(-1, 0, 0, k, val), rawRecord(-1, 10, 1, k, val))
	good := func(mod func(*Header)) []byte {
		h := rawHeader(2)
		h.MaxTimestamp = 10
		if mod != nil {
			mod(&h)
		}
		return rawBatch(h, two)
	}
	flip := good(nil)
	flip[len(flip)-1] ^= 1
	for _, c := range []struct {
		name            string
		b               []byte
		validate, check error // nil: accepted
	}{
		{"valid", good(nil), nil, nil},
		{"checksum", flip, ErrChecksum, nil},
		{"short", good(nil)[:HeaderSize+3], ErrShort, ErrShort},
		{"unknown codec", good(func(h *Header) { h.Attributes = 5 }), ErrCorrupt, ErrCorrupt},
		{"last offset delta", good(func(h *Header) { h.LastOffsetDelta = 0 }), ErrCorrupt, ErrCorrupt},
		{"compacted: fewer records than offsets", good(func(h *Header) { h.LastOffsetDelta = 5 }), nil, nil},
		{"negative base offset", good(func(h *Header) { h.BaseOffset = -3 }), ErrCorrupt, ErrCorrupt},
	} {
		for _, f := range []struct {
			name string
			fn   func([]byte) (Header, error)
			want error
		}{{"Validate", Validate, c.validate}, {"ValidateChecked", ValidateChecked, c.check}} {
			_, err := f.fn(c.b)
			if (f.want == nil) != (err == nil) || (f.want != nil && !errors.Is(err, f.want)) {
				t.Errorf("%s: %s = %v, want %v", c.name, f.name, err, f.want)
			}
		}
	}
}

// TestValidateKeyedRecords: a compacted topic's produce refuses a record
// with a null key, naming it, and takes an empty key (a key, as on Kafka)
// and control batches; ValidateRecords takes all of them.
func TestValidateKeyedRecords(t *testing.T) {
	k, val := []byte("key"), []byte("value")
	head := func(count int32) Header { h := rawHeader(count); h.MaxTimestamp = 10; return h }
	cases := []struct {
		name string
		b    []byte
		is   error
		msg  string
	}{
		{"every record keyed", rawBatch(head(2), cat(rawRecord(-1, 0, 0, k, val), rawRecord(-1, 10, 1, k, nil))), nil, ""},
		{"empty key", rawBatch(head(1), rawRecord(-1, 10, 0, []byte{}, val)), nil, ""},
		{"second record keyless", rawBatch(head(2), cat(rawRecord(-1, 0, 0, k, val), rawRecord(-1, 10, 1, nil, val))), ErrKeyless, "record 1 (offset delta 1)"},
		{"control batch", rawBatch(func() Header {
			h := head(1)
			h.Attributes = ControlBit | TransactionalBit
			h.ProducerID, h.ProducerEpoch = 5, 0
			return h
		}(), rawRecord(-1, 10, 0, nil, val)), nil, ""},
	}
	for _, c := range cases {
		if _, err := ValidateRecords(c.b); err != nil {
			t.Errorf("%s: ValidateRecords: %v", c.name, err)
		}
		_, err := ValidateKeyedRecords(c.b)
		if !errors.Is(err, c.is) || c.is == nil && err != nil || c.is != nil && !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: ValidateKeyedRecords = %v, want %v (%q)", c.name, err, c.is, c.msg)
		}
	}
}
