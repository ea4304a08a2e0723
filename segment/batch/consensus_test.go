package batch

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestConsensusBatchZeroWidth(t *testing.T) {
	for _, key := range [][]byte{ConsensusKeyNoop, ConsensusKeyConf} {
		b := BuildConsensus(key, []byte("conf"), 1000, true)
		SetBaseOffset(b, 7)
		h, err := ValidateRecords(b)
		if err != nil {
			t.Fatalf("key %x: %v", key, err)
		}
		if !h.IsZeroWidth() || h.LastOffset() != 6 || h.RecordCount != 1 {
			t.Fatalf("key %x: zero-width %v, last %d, records %d; want true, 6, 1", key, h.IsZeroWidth(), h.LastOffset(), h.RecordCount)
		}
		one := BuildConsensus(key, nil, 1000, false)
		if h, err := ValidateRecords(one); err != nil || h.IsZeroWidth() || h.LastOffsetDelta != 0 {
			t.Fatalf("key %x, one offset: %v, zero-width %v", key, err, h.IsZeroWidth())
		}
	}
}

// withDelta rewrites b's last offset delta (and CRC, so that only the
// rule under test can refuse it).
func withDelta(b []byte, delta int32) []byte {
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(delta))
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b))
	return b
}

func TestZeroWidthOnlyForConsensusBatches(t *testing.T) {
	build := func(control bool, keys ...[]byte) []byte {
		bl, err := NewBuilder(Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if err := bl.AppendKV(1000, k, nil); err != nil {
				t.Fatal(err)
			}
		}
		out, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		if control {
			be := binary.BigEndian
			be.PutUint16(out[offAttributes:], be.Uint16(out[offAttributes:])|ControlBit)
		}
		return out
	}
	commitMarker := []byte{0, 0, 0, 1} // Kafka's COMMIT: takes an offset
	cases := map[string][]byte{
		"data batch":                    withDelta(build(false, []byte("k")), -1),
		"transaction marker":            withDelta(build(true, commitMarker), -1),
		"two-record control batch":      withDelta(build(true, ConsensusKeyNoop, ConsensusKeyNoop), -1),
		"delta -2 on a consensus batch": withDelta(BuildConsensus(ConsensusKeyNoop, nil, 1, false), -2),
	}
	for name, b := range cases {
		if _, err := ValidateRecords(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s with a negative last offset delta: %v, want ErrCorrupt", name, err)
		}
	}
}
