package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
)

// TestCompressedFormats pins the framing each codec writes (see the
// choices in compress.go): these bytes are what Kafka consumers parse.
func TestCompressedFormats(t *testing.T) {
	src := bytes.Repeat([]byte("corestream record bytes "), 4000) // ~96 KiB: several blocks
	for _, tc := range []struct {
		c      Codec
		prefix []byte
	}{
		{CodecGzip, []byte{0x1f, 0x8b, 0x08}},                  // gzip member, deflate
		{CodecSnappy, xerialHeader[:]},                         // xerial magic, version 1, compatible 1
		{CodecLZ4, []byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x40}}, // frame magic; FLG v1 + independent blocks, no checksums; BD 64 KiB
		{CodecZstd, []byte{0x28, 0xb5, 0x2f, 0xfd}},            // zstd frame magic
	} {
		out, err := compress(tc.c, 0, nil, src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(out, tc.prefix) {
			t.Errorf("%s starts %x, want %x", tc.c, out[:min(len(out), 16)], tc.prefix)
		}
		back, err := decompress(tc.c, nil, out)
		if err != nil || !bytes.Equal(back, src) {
			t.Errorf("%s: round trip: %v", tc.c, err)
		}
	}
	// Xerial blocks hold at most 32 KiB of input each, as snappy-java writes.
	out := appendXerial(nil, src)
	blocks := 0
	for rest := out[xerialHeaderSize:]; len(rest) > 0; blocks++ {
		block, next, err := xerialBlock(rest)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := s2.DecodedLen(block); n > xerialBlockBytes {
			t.Fatalf("block of %d bytes", n)
		}
		rest = next
	}
	if want := (len(src) + xerialBlockBytes - 1) / xerialBlockBytes; blocks != want {
		t.Fatalf("%d xerial blocks, want %d", blocks, want)
	}
}

func TestSnappyReaders(t *testing.T) {
	src := bytes.Repeat([]byte("0123456789abcdef"), 5000)
	raw := s2.EncodeSnappy(nil, src)
	if got, err := decompress(CodecSnappy, nil, raw); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("raw block (librdkafka's form): %v", err)
	}
	// s2's own block format uses extensions snappy lacks; a Kafka consumer
	// could not read them, so neither do we.
	if _, err := decompress(CodecSnappy, nil, s2.Encode(nil, src)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("s2 block accepted as snappy: %v", err)
	}
	head := xerialHeader[:]
	for _, tc := range []struct {
		name string
		src  []byte
		ok   bool
	}{
		{"header only", head, true},
		{"zero-length block", cat(head, []byte{0, 0, 0, 0}), false},
		{"length past end", cat(head, binary.BigEndian.AppendUint32(nil, 100), raw[:10]), false},
		{"truncated length", cat(head, []byte{0, 0}), false},
		{"negative length", cat(head, []byte{0xff, 0xff, 0xff, 0xff}, raw), false},
		{"two blocks", cat(head, binary.BigEndian.AppendUint32(nil, uint32(len(raw))), raw,
			binary.BigEndian.AppendUint32(nil, uint32(len(raw))), raw), true},
	} {
		_, err := decompress(CodecSnappy, nil, tc.src)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
