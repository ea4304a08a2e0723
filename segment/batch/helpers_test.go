package batch

import (
	"bytes"
	"fmt"
)

// collect iterates over b and returns deep copies of its records.
func collect(b []byte) ([]Record, error) {
	var it Records
	if err := it.Reset(b); err != nil {
		return nil, err
	}
	var out []Record
	for it.Next() {
		out = append(out, it.Record().Clone())
	}
	return out, it.Err()
}

// fataler is what the helpers need of a test: a *testing.T, *testing.B,
// *testing.F or *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// build appends recs to a new Builder for opts and builds the batch.
func build(tb fataler, opts Options, recs []Record) []byte {
	if h, ok := tb.(interface{ Helper() }); ok {
		h.Helper()
	}
	bl, err := NewBuilder(opts)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range recs {
		if err := bl.Append(r); err != nil {
			tb.Fatal(err)
		}
	}
	b, err := bl.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// nullableEqual compares two nullable byte fields, null distinct from empty.
func nullableEqual(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// recordDiff describes the first difference between got and want (offsets
// and timestamps included), or returns "".
func recordDiff(got, want Record) string {
	switch {
	case got.Offset != want.Offset:
		return fmt.Sprintf("offset %d, want %d", got.Offset, want.Offset)
	case got.Timestamp != want.Timestamp:
		return fmt.Sprintf("timestamp %d, want %d", got.Timestamp, want.Timestamp)
	case !nullableEqual(got.Key, want.Key):
		return fmt.Sprintf("key %q (nil %v), want %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !nullableEqual(got.Value, want.Value):
		return fmt.Sprintf("value %q (nil %v), want %q (nil %v)", got.Value, got.Value == nil, want.Value, want.Value == nil)
	case len(got.Headers) != len(want.Headers):
		return fmt.Sprintf("%d headers, want %d", len(got.Headers), len(want.Headers))
	}
	for i := range got.Headers {
		g, w := got.Headers[i], want.Headers[i]
		if !bytes.Equal(g.Key, w.Key) || !nullableEqual(g.Value, w.Value) {
			return fmt.Sprintf("header %d = %q:%q (nil %v), want %q:%q (nil %v)", i, g.Key, g.Value, g.Value == nil, w.Key, w.Value, w.Value == nil)
		}
	}
	return ""
}

// checkRecords fails tb unless got equals want record by record.
func checkRecords(tb fataler, got, want []Record) {
	if h, ok := tb.(interface{ Helper() }); ok {
		h.Helper()
	}
	if len(got) != len(want) {
		tb.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if d := recordDiff(got[i], want[i]); d != "" {
			tb.Fatalf("record %d: %s", i, d)
		}
	}
}

// withOffsets returns recs with Offset set to base+i, as the iterator reports them.
func withOffsets(recs []Record, base int64) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		r.Offset = base + int64(i)
		out[i] = r
	}
	return out
}
