package bench

import (
	"bytes"
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []header{
		{},
		{sentNs: 123456789, producer: 3, seq: 42},
		{sentNs: -1, producer: 0xffff, seq: seqMax},
	} {
		b := make([]byte, headerBytes+3)
		encodeHeader(b, h)
		got, err := decodeHeader(b)
		if err != nil || got != h {
			t.Errorf("round trip of %+v: %+v, %v", h, got, err)
		}
	}
	if _, err := decodeHeader(make([]byte, headerBytes-1)); !errors.Is(err, errShortPayload) {
		t.Fatalf("short payload: %v", err)
	}
}

func TestNewValueIsSeededAndSized(t *testing.T) {
	a, b, c := newValue(1000, 1, 0), newValue(1000, 1, 0), newValue(1000, 1, 1)
	if len(a) != 1000 || !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatal("values must have the asked size, repeat per seed and producer, and differ between producers")
	}
	if !bytes.Equal(a[:headerBytes], make([]byte, headerBytes)) {
		t.Fatal("the header bytes are left for encodeHeader")
	}
	if v := newValue(headerBytes, 1, 0); len(v) != headerBytes {
		t.Fatalf("smallest value has %d bytes", len(v))
	}
}

// FuzzDecodeHeader: any input decodes or fails cleanly, and what decodes
// encodes back to the same 16 bytes.
func FuzzDecodeHeader(f *testing.F) {
	valid := make([]byte, headerBytes)
	encodeHeader(valid, header{sentNs: 1e9, producer: 2, seq: 3})
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, messageBytesMax))
	f.Add(append(append([]byte(nil), valid...), "garbage"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			if len(b) >= headerBytes {
				t.Fatalf("%d bytes refused: %v", len(b), err)
			}
			return
		}
		out := make([]byte, headerBytes)
		encodeHeader(out, h)
		if !bytes.Equal(out, b[:headerBytes]) {
			t.Fatalf("re-encoded %x, read %x", out, b[:headerBytes])
		}
	})
}
