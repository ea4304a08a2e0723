package batch

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// RecordsBytesMax bounds the records section of one batch after
// decompression (64 MiB). A compressed batch that would inflate past it is
// refused with ErrCorrupt before more than about this much is allocated, so
// a decompression bomb costs at most one such buffer. The Builder refuses
// to grow a batch's records past it (and past what fits in BatchBytesMax
// uncompressed), so everything it builds can be read back.
const RecordsBytesMax = 64 << 20

// Choices of the compressed formats, and why:
//
//   - gzip: one gzip member (RFC 1952), as Java's GZIPOutputStream writes.
//     Readers accept concatenated members, as Java's GZIPInputStream does.
//   - snappy: the xerial framing that Kafka's Java producer writes
//     (snappy-java's SnappyOutputStream): the 16-byte header
//     "\x82SNAPPY\x00" + version 1 + compatible version 1, then blocks of
//     at most 32 KiB of input, each a big-endian int32 length and a raw
//     snappy block. librdkafka and older franz-go write one raw snappy
//     block instead; every Kafka reader accepts both (snappy-java falls back
//     to a raw block when the header is missing), and so do we. Writing the
//     framing keeps our bytes what a Java consumer or a Kafka broker's own
//     producer would see, and bounds each block decode to 32 KiB of input.
//     Blocks are decoded strictly (standard snappy only; the s2 extensions
//     that klauspost's fast decoder also accepts are refused), so a batch we
//     accept is one every Kafka consumer can read.
//   - lz4: the LZ4 frame format (magic 0x184D2204) with independent 64 KiB
//     blocks and no content checksum, which is what Kafka's Java producer
//     writes (KafkaLZ4BlockOutputStream); the batch CRC already covers the
//     compressed bytes. Readers accept every block size and checksum flag.
//   - zstd: one zstd frame (RFC 8878) with its content checksum.
const (
	xerialBlockBytes = 32 << 10 // input bytes per xerial block, as snappy-java writes
	xerialHeaderSize = 16
)

// xerialHeader is the xerial magic, version 1 and minimum compatible
// version 1 (snappy-java refuses lower versions).
var xerialHeader = [xerialHeaderSize]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// appendBuffer is an io.Writer that appends to a byte slice; the stream
// compressors write into it so that their output lands in the caller's
// buffer without an intermediate copy.
type appendBuffer struct{ b []byte }

func (a *appendBuffer) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// gzipWriter is a pooled gzip writer with the buffer it writes into.
type gzipWriter struct {
	w   *gzip.Writer
	out appendBuffer
}

// gzipPools pool gzip writers by level (index 0 = gzip's default level).
var gzipPools [10]sync.Pool

// lz4Writer is a pooled lz4 frame writer with the buffer it writes into.
type lz4Writer struct {
	w   *lz4.Writer
	out appendBuffer
}

// lz4Levels maps the Builder level 0..9 to lz4 levels (0 = fast).
var lz4Levels = [10]lz4.CompressionLevel{lz4.Fast, lz4.Level1, lz4.Level2, lz4.Level3,
	lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}

// lz4Pools pool lz4 writers by level (index 0 = fast).
var lz4Pools [10]sync.Pool

// zstdEncoders are created once per zstd speed level (creation is
// expensive); EncodeAll is safe for concurrent use.
var zstdEncoders [zstd.SpeedBestCompression + 1]struct {
	once sync.Once
	enc  *zstd.Encoder
	err  error
}

// compress appends the compression of src with codec c at level to dst.
// REQUIRES: c is a known codec other than CodecNone; level was accepted by
// checkLevel.
func compress(c Codec, level int, dst, src []byte) ([]byte, error) {
	switch c {
	case CodecGzip:
		return compressGzip(level, dst, src)
	case CodecSnappy:
		return appendXerial(dst, src), nil
	case CodecLZ4:
		return compressLZ4(level, dst, src)
	case CodecZstd:
		enc, err := zstdEncoder(level)
		if err != nil {
			return dst, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("batch: cannot compress with codec %d", c)
}

// checkLevel reports whether level is valid for codec c: 0 (the codec's
// default) always; gzip 1-9; lz4 1-9; zstd 1-22 (zstd's own scale, mapped
// to klauspost's four speeds); snappy has no levels.
func checkLevel(c Codec, level int) error {
	maxLevel := 0
	switch c {
	case CodecGzip, CodecLZ4:
		maxLevel = 9
	case CodecZstd:
		maxLevel = 22
	}
	if level < 0 || level > maxLevel {
		return fmt.Errorf("batch: level %d out of range 0..%d for codec %s", level, maxLevel, c)
	}
	return nil
}

func compressGzip(level int, dst, src []byte) ([]byte, error) {
	gw, _ := gzipPools[level].Get().(*gzipWriter)
	if gw == nil {
		l := level
		if l == 0 {
			l = gzip.DefaultCompression
		}
		w, err := gzip.NewWriterLevel(nil, l)
		if err != nil {
			return dst, err
		}
		gw = &gzipWriter{w: w}
	}
	gw.out.b = dst
	gw.w.Reset(&gw.out)
	_, err := gw.w.Write(src)
	if err == nil {
		err = gw.w.Close()
	}
	dst, gw.out.b = gw.out.b, nil
	gw.w.Reset(io.Discard) // drop the reference to gw.out's old target
	gzipPools[level].Put(gw)
	return dst, err
}

func compressLZ4(level int, dst, src []byte) ([]byte, error) {
	lw, _ := lz4Pools[level].Get().(*lz4Writer)
	if lw == nil {
		lw = &lz4Writer{w: lz4.NewWriter(nil)}
		err := lw.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false),
			lz4.CompressionLevelOption(lz4Levels[level]))
		if err != nil {
			return dst, err
		}
	}
	lw.out.b = dst
	lw.w.Reset(&lw.out)
	_, err := lw.w.Write(src)
	if err == nil {
		err = lw.w.Close()
	}
	dst, lw.out.b = lw.out.b, nil
	lz4Pools[level].Put(lw)
	return dst, err
}

// zstdEncoder returns the shared encoder for a zstd level (0 = default).
func zstdEncoder(level int) (*zstd.Encoder, error) {
	speed := zstd.SpeedDefault
	if level > 0 {
		speed = zstd.EncoderLevelFromZstd(level)
	}
	e := &zstdEncoders[speed]
	e.once.Do(func() {
		e.enc, e.err = zstd.NewWriter(nil, zstd.WithEncoderLevel(speed), zstd.WithZeroFrames(true))
	})
	return e.enc, e.err
}

// appendXerial appends src as xerial-framed snappy.
func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialHeader[:]...)
	for len(src) > 0 {
		n := min(len(src), xerialBlockBytes)
		at := len(dst)
		dst = slices.Grow(dst, 4+s2.MaxEncodedLen(n))
		block := s2.EncodeSnappy(dst[at+4:cap(dst)], src[:n]) // in place: it has the room
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
		dst = dst[:at+4+len(block)]
		src = src[n:]
	}
	return dst
}
