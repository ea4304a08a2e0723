package batch

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestVarintEncoding(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want []byte
	}{
		{0, []byte{0x00}},
		{-1, []byte{0x01}},
		{1, []byte{0x02}},
		{-64, []byte{0x7f}},
		{63, []byte{0x7e}},
		{64, []byte{0x80, 0x01}},
		{300, []byte{0xd8, 0x04}},
		{math.MaxInt32, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}},
		{math.MinInt32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
		{math.MaxInt64, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{math.MinInt64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		got := appendVarint(nil, tc.v)
		if string(got) != string(tc.want) {
			t.Errorf("appendVarint(%d) = %x, want %x", tc.v, got, tc.want)
		}
		if n := varintSize(tc.v); n != len(tc.want) {
			t.Errorf("varintSize(%d) = %d, want %d", tc.v, n, len(tc.want))
		}
		if v, n := readVarlong(got, 0); v != tc.v || n != len(got) {
			t.Errorf("readVarlong(%x) = %d, %d", got, v, n)
		}
		if tc.v >= math.MinInt32 && tc.v <= math.MaxInt32 {
			if v, n := readVarint(got, 0); int64(v) != tc.v || n != len(got) {
				t.Errorf("readVarint(%x) = %d, %d", got, v, n)
			}
		}
	}
}

// TestVarintMatchesStdlib checks our zig-zag against encoding/binary's
// (the same mapping) over edges and a spread of values.
func TestVarintMatchesStdlib(t *testing.T) {
	vals := []int64{math.MinInt64, math.MaxInt64, math.MinInt32 - 1, math.MaxInt32 + 1}
	for s := 0; s < 63; s++ {
		vals = append(vals, 1<<s, -(1 << s), 1<<s-1, -(1<<s)+1)
	}
	for _, v := range vals {
		want := binary.AppendVarint(nil, v)
		if got := appendVarint(nil, v); string(got) != string(want) {
			t.Fatalf("%d: %x, want %x", v, got, want)
		}
		if got, n := readVarlong(want, 0); got != v || n != len(want) {
			t.Fatalf("readVarlong(%x) = %d, %d", want, got, n)
		}
	}
}

func TestVarintMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		n32  int // want n from readVarint (0 truncated, -1 bad)
		n64  int
	}{
		{"empty", nil, 0, 0},
		{"truncated", []byte{0x80}, 0, 0},
		{"truncated4", []byte{0x80, 0x80, 0x80, 0x80}, 0, 0},
		{"int32 overflow", []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, -1, 5},
		{"six bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, -1, 6},
		{"non-minimal zero", []byte{0x80, 0x00}, 2, 2},
		{"eleven bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, -1, -1},
		{"int64 overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03}, -1, -1},
	} {
		if _, n := readVarint(tc.b, 0); n != tc.n32 {
			t.Errorf("%s: readVarint n = %d, want %d", tc.name, n, tc.n32)
		}
		if _, n := readVarlong(tc.b, 0); n != tc.n64 {
			t.Errorf("%s: readVarlong n = %d, want %d", tc.name, n, tc.n64)
		}
	}
}
