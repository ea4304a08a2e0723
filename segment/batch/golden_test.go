package batch

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The goldens in testdata/golden are batches written by two independent
// Kafka client implementations, each producing to franz-go's in-process
// fake broker (kfake), which captured the exact bytes of each Produce
// request:
//
//   - franz-go v1.22.3's producer (kgo, Go), producing goldenRecords;
//   - librdkafka 2.0.2 (C), through Debian's kcat 1.7.1 CLI, producing the
//     lines of kcatRecords (its timestamps are the wall clock of that run).
//
// The throwaway program that wrote them is testdata/golden/gengolden.go.txt;
// it ran once, in its own module outside this repository (franz-go is not a
// dependency of ours), as its header comment says. Each file is the hex of
// one batch, 32 bytes a line.
//
//	franz-go-<codec>.hex       idempotent producer (producer id from kfake,
//	                           epoch 0, base sequence 0)
//	franz-go-none-noidem.hex   idempotence disabled (producer id and epoch
//	                           -1, base sequence 0)
//	librdkafka-<codec>.hex     idempotent producer; leader epoch 0

// goldenRecords is the record set of the goldens; it mirrors
// goldenRecords in gengolden.go.txt (keep the two in step).
func goldenRecords() []Record {
	const n = 150
	base := int64(1_700_000_000_000)
	out := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		var r Record
		switch i % 10 {
		case 0:
			r.Key = nil
		case 1:
			r.Key = []byte{}
		default:
			r.Key = []byte(fmt.Sprintf("key-%03d", i))
		}
		switch {
		case i%7 == 0:
			r.Value = nil
		case i%7 == 1:
			r.Value = []byte{}
		case i%13 == 5:
			r.Value = []byte(strings.Repeat(fmt.Sprintf("big-%d;", i), 40))
		default:
			r.Value = []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%50)))
		}
		switch i % 5 {
		case 1:
			r.Headers = []RecordHeader{{Key: []byte("h1"), Value: []byte("v1")}}
		case 2:
			r.Headers = []RecordHeader{{Key: []byte{}, Value: []byte{}}, {Key: []byte("trace"), Value: nil}}
		case 3:
			r.Headers = []RecordHeader{{Key: []byte("a"), Value: []byte("b")}, {Key: []byte("c"), Value: []byte("d")},
				{Key: []byte("e"), Value: []byte(strings.Repeat("E", 300))}}
		}
		r.Timestamp = base + int64(i*37%101) - 50
		out = append(out, r)
	}
	return out
}

// kcatRecords is the record set of the librdkafka goldens: the lines of
// kcatLines in gengolden.go.txt ("key:value", an empty value sent as null
// by kcat -Z), each with the headers given by -H h1=v1 -H trace=.
func kcatRecords() []Record {
	recs := make([]Record, 100)
	for i := range recs {
		r := Record{Key: []byte(fmt.Sprintf("key-%03d", i)),
			Headers: []RecordHeader{{Key: []byte("h1"), Value: []byte("v1")}, {Key: []byte("trace"), Value: []byte{}}}}
		if i%9 != 4 {
			r.Value = []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("y", i%60)))
		}
		r.Offset = int64(i)
		recs[i] = r
	}
	return recs
}

// TestGoldenLibrdkafka checks that we accept and decode what librdkafka
// wrote with each codec (the timestamps are checked by ValidateRecords
// against MaxTimestamp, and here only against the batch's range).
func TestGoldenLibrdkafka(t *testing.T) {
	for _, c := range allCodecs {
		b := readGolden(t, "librdkafka-"+c.String()+".hex")
		h, err := ValidateRecords(b)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if h.Codec() != c || !h.HasProducerID() {
			t.Fatalf("%s: header %+v", c, h)
		}
		got, err := collect(b)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		want := kcatRecords()
		for i := range got {
			if got[i].Timestamp < h.BaseTimestamp || got[i].Timestamp > h.MaxTimestamp {
				t.Fatalf("%s: record %d timestamp %d outside [%d, %d]", c, i, got[i].Timestamp, h.BaseTimestamp, h.MaxTimestamp)
			}
			want[i].Timestamp = got[i].Timestamp
		}
		checkRecords(t, got, want)
	}
	// Our encoding of the same records is byte-identical to librdkafka's
	// uncompressed batch, given its header conventions (leader epoch 0).
	golden := readGolden(t, "librdkafka-none.hex")
	h, _ := ReadHeader(golden)
	got, _ := collect(golden)
	ours := build(t, Options{Idempotent: true, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence}, got)
	SetPartitionLeaderEpoch(ours, h.PartitionLeaderEpoch)
	if !bytes.Equal(ours, golden) {
		t.Fatalf("our encoding differs from librdkafka's at byte %d of %d", firstDiff(ours, golden), len(golden))
	}
}

// readGolden returns the batch in testdata/golden/name.
func readGolden(tb testing.TB, name string) []byte {
	tb.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		tb.Fatal(err)
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(text)), ""))
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return b
}

// TestGoldenDecode checks that we accept and decode, record for record,
// what a real Kafka client wrote with each codec.
func TestGoldenDecode(t *testing.T) {
	want := withOffsets(goldenRecords(), 0)
	for _, tc := range []struct {
		file  string
		codec Codec
		idem  bool
	}{
		{"franz-go-none.hex", CodecNone, true},
		{"franz-go-none-noidem.hex", CodecNone, false},
		{"franz-go-gzip.hex", CodecGzip, true},
		{"franz-go-snappy.hex", CodecSnappy, true},
		{"franz-go-lz4.hex", CodecLZ4, true},
		{"franz-go-zstd.hex", CodecZstd, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := readGolden(t, tc.file)
			h, err := ValidateRecords(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Codec() != tc.codec || h.HasProducerID() != tc.idem || int(h.RecordCount) != len(want) {
				t.Fatalf("header %+v: codec %s, want %s; idempotent %v, want %v", h, h.Codec(), tc.codec, h.HasProducerID(), tc.idem)
			}
			if h.PartitionLeaderEpoch != NoPartitionLeaderEpoch || h.BaseOffset != 0 {
				t.Fatalf("leader epoch %d base offset %d, want -1 and 0", h.PartitionLeaderEpoch, h.BaseOffset)
			}
			got, err := collect(b)
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, want)
		})
	}
}

// TestGoldenEncodeIdentical checks that our Builder writes, byte for byte,
// the uncompressed batches the Kafka client wrote for the same records, and
// that our compressed batches of them decode to the same records.
func TestGoldenEncodeIdentical(t *testing.T) {
	for _, file := range []string{"franz-go-none.hex", "franz-go-none-noidem.hex"} {
		golden := readGolden(t, file)
		h, err := ReadHeader(golden)
		if err != nil {
			t.Fatal(err)
		}
		// franz-go with idempotence off writes producer id and epoch -1
		// but base sequence 0 (Kafka's Java client and our default write
		// -1), so take the producer fields from the golden's header.
		opts := Options{Idempotent: true, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence}
		ours := build(t, opts, goldenRecords())
		if !bytes.Equal(ours, golden) {
			t.Fatalf("%s: our encoding differs at byte %d of %d", file, firstDiff(ours, golden), len(golden))
		}
	}
	for c := CodecGzip; c <= CodecZstd; c++ {
		golden := readGolden(t, "franz-go-"+c.String()+".hex")
		h, _ := ReadHeader(golden)
		ours := build(t, Options{Codec: c, Idempotent: true, ProducerID: h.ProducerID}, goldenRecords())
		got, err := collect(ours)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		checkRecords(t, got, withOffsets(goldenRecords(), 0))
		t.Logf("%s: franz-go %d bytes, ours %d bytes, identical %v", c, len(golden), len(ours), bytes.Equal(ours[HeaderSize:], golden[HeaderSize:]))
	}
}

// firstDiff is the index of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
