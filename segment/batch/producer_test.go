package batch

import (
	"math"
	"testing"
)

func TestIncrementSequence(t *testing.T) {
	for _, tc := range []struct{ seq, n, want int32 }{
		{0, 0, 0},
		{0, 9, 9},
		{100, 1, 101},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 1, math.MaxInt32},
		{math.MaxInt32 - 1, 2, 0},
		{math.MaxInt32 - 2, 10, 7},
		{math.MaxInt32, math.MaxInt32, math.MaxInt32 - 1},
	} {
		if got := IncrementSequence(tc.seq, tc.n); got != tc.want {
			t.Errorf("IncrementSequence(%d, %d) = %d, want %d", tc.seq, tc.n, got, tc.want)
		}
	}
}

func TestLastSequence(t *testing.T) {
	for _, tc := range []struct {
		base, lastDelta, want int32
	}{
		{NoSequence, 5, NoSequence},
		{0, 0, 0},
		{10, 4, 14},
		{math.MaxInt32 - 1, 3, 1}, // MaxInt32-1, MaxInt32, 0, 1
	} {
		h := Header{BaseSequence: tc.base, LastOffsetDelta: tc.lastDelta}
		if got := h.LastSequence(); got != tc.want {
			t.Errorf("base %d delta %d: LastSequence %d, want %d", tc.base, tc.lastDelta, got, tc.want)
		}
	}
}

// TestRestamp checks the helpers that rewrite CRC-covered fields of a built
// batch: the result validates and reads back with the new values.
func TestRestamp(t *testing.T) {
	recs := []Record{{Timestamp: 5, Value: []byte("a")}, {Timestamp: 9, Value: []byte("b")}}
	b := build(t, Options{Codec: CodecGzip}, recs)
	SetProducerState(b, 77, 2, math.MaxInt32)
	h, err := ValidateRecords(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.ProducerID != 77 || h.ProducerEpoch != 2 || h.BaseSequence != math.MaxInt32 || h.LastSequence() != 0 {
		t.Fatalf("producer fields %d/%d/%d..%d", h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.LastSequence())
	}
	SetLogAppendTime(b, 1234)
	h, err = ValidateRecords(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.TimestampType() != LogAppendTime || h.MaxTimestamp != 1234 || h.Codec() != CodecGzip {
		t.Fatalf("after SetLogAppendTime: %+v", h)
	}
	got, err := collect(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if r.Timestamp != 1234 {
			t.Fatalf("record timestamp %d, want the append time", r.Timestamp)
		}
	}
	// Stamping the base offset and epoch needs no new CRC.
	SetBaseOffset(b, 1<<40)
	SetPartitionLeaderEpoch(b, 9)
	if h, err := ValidateRecords(b); err != nil || h.LastOffset() != 1<<40+1 || h.PartitionLeaderEpoch != 9 {
		t.Fatalf("after stamping: %+v, %v", h, err)
	}
}
