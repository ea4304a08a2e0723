package batch

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// TestRoundTrip builds each record set with each codec, validates the
// batch deeply and reads back exactly the records that went in.
func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 70<<10/16) // past one xerial or lz4 block
	sets := []struct {
		name string
		recs []Record
	}{
		{"null key and value", []Record{{Timestamp: 1}}},
		{"empty key and value", []Record{{Timestamp: 1, Key: []byte{}, Value: []byte{}}}},
		{"key only", []Record{{Timestamp: 1, Key: []byte("k")}}},
		{"value only", []Record{{Timestamp: 1, Value: []byte("v")}}},
		{"headers", []Record{{Timestamp: 5, Key: []byte("k"), Value: []byte("v"), Headers: []RecordHeader{
			{Key: []byte("a"), Value: []byte("1")}, {Key: []byte{}, Value: nil}, {Key: []byte("c"), Value: []byte{}}}}}},
		{"timestamps out of order", []Record{{Timestamp: 100}, {Timestamp: 50}, {Timestamp: 300}, {Timestamp: -7}}},
		{"negative and extreme timestamps", []Record{{Timestamp: -1}, {Timestamp: math.MaxInt64}, {Timestamp: math.MinInt64}}},
		{"large value", []Record{{Timestamp: 1, Key: []byte("big"), Value: big}}},
		{"many records", manyRecords(3000)},
		{"golden", goldenRecords()},
	}
	for _, c := range allCodecs {
		for _, set := range sets {
			t.Run(c.String()+"/"+set.name, func(t *testing.T) {
				b := build(t, Options{Codec: c}, set.recs)
				h, err := ValidateRecords(b)
				if err != nil {
					t.Fatal(err)
				}
				if h.Codec() != c || int(h.RecordCount) != len(set.recs) || h.Size() != len(b) {
					t.Fatalf("header %+v", h)
				}
				SetBaseOffset(b, 1000)
				SetPartitionLeaderEpoch(b, 7)
				got, err := collect(b)
				if err != nil {
					t.Fatal(err)
				}
				checkRecords(t, got, withOffsets(set.recs, 1000))
			})
		}
	}
}

// manyRecords returns n small records with varied shapes.
func manyRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Timestamp: 1_700_000_000_000 + int64(i%97), Key: []byte(strings.Repeat("k", i%20)),
			Value: []byte(strings.Repeat("value ", i%40))}
		if i%3 == 0 {
			recs[i].Headers = []RecordHeader{{Key: []byte("i"), Value: []byte{byte(i)}}}
		}
	}
	return recs
}

func TestBuilderHeaderFields(t *testing.T) {
	recs := []Record{{Timestamp: 20}, {Timestamp: 10}, {Timestamp: 30}}
	for _, tc := range []struct {
		name      string
		opts      Options
		pid       int64
		epoch     int16
		seq       int32
		attrs     int16
		timestamp TimestampType
	}{
		{"defaults", Options{}, -1, -1, -1, 0, CreateTime},
		{"idempotent", Options{Idempotent: true, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 100}, 42, 3, 100, 0, CreateTime},
		{"producer id 0", Options{Idempotent: true}, 0, 0, 0, 0, CreateTime},
		{"transactional zstd", Options{Codec: CodecZstd, Idempotent: true, Transactional: true, ProducerID: 9}, 9, 0, 0, TransactionalBit | int16(CodecZstd), CreateTime},
		{"log append time", Options{TimestampType: LogAppendTime}, -1, -1, -1, TimestampTypeBit, LogAppendTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := build(t, tc.opts, recs)
			h, err := ValidateRecords(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.ProducerID != tc.pid || h.ProducerEpoch != tc.epoch || h.BaseSequence != tc.seq {
				t.Errorf("producer %d/%d/%d, want %d/%d/%d", h.ProducerID, h.ProducerEpoch, h.BaseSequence, tc.pid, tc.epoch, tc.seq)
			}
			if h.Attributes != tc.attrs || h.TimestampType() != tc.timestamp {
				t.Errorf("attributes %#x (%s), want %#x", h.Attributes, h.TimestampType(), tc.attrs)
			}
			if h.BaseOffset != 0 || h.PartitionLeaderEpoch != NoPartitionLeaderEpoch || h.Magic != Magic {
				t.Errorf("base offset %d, leader epoch %d, magic %d", h.BaseOffset, h.PartitionLeaderEpoch, h.Magic)
			}
			if h.BaseTimestamp != 20 || h.MaxTimestamp != 30 || h.LastOffsetDelta != 2 || h.RecordCount != 3 {
				t.Errorf("timestamps %d/%d, last delta %d, count %d", h.BaseTimestamp, h.MaxTimestamp, h.LastOffsetDelta, h.RecordCount)
			}
		})
	}
}

func TestNewBuilderOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"unknown codec", Options{Codec: 5}, false},
		{"negative codec", Options{Codec: -1}, false},
		{"gzip 9", Options{Codec: CodecGzip, Level: 9}, true},
		{"gzip 10", Options{Codec: CodecGzip, Level: 10}, false},
		{"lz4 9", Options{Codec: CodecLZ4, Level: 9}, true},
		{"zstd 22", Options{Codec: CodecZstd, Level: 22}, true},
		{"zstd 23", Options{Codec: CodecZstd, Level: 23}, false},
		{"snappy 1", Options{Codec: CodecSnappy, Level: 1}, false},
		{"negative level", Options{Codec: CodecGzip, Level: -1}, false},
		{"timestamp type 2", Options{TimestampType: 2}, false},
		{"transactional, not idempotent", Options{Transactional: true}, false},
	} {
		_, err := NewBuilder(tc.opts)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrOptions)) {
			t.Errorf("%s: err %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestBuilderLevels builds with every level of every codec and reads back.
func TestBuilderLevels(t *testing.T) {
	recs := manyRecords(50)
	for _, c := range []Codec{CodecGzip, CodecLZ4, CodecZstd} {
		for level := 0; checkLevel(c, level) == nil; level++ {
			got, err := collect(build(t, Options{Codec: c, Level: level}, recs))
			if err != nil {
				t.Fatalf("%s level %d: %v", c, level, err)
			}
			checkRecords(t, got, withOffsets(recs, 0))
		}
	}
}

// TestBuilderReuse builds several batches with one Builder: each batch
// stands alone, and SetProducer applies from the next Build on.
func TestBuilderReuse(t *testing.T) {
	for _, c := range allCodecs {
		bl, err := NewBuilder(Options{Codec: c, Idempotent: true, ProducerID: 7})
		if err != nil {
			t.Fatal(err)
		}
		seq := int32(0)
		for round := 0; round < 4; round++ {
			recs := manyRecords(10 + round*30)
			bl.SetProducer(7, 1, seq)
			for _, r := range recs {
				if err := bl.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			if bl.Len() != len(recs) {
				t.Fatalf("Len %d, want %d", bl.Len(), len(recs))
			}
			var b []byte
			if round%2 == 0 {
				b, err = bl.Build()
			} else {
				b, err = bl.BuildAppend([]byte("prefix"))
				if !bytes.HasPrefix(b, []byte("prefix")) {
					t.Fatal("BuildAppend lost its prefix")
				}
				b = b[len("prefix"):]
			}
			if err != nil {
				t.Fatal(err)
			}
			if bl.Len() != 0 || bl.EstimatedBytes() != HeaderSize {
				t.Fatalf("not reset: Len %d EstimatedBytes %d", bl.Len(), bl.EstimatedBytes())
			}
			h, err := ValidateRecords(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.BaseSequence != seq || h.LastSequence() != seq+int32(len(recs))-1 {
				t.Fatalf("sequences %d..%d", h.BaseSequence, h.LastSequence())
			}
			got, err := collect(b)
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, withOffsets(recs, 0))
			seq = IncrementSequence(h.LastSequence(), 1)
		}
	}
}

// TestEstimatedBytes checks that EstimatedBytes is exact for CodecNone
// and that RecordBytes predicts each Append's growth.
func TestEstimatedBytes(t *testing.T) {
	bl, _ := NewBuilder(Options{})
	for _, r := range goldenRecords() {
		before, predicted := bl.EstimatedBytes(), bl.RecordBytes(&r)
		if err := bl.Append(r); err != nil {
			t.Fatal(err)
		}
		if got := bl.EstimatedBytes() - before; got != predicted {
			t.Fatalf("record grew the batch by %d, RecordBytes said %d", got, predicted)
		}
	}
	want := bl.EstimatedBytes()
	b, err := bl.Build()
	if err != nil || len(b) != want {
		t.Fatalf("built %d bytes (%v), estimated %d", len(b), err, want)
	}
}

func TestBuildEmpty(t *testing.T) {
	bl, _ := NewBuilder(Options{Codec: CodecLZ4})
	if _, err := bl.Build(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Build of nothing: %v, want ErrEmpty", err)
	}
	dst := []byte("keep")
	if out, err := bl.BuildAppend(dst); !errors.Is(err, ErrEmpty) || string(out) != "keep" {
		t.Fatalf("BuildAppend of nothing: %q, %v", out, err)
	}
}

// TestMaxSizes fills an uncompressed batch to exactly BatchBytesMax and a
// compressed one to exactly RecordsBytesMax of records, and checks that
// one more byte is refused with ErrTooLarge, leaving the batch intact.
func TestMaxSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100+ MiB")
	}
	for _, tc := range []struct {
		codec    Codec
		recsMax  int
		batchMax int
	}{
		{CodecNone, BatchBytesMax - HeaderSize, BatchBytesMax},
		{CodecLZ4, RecordsBytesMax, BatchBytesMax},
	} {
		bl, _ := NewBuilder(Options{Codec: tc.codec})
		// One record with a null key, no headers: length varint (4 bytes
		// for these sizes), attributes, ts delta, offset delta, key
		// length, value length varint (4 bytes), header count.
		valueLen := tc.recsMax - 4 - 5 - 4
		r := Record{Timestamp: 1, Value: make([]byte, valueLen+1)}
		if err := bl.Append(r); !errors.Is(err, ErrTooLarge) || bl.Len() != 0 {
			t.Fatalf("%s: a record one byte too large: %v, Len %d", tc.codec, err, bl.Len())
		}
		r.Value = r.Value[:valueLen]
		if err := bl.Append(r); err != nil {
			t.Fatalf("%s: the largest record: %v", tc.codec, err)
		}
		if bl.EstimatedBytes() != HeaderSize+tc.recsMax {
			t.Fatalf("%s: EstimatedBytes %d, want %d", tc.codec, bl.EstimatedBytes(), HeaderSize+tc.recsMax)
		}
		if err := bl.AppendKV(1, nil, nil); !errors.Is(err, ErrTooLarge) || bl.Len() != 1 {
			t.Fatalf("%s: a record past a full batch: %v, Len %d", tc.codec, err, bl.Len())
		}
		b, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > tc.batchMax {
			t.Fatalf("%s: %d bytes", tc.codec, len(b))
		}
		got, err := collect(b)
		if err != nil || len(got) != 1 || len(got[0].Value) != valueLen {
			t.Fatalf("%s: read back %d records: %v", tc.codec, len(got), err)
		}
	}
}

// TestBuildTooLargeCompressed: incompressible records past BatchBytesMax
// are refused at Build, and the records are kept.
func TestBuildTooLargeCompressed(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 40 MiB")
	}
	bl, _ := NewBuilder(Options{Codec: CodecSnappy})
	noise := make([]byte, 1<<20)
	x := uint64(1)
	for i := range noise {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		noise[i] = byte(x)
	}
	for i := 0; i < 17; i++ {
		if err := bl.AppendKV(1, nil, noise); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bl.Build(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Build: %v, want ErrTooLarge", err)
	}
	if bl.Len() != 17 {
		t.Fatalf("Len %d after a failed Build, want 17", bl.Len())
	}
}

// TestBuilderAllocs checks the hot path: once warm, appending records and
// building into a reused buffer allocate nothing for CodecNone, and Build
// allocates just the batch.
func TestBuilderAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	bl, _ := NewBuilder(Options{})
	val := make([]byte, 1024)
	hdrs := []RecordHeader{{Key: []byte("h"), Value: []byte("v")}}
	var dst []byte
	run := func() {
		for i := 0; i < 64; i++ {
			_ = bl.Append(Record{Timestamp: int64(i), Key: val[:16], Value: val, Headers: hdrs})
		}
		dst, _ = bl.BuildAppend(dst[:0])
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Errorf("append+BuildAppend: %.1f allocs per batch, want 0", n)
	}
	n := testing.AllocsPerRun(20, func() {
		for i := 0; i < 64; i++ {
			_ = bl.AppendKV(int64(i), nil, val)
		}
		_, _ = bl.Build()
	})
	if n != 1 {
		t.Errorf("append+Build: %.1f allocs per batch, want 1", n)
	}
}
