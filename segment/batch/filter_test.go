package batch

import (
	"fmt"
	"testing"
)

// Filter keeps the chosen records at their offsets with the batch's
// header (base offset, last offset delta, max timestamp, producer), for
// every codec; the result validates and iterates, a batch keeping
// nothing is an empty batch of the same offsets, and ValidateRecords (the
// produce path) still refuses such a non-dense batch.
func TestFilterKeepsOffsetsAndHeader(t *testing.T) {
	for _, c := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		bl, err := NewBuilder(Options{Codec: c})
		if err != nil {
			t.Fatal(err)
		}
		bl.SetProducer(7, 1, 100)
		for i := range 6 {
			var v []byte
			if i != 3 {
				v = []byte(fmt.Sprint("v", i))
			}
			if err := bl.Append(Record{Timestamp: 1000 + int64(i), Key: []byte{byte('a' + i%2)}, Value: v}); err != nil {
				t.Fatal(err)
			}
		}
		b, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		SetBaseOffset(b, 40)
		orig, _ := ReadHeader(b)
		for _, tc := range []struct {
			name string
			keep func(*Record) bool
			want []int64
		}{
			{"all", func(*Record) bool { return true }, []int64{40, 41, 42, 43, 44, 45}},
			{"odd", func(r *Record) bool { return r.Offset%2 == 1 }, []int64{41, 43, 45}},
			{"last only", func(r *Record) bool { return r.Offset == 45 }, []int64{45}},
			{"first only", func(r *Record) bool { return r.Offset == 40 }, []int64{40}},
			{"none", func(*Record) bool { return false }, nil},
		} {
			out, kept, err := Filter(nil, b, tc.keep)
			if err != nil || kept != len(tc.want) {
				t.Fatalf("%s %s: kept %d, %v", c, tc.name, kept, err)
			}
			h, err := Validate(out)
			if err != nil {
				t.Fatalf("%s %s: %v", c, tc.name, err)
			}
			if h.BaseOffset != 40 || h.LastOffsetDelta != 5 || h.MaxTimestamp != orig.MaxTimestamp || h.BaseTimestamp != orig.BaseTimestamp ||
				h.ProducerID != 7 || h.BaseSequence != 100 || h.LastSequence() != orig.LastSequence() || int(h.RecordCount) != kept {
				t.Fatalf("%s %s: header %+v, from %+v", c, tc.name, h, orig)
			}
			var it Records
			if err := it.Reset(out); err != nil {
				t.Fatal(err)
			}
			var got []int64
			for it.Next() {
				r := it.Record()
				got = append(got, r.Offset)
				if want := 1000 + r.Offset - 40; r.Timestamp != want || (r.Offset == 43) != (r.Value == nil) {
					t.Fatalf("%s %s: record %d timestamp %d value %q", c, tc.name, r.Offset, r.Timestamp, r.Value)
				}
			}
			if it.Err() != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("%s %s: offsets %v (%v), want %v", c, tc.name, got, it.Err(), tc.want)
			}
			if _, err := ValidateRecords(out); (err == nil) != (kept == 6) {
				t.Fatalf("%s %s: ValidateRecords %v", c, tc.name, err)
			}
		}
	}
}

// A compacted batch's records must still come in increasing offsets
// within the batch's range.
func TestCompactedBatchOffsetDeltasChecked(t *testing.T) {
	k, val := []byte("key"), []byte("0123456789")
	mk := func(d0, d1 int32) []byte {
		h := rawHeader(2)
		h.MaxTimestamp, h.LastOffsetDelta = 10, 4
		return rawBatch(h, cat(rawRecord(-1, 0, d0, k, val), rawRecord(-1, 10, d1, k, val)))
	}
	for _, tc := range []struct {
		d0, d1 int32
		ok     bool
	}{{0, 4, true}, {1, 3, true}, {2, 2, false}, {3, 1, false}, {0, 5, false}} {
		var it Records
		n := 0
		if err := it.Reset(mk(tc.d0, tc.d1)); err == nil {
			for it.Next() {
				n++
			}
		}
		if (it.Err() == nil) != tc.ok {
			t.Errorf("deltas %d, %d: %v after %d records", tc.d0, tc.d1, it.Err(), n)
		}
	}
}
