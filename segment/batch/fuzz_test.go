package batch

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// fuzzSeeds are the seed batches: empty input, a header that declares the
// largest length, a valid batch of each codec (and the Kafka client's
// raw-snappy golden), each followed by garbage, and each truncated.
func fuzzSeeds(tb testing.TB) [][]byte {
	maxHeader := make([]byte, HeaderSize)
	binary.BigEndian.PutUint32(maxHeader[offBatchLength:], BatchBytesMax-LengthFieldEnd)
	maxHeader[offMagic] = Magic
	seeds := [][]byte{nil, {}, maxHeader}
	// Small seeds keep the fuzzer fast (it minimizes every new input);
	// the snappy golden is the raw-block form, which we do not write.
	valid := [][]byte{readGolden(tb, "franz-go-snappy.hex")}
	for _, c := range allCodecs {
		valid = append(valid, build(tb, Options{Codec: c}, goldenRecords()[:12]))
	}
	for _, b := range valid {
		seeds = append(seeds, b,
			append(append([]byte(nil), b...), "garbage after the batch"...),
			b[:len(b)-1], b[:HeaderSize+len(b)/3])
	}
	return seeds
}

// FuzzValidate feeds arbitrary bytes to ValidateRecords. It must never
// panic or over-allocate; whatever it accepts must iterate cleanly to
// exactly RecordCount records, and those records, built again, must form
// a batch that validates and reads back the same.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ValidateRecords(b)
		if err != nil {
			return
		}
		recs, err := collect(b)
		if err != nil {
			t.Fatalf("ValidateRecords accepted a batch whose iteration fails: %v", err)
		}
		if len(recs) != int(h.RecordCount) {
			t.Fatalf("%d records, header says %d", len(recs), h.RecordCount)
		}
		size := 0
		for _, r := range recs {
			size += len(r.Key) + len(r.Value)
		}
		if size > 1<<20 {
			return // rebuilding megabytes per input would slow the fuzzer down
		}
		bl, err := NewBuilder(Options{Codec: h.Codec()})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := bl.Append(r); err != nil {
				t.Fatalf("rebuild: %v", err)
			}
		}
		again, err := bl.Build()
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		SetBaseOffset(again, h.BaseOffset)
		got, err := collect(again)
		if err != nil {
			t.Fatalf("rebuilt batch: %v", err)
		}
		checkRecords(t, got, recs)
		if h.Attributes == 0 { // uncompressed, CreateTime, no flags
			// Our encoding is canonical; a canonical input is rebuilt
			// byte for byte (non-minimal varints or record attributes
			// need not be).
			if canonicalRecords(b) && !bytes.Equal(again[HeaderSize:], b[HeaderSize:]) {
				t.Fatalf("canonical records re-encode differently")
			}
		}
	})
}

// canonicalRecords reports whether the records of the valid uncompressed
// batch b are encoded as the Builder encodes them: minimal varints, zero
// attributes, and timestamp deltas taken from the first record's timestamp
// (a batch may declare an earlier base timestamp). It re-encodes each
// record on its own to find out.
func canonicalRecords(b []byte) bool {
	var it Records
	if it.Reset(b) != nil {
		return false
	}
	h := it.Header()
	var out []byte
	first := int64(0)
	for it.Next() {
		r := it.Record()
		if r.Attributes != 0 {
			return false
		}
		if r.Offset == h.BaseOffset {
			first = r.Timestamp
		}
		ts := r.Timestamp - first
		off := int32(r.Offset - h.BaseOffset)
		out = appendRecord(out, r, recordBodySize(r, ts, off), ts, off)
	}
	return bytes.Equal(out, b[HeaderSize:])
}

// FuzzRecords fuzzes the records section behind a well-formed header (the
// fuzzer could not find a CRC by itself): the codec, timestamp type, record
// count and max timestamp come from the fuzzer and the CRC is fixed up.
// Iteration must never panic, and must succeed exactly when
// ValidateRecords does.
func FuzzRecords(f *testing.F) {
	for _, c := range allCodecs {
		b := build(f, Options{Codec: c}, goldenRecords()[:12])
		h, _ := ReadHeader(b)
		f.Add(uint8(c), uint16(h.RecordCount), h.MaxTimestamp, b[HeaderSize:])
		f.Add(uint8(c), uint16(h.RecordCount), h.MaxTimestamp, append(append([]byte(nil), b[HeaderSize:]...), 0, 1, 2))
	}
	f.Add(uint8(0), uint16(1), int64(0), []byte{})
	f.Add(uint8(0), uint16(1), int64(0), []byte{12, 0, 0, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, attrs uint8, count uint16, maxTS int64, recs []byte) {
		h := rawHeader(int32(count%2000) + 1)
		h.Attributes = int16(attrs) % int16(CodecZstd+1)
		if attrs&0x80 != 0 {
			h.Attributes |= TimestampTypeBit
		}
		h.MaxTimestamp = maxTS
		b := rawBatch(h, recs)
		var it Records
		n := 0
		if err := it.Reset(b); err == nil {
			for it.Next() {
				n++
			}
		}
		_, verr := ValidateRecords(b)
		if (it.Err() == nil) != (verr == nil) {
			t.Fatalf("iteration error %v, ValidateRecords %v", it.Err(), verr)
		}
		if verr == nil && n != int(h.RecordCount) {
			t.Fatalf("%d records, header says %d", n, h.RecordCount)
		}
	})
}

// FuzzSplit: Cut and Split never panic, and the batches and tail they
// return are b itself, in order, with each batch its declared size.
func FuzzSplit(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
		f.Add(append(append([]byte(nil), s...), s...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		batches, tail, _ := Split(nil, b)
		var joined []byte
		for _, bt := range batches {
			if l := binary.BigEndian.Uint32(bt[offBatchLength:]); int(l)+LengthFieldEnd != len(bt) {
				t.Fatalf("batch of %d bytes declares %d", len(bt), l)
			}
			joined = append(joined, bt...)
		}
		if !bytes.Equal(append(joined, tail...), b) {
			t.Fatal("batches and tail are not the input")
		}
	})
}
