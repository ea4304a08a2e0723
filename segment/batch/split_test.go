package batch

import (
	"bytes"
	"errors"
	"testing"
)

// TestSplitTruncatedTails concatenates batches and cuts the stream at every
// length: Split must return exactly the whole batches before the cut and
// the rest as the tail, never an error.
func TestSplitTruncatedTails(t *testing.T) {
	var stream []byte
	var ends []int
	for i, c := range allCodecs {
		b := build(t, Options{Codec: c}, manyRecords(5+i))
		SetBaseOffset(b, int64(100*i))
		stream = append(stream, b...)
		ends = append(ends, len(stream))
	}
	for cut := 0; cut <= len(stream); cut++ {
		batches, tail, err := Split(nil, stream[:cut])
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		whole := 0
		for whole < len(ends) && ends[whole] <= cut {
			whole++
		}
		if len(batches) != whole {
			t.Fatalf("cut at %d: %d batches, want %d", cut, len(batches), whole)
		}
		start := 0
		if whole > 0 {
			start = ends[whole-1]
		}
		if !bytes.Equal(tail, stream[start:cut]) {
			t.Fatalf("cut at %d: tail of %d bytes, want %d", cut, len(tail), cut-start)
		}
		for i, b := range batches {
			if h, err := ValidateRecords(b); err != nil || h.BaseOffset != int64(100*i) {
				t.Fatalf("cut at %d: batch %d: %v", cut, i, err)
			}
			if cap(b) != len(b) {
				t.Fatalf("batch %d has spare capacity %d: appending would clobber the next", i, cap(b)-len(b))
			}
		}
	}
}

func TestCutCorrupt(t *testing.T) {
	good := build(t, Options{}, manyRecords(3))
	for _, tc := range []struct {
		name string
		mod  func(b []byte) []byte
		ok   bool
	}{
		{"whole", func(b []byte) []byte { return b }, true},
		{"length too small", func(b []byte) []byte { b[offBatchLength+3] = 10; return b }, false},
		{"length too large", func(b []byte) []byte { b[offBatchLength] = 0x7f; return b }, false},
		{"negative length", func(b []byte) []byte { b[offBatchLength] = 0xff; return b }, false},
		{"magic 1", func(b []byte) []byte { b[offMagic] = 1; return b }, false},
		{"bad length in a 12-byte stub", func(b []byte) []byte { b[offBatchLength] = 0x7f; return b[:LengthFieldEnd] }, false},
		{"11-byte stub", func(b []byte) []byte { b[offBatchLength] = 0x7f; return b[:LengthFieldEnd-1] }, true},
		{"magic unknown yet", func(b []byte) []byte { b[offMagic] = 1; return b[:offMagic] }, true},
	} {
		b := tc.mod(append([]byte(nil), good...))
		bt, rest, err := Cut(b)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && (bt != nil || len(rest) != len(b)) {
			t.Errorf("%s: on error Cut returned a batch or lost bytes", tc.name)
		}
	}
	// A corrupt header after good batches: Split returns those and stops.
	stream := append(append(append([]byte(nil), good...), good...), good...)
	stream[2*len(good)+offMagic] = 0
	batches, tail, err := Split(nil, stream)
	if !errors.Is(err, ErrCorrupt) || len(batches) != 2 || len(tail) != len(good) {
		t.Fatalf("Split: %d batches, tail %d, %v", len(batches), len(tail), err)
	}
}
