package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

var (
	errInflated   = fmt.Errorf("inflates past %d bytes", RecordsBytesMax)
	errNoProgress = errors.New("decompressor made no progress")
	errXerial     = errors.New("malformed xerial block")
)

// readsWithoutProgressMax bounds the reads in a row that return neither
// bytes nor an error before readBounded gives up.
const readsWithoutProgressMax = 100

// gzipReader is a pooled gzip reader with the bytes.Reader it reads from.
type gzipReader struct {
	r   gzip.Reader
	src bytes.Reader
}

// lz4Reader is a pooled lz4 frame reader with the bytes.Reader it reads from.
type lz4Reader struct {
	r   *lz4.Reader
	src bytes.Reader
}

var (
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
	lz4Readers  = sync.Pool{New: func() any { return &lz4Reader{r: lz4.NewReader(nil)} }}
	// zstdDecoder is shared: DecodeAll is safe for concurrent use, and a
	// decoder is expensive to create. Its memory bound is RecordsBytesMax:
	// it refuses a frame that declares or decodes to more before
	// allocating it.
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(RecordsBytesMax), zstd.WithDecoderConcurrency(0))
	})
)

// decompress appends the decompression of src (codec c) to dst[:0] and
// returns it. The result is never longer than RecordsBytesMax; a stream that
// would be, or that its codec cannot decode, is refused with an error
// wrapping ErrCorrupt. The returned slice is the (possibly grown) dst even on
// error, so the caller can keep the buffer for the next call.
func decompress(c Codec, dst, src []byte) ([]byte, error) {
	dst = dst[:0]
	var out []byte
	var err error
	switch c {
	case CodecGzip:
		out, err = decompressGzip(dst, src)
	case CodecSnappy:
		out, err = decompressSnappy(dst, src)
	case CodecLZ4:
		out, err = decompressLZ4(dst, src)
	case CodecZstd:
		out, err = decompressZstd(dst, src)
	default:
		out, err = dst, fmt.Errorf("unknown codec %d", c)
	}
	if out == nil {
		out = dst
	}
	if err != nil {
		return out[:0], fmt.Errorf("%w: %s records: %v", ErrCorrupt, c, err)
	}
	return out, nil
}

func decompressGzip(dst, src []byte) ([]byte, error) {
	g := gzipReaders.Get().(*gzipReader)
	defer func() {
		g.src.Reset(nil) // keep no reference to the batch in the pool
		gzipReaders.Put(g)
	}()
	g.src.Reset(src)
	if err := g.r.Reset(&g.src); err != nil {
		return dst, err
	}
	return readBounded(&g.r, dst, 4*len(src))
}

func decompressLZ4(dst, src []byte) ([]byte, error) {
	l := lz4Readers.Get().(*lz4Reader)
	defer lz4Readers.Put(l)
	l.src.Reset(src)
	l.r.Reset(&l.src)
	out, err := readBounded(l.r, dst, 4*len(src))
	l.r.Reset(nil) // return its block buffer to lz4's pool now
	l.src.Reset(nil)
	return out, err
}

func decompressZstd(dst, src []byte) ([]byte, error) {
	d, err := zstdDecoder()
	if err != nil {
		return dst, err
	}
	out, err := d.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = errInflated
	}
	return out, err
}

// readBounded appends everything r yields to dst, refusing more than
// RecordsBytesMax bytes. The buffer grows with what r actually produced
// (first by hint), never ahead of it by more than it already holds, so a
// stream that only claims a large size allocates nothing for the claim.
func readBounded(r io.Reader, dst []byte, hint int) ([]byte, error) {
	idle := 0
	for {
		if len(dst) == cap(dst) {
			if len(dst) > RecordsBytesMax {
				return dst, errInflated
			}
			grow := min(max(len(dst), hint, 512), RecordsBytesMax+1-len(dst))
			dst = slices.Grow(dst, grow)
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > RecordsBytesMax {
			return dst, errInflated
		}
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst, err
		case n == 0:
			if idle++; idle >= readsWithoutProgressMax {
				return dst, errNoProgress
			}
		default:
			idle = 0
		}
	}
}

// decompressSnappy decodes either xerial-framed snappy (what Kafka's Java
// producer writes) or a single raw snappy block (librdkafka, older
// franz-go). Every block is decoded with the strict standard decoder.
func decompressSnappy(dst, src []byte) ([]byte, error) {
	if len(src) >= xerialHeaderSize && bytes.Equal(src[:8], xerialHeader[:8]) {
		return decompressXerial(dst, src[xerialHeaderSize:])
	}
	return appendSnappyBlock(dst, src)
}

// decompressXerial decodes the blocks that follow a xerial header. It first
// walks the block lengths and the decoded length each block declares, so
// that the bound is checked and dst grown once before anything is decoded.
func decompressXerial(dst, src []byte) ([]byte, error) {
	total := 0
	for rest := src; len(rest) > 0; {
		block, next, err := xerialBlock(rest)
		if err != nil {
			return dst, err
		}
		n, err := snappy.DecodedLen(block)
		if err != nil {
			return dst, err
		}
		if total += n; total > RecordsBytesMax {
			return dst, errInflated
		}
		rest = next
	}
	dst = slices.Grow(dst, total)
	for len(src) > 0 {
		block, next, _ := xerialBlock(src) // checked above
		var err error
		if dst, err = appendSnappyBlock(dst, block); err != nil {
			return dst, err
		}
		src = next
	}
	return dst, nil
}

// xerialBlock splits the first length-prefixed block off src.
func xerialBlock(src []byte) (block, rest []byte, err error) {
	if len(src) < 4 {
		return nil, nil, errXerial
	}
	n := binary.BigEndian.Uint32(src)
	if n == 0 || uint64(n) > uint64(len(src)-4) {
		return nil, nil, errXerial
	}
	return src[4 : 4+n], src[4+n:], nil
}

// appendSnappyBlock decodes one raw snappy block onto the end of dst.
func appendSnappyBlock(dst, block []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > RecordsBytesMax-len(dst) {
		return dst, errInflated
	}
	dst = slices.Grow(dst, n)
	out, err := snappy.DecodeStrict(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return dst, err
	}
	if len(out) != n {
		return dst, errXerial // cannot happen: DecodeStrict decodes exactly n
	}
	return dst[:len(dst)+n], nil
}
