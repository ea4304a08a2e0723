package batch

import (
	"testing"

	"pgregory.net/rapid"
)

// genRecord draws a record: null, empty or short keys and values, a few
// headers, and timestamps anywhere in int64 (deltas overflow and wrap).
func genRecord(t *rapid.T) Record {
	nullable := func(label string) []byte {
		if rapid.Bool().Draw(t, label+" null") {
			return nil
		}
		return rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, label)
	}
	r := Record{
		Timestamp: rapid.OneOf(rapid.Int64Range(1_600_000_000_000, 1_800_000_000_000), rapid.Int64()).Draw(t, "timestamp"),
		Key:       nullable("key"),
		Value:     nullable("value"),
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "headers"); i < n; i++ {
		r.Headers = append(r.Headers, RecordHeader{
			Key:   rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(t, "header key"),
			Value: nullable("header value"),
		})
	}
	return r
}

// TestPropertyRoundTrip: any records, any codec and level, any producer
// fields: the batch validates and reads back exactly.
func TestPropertyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := rapid.SampledFrom(allCodecs).Draw(t, "codec")
		maxLevel := 0
		for checkLevel(c, maxLevel+1) == nil {
			maxLevel++
		}
		opts := Options{Codec: c, Level: rapid.IntRange(0, maxLevel).Draw(t, "level")}
		if rapid.Bool().Draw(t, "idempotent") {
			opts.Idempotent = true
			opts.ProducerID = rapid.Int64Range(0, 1<<62).Draw(t, "producer id")
			opts.ProducerEpoch = rapid.Int16Range(0, 1<<14).Draw(t, "epoch")
			opts.BaseSequence = rapid.Int32Range(0, 1<<31-1).Draw(t, "sequence")
		}
		recs := rapid.SliceOfN(rapid.Custom(genRecord), 1, 40).Draw(t, "records")
		b := build(t, opts, recs)
		h, err := ValidateRecords(b)
		if err != nil {
			t.Fatal(err)
		}
		if opts.Idempotent && h.LastSequence() != IncrementSequence(opts.BaseSequence, int32(len(recs)-1)) {
			t.Fatalf("last sequence %d", h.LastSequence())
		}
		base := rapid.Int64Range(0, 1<<50).Draw(t, "base offset")
		SetBaseOffset(b, base)
		got, err := collect(b)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, got, withOffsets(recs, base))
	})
}
