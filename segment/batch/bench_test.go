package batch

import (
	"fmt"
	"hash/crc32"
	"math/rand"
	"testing"

	"github.com/klauspost/compress/s2"
)

// Benchmarks. Each group has its baseline in this file, measured in the
// same run, and figures are read as ratios against it:
//
//	BenchmarkBuild*         vs BenchmarkBaselineCopy (copying the same values)
//	BenchmarkValidate       vs BenchmarkBaselineCRC32 (crc32.Checksum over the same bytes)
//	BenchmarkIterate, BenchmarkValidateRecords: per record; no baseline
//	BenchmarkCompress/BenchmarkDecompress: MB/s of uncompressed bytes per codec
//
// The workload is 1 KiB records (a 16-byte key, a JSON-like value with
// random numbers, so compressible about 3-4x) cut into 64 KiB batches.

const (
	benchValueBytes = 1 << 10
	benchBatchBytes = 64 << 10
)

// benchRecords returns the records of one 64 KiB batch.
func benchRecords() []Record {
	rng := rand.New(rand.NewSource(1))
	n := benchBatchBytes / (benchValueBytes + 32)
	recs := make([]Record, n)
	for i := range recs {
		v := make([]byte, 0, benchValueBytes)
		for len(v) < benchValueBytes {
			v = fmt.Appendf(v, `{"id":%d,"user":"user-%d","score":%.3f,"tags":["a","b"]},`, rng.Intn(1e6), rng.Intn(1000), rng.Float64())
		}
		recs[i] = Record{Timestamp: 1_700_000_000_000 + int64(i), Key: fmt.Appendf(nil, "key-%012d", i), Value: v[:benchValueBytes]}
	}
	return recs
}

func benchBatch(b *testing.B, c Codec) []byte {
	return build(b, Options{Codec: c}, benchRecords())
}

// BenchmarkBaselineCopy copies the record values into a reused buffer: the
// floor for building an uncompressed batch.
func BenchmarkBaselineCopy(b *testing.B) {
	recs := benchRecords()
	dst := make([]byte, 0, benchBatchBytes+4096)
	b.SetBytes(int64(len(benchBatch(b, CodecNone))))
	b.ReportAllocs()
	for b.Loop() {
		dst = dst[:0]
		for i := range recs {
			dst = append(dst, recs[i].Key...)
			dst = append(dst, recs[i].Value...)
		}
	}
}

// BenchmarkBuild appends the records and builds into a reused buffer
// (BuildAppend), and into a new exact-size slice (Build), per codec.
func BenchmarkBuild(b *testing.B) {
	recs := benchRecords()
	for _, c := range allCodecs {
		size := int64(len(benchBatch(b, CodecNone))) // MB/s of uncompressed batch
		b.Run(c.String()+"/BuildAppend", func(b *testing.B) {
			bl, _ := NewBuilder(Options{Codec: c})
			var dst []byte
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				for i := range recs {
					_ = bl.Append(recs[i])
				}
				dst, _ = bl.BuildAppend(dst[:0])
			}
		})
		b.Run(c.String()+"/Build", func(b *testing.B) {
			bl, _ := NewBuilder(Options{Codec: c})
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				for i := range recs {
					_ = bl.Append(recs[i])
				}
				_, _ = bl.Build()
			}
		})
	}
}

// BenchmarkBaselineCRC32 is the CRC-32C of the bytes Validate checks.
func BenchmarkBaselineCRC32(b *testing.B) {
	bt := benchBatch(b, CodecNone)
	b.SetBytes(int64(len(bt)))
	for b.Loop() {
		_ = crc32.Checksum(bt[offAttributes:], castagnoli)
	}
}

// BenchmarkValidate is header checks plus CRC over a 64 KiB batch.
func BenchmarkValidate(b *testing.B) {
	bt := benchBatch(b, CodecNone)
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(bt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateRecords is the broker's deep check of a produced batch.
func BenchmarkValidateRecords(b *testing.B) {
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			bt := benchBatch(b, c)
			b.SetBytes(int64(len(benchBatch(b, CodecNone))))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateRecords(bt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIterate is a consumer reading every record of a batch with a
// reused iterator (decompressing when needed).
func BenchmarkIterate(b *testing.B) {
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			bt := benchBatch(b, c)
			var it Records
			b.SetBytes(int64(len(benchBatch(b, CodecNone))))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				_ = it.Reset(bt)
				for it.Next() {
					n += len(it.Record().Value)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*int(it.Header().RecordCount)), "ns/record")
		})
	}
}

// BenchmarkCompress and BenchmarkDecompress measure each codec on the
// records section of a 64 KiB batch, in MB/s of uncompressed bytes.
func BenchmarkCompress(b *testing.B) {
	recs := benchBatch(b, CodecNone)[HeaderSize:]
	for _, c := range allCodecs[1:] {
		b.Run(c.String(), func(b *testing.B) {
			var dst []byte
			b.SetBytes(int64(len(recs)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = compress(c, 0, dst[:0], recs)
			}
			b.ReportMetric(float64(len(recs))/float64(len(dst)), "ratio")
		})
	}
}

func BenchmarkDecompress(b *testing.B) {
	recs := benchBatch(b, CodecNone)[HeaderSize:]
	for _, c := range allCodecs[1:] {
		b.Run(c.String(), func(b *testing.B) {
			comp, _ := compress(c, 0, nil, recs)
			var dst []byte
			b.SetBytes(int64(len(recs)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = decompress(c, dst, comp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// What strict snappy decoding costs against klauspost's s2 decoder,
	// which also accepts s2-only extensions (see compress.go).
	b.Run("snappy-block-s2-decoder", func(b *testing.B) {
		block := s2.EncodeSnappy(nil, recs)
		dst := make([]byte, len(recs))
		b.SetBytes(int64(len(recs)))
		for b.Loop() {
			_, _ = s2.Decode(dst, block)
		}
	})
	b.Run("snappy-block-strict", func(b *testing.B) {
		block := s2.EncodeSnappy(nil, recs)
		var dst []byte
		b.SetBytes(int64(len(recs)))
		for b.Loop() {
			dst, _ = appendSnappyBlock(dst[:0], block)
		}
	})
}
