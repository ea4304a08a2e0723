package segment

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// File names in a partition directory.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	baseDigits      = 20
)

func segName(base int64, suffix string) string {
	return fmt.Sprintf("%0*d%s", baseDigits, base, suffix)
}

// parseSegName returns the base offset of a "<20 digits><suffix>" name.
func parseSegName(name, suffix string) (int64, bool) {
	s, ok := strings.CutSuffix(name, suffix)
	if !ok || len(s) != baseDigits {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// segFile is a segment's open file with a reference count: the log holds
// one reference while the segment is in the log, and every Span holds one.
// The file closes when the last reference goes, so deleting a segment never
// closes a descriptor under a reader. refs is atomic because spans are
// released on other goroutines.
type segFile struct {
	f    vfs.File
	refs atomic.Int32
}

func newSegFile(f vfs.File) *segFile {
	s := &segFile{f: f}
	s.refs.Store(1)
	return s
}

func (s *segFile) acquire() { s.refs.Add(1) }

func (s *segFile) release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		_ = s.f.Close()
	case n < 0:
		panic("segment: segment file released more often than acquired")
	}
}

// segment is one <base>.log file and what the log knows about it.
// Invariants: 0 <= writtenSize <= size; last >= base-1; a sealed segment's
// size == writtenSize and its last offset is the next segment's base - 1.
type segment struct {
	base int64
	file *segFile
	// size is the logical end: bytes appended, written or not.
	size int64
	// writtenSize: the file holds [0, writtenSize) (the kernel accepted it).
	writtenSize int64
	// last is the last offset appended (base-1 when empty).
	last int64
	// idx is nil for a sealed segment until first needed (loaded from its
	// index files, or rebuilt by a scan).
	idx    *segIndex
	sealed bool
	// sealing: the seal's sync (and, on the worker, its trim and index
	// files) is in flight; the cleaner leaves the segment alone.
	sealing bool
	// preallocEnd is where the space reserved (or being zero-filled) ahead
	// of size ends. Zero-fill: [zeroedEnd, zeroingEnd) is being written
	// with zeros; no data write may overlap it until that completes.
	preallocEnd           int64
	zeroedEnd, zeroingEnd int64
	// droppedEnd: [0, droppedEnd) was synced and dropped from the page
	// cache (Config.CacheTailBytes).
	droppedEnd int64
	// rollAtMs is the clock when the first batch was appended (or the
	// segment was opened): rolling by age counts from it.
	rollAtMs int64
	// damaged is set when the segment's bytes do not match the log's
	// bookkeeping; reads inside it fail with it.
	damaged error
}

func (s *segment) empty() bool { return s.last < s.base }

// readHeader reads and checks the batch header at pos into buf.
func readHeader(f vfs.File, pos int64, buf *[batch.HeaderSize]byte) (batch.Header, error) {
	if _, err := f.ReadAt(buf[:], pos); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return batch.Header{}, fmt.Errorf("%w: batch header at %d: %w", ErrCorrupt, pos, err)
	}
	h, err := batch.ReadHeader(buf[:])
	if err != nil {
		return h, fmt.Errorf("%w: batch header at %d: %w", ErrCorrupt, pos, err)
	}
	return h, nil
}

// scanResult is what a full scan of a segment found.
type scanResult struct {
	// end is the position after the last valid batch; last its last offset
	// (base-1 when none).
	end  int64
	last int64
	// ufirst and unext are the user offsets of the first batch and the
	// next one after the last (-1 when none).
	ufirst, unext int64
	idx           *segIndex
	// epochs lists the epoch changes seen, relative to prevEpoch.
	epochs  []EpochEntry
	batches int
	// stop says why the scan ended before the file's end (nil: it did
	// not); zeroTail says it ended at a zero header (unused space, not data).
	stop     error
	zeroTail bool
	// firstTs is the first batch's maxTimestamp (noTimestamp when none).
	firstTs int64
}

// scanChunkBytes is the read size of a recovery scan.
const scanChunkBytes = 1 << 20

var (
	errZeroHeader    = errors.New("zero header (unused space)")
	errZerosThenData = errors.New("zero header followed by non-zero bytes (a write after a lost one)")
)

// zeroFrom reports whether f holds only zeros from pos to size.
func zeroFrom(f vfs.File, pos, size int64) bool {
	buf := make([]byte, min(scanChunkBytes, size-pos))
	for pos < size {
		n := min(int64(len(buf)), size-pos)
		m, err := f.ReadAt(buf[:n], pos)
		if !isZero(buf[:m]) {
			return false
		}
		if int64(m) < n {
			return err == io.EOF
		}
		pos += n
	}
	return true
}

// scanSegment reads a segment from the start and validates every batch
// (length, CRC, offsets continuing from base, epochs never decreasing from
// prevEpoch), rebuilding its index. It stops at the first batch that does
// not check out and never fails: what it could not read is reported in stop.
func scanSegment(f vfs.File, base, size int64, prevEpoch int32, intervalBytes int64) scanResult {
	r := scanResult{last: base - 1, ufirst: -1, unext: -1, idx: newSegIndex(), firstTs: noTimestamp}
	buf := make([]byte, min(scanChunkBytes, max(size, batch.HeaderSize)))
	var bufAt, bufLen int64 // buf holds the file's [bufAt, bufAt+bufLen)
	get := func(pos int64, n int) ([]byte, error) {
		if pos >= bufAt && pos+int64(n) <= bufAt+bufLen {
			return buf[pos-bufAt : pos-bufAt+int64(n)], nil
		}
		if n > len(buf) {
			buf = make([]byte, n)
		}
		want := min(int64(len(buf)), size-pos)
		m, err := f.ReadAt(buf[:want], pos)
		bufAt, bufLen = pos, int64(m)
		if m < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return buf[:n], nil
	}
	epoch := prevEpoch
	pos := int64(0)
	for pos < size {
		if size-pos < batch.LengthFieldEnd {
			r.stop = fmt.Errorf("%w: %d trailing bytes", batch.ErrShort, size-pos)
			break
		}
		hb, err := get(pos, int(min(batch.HeaderSize, size-pos)))
		if err != nil {
			r.stop = err
			break
		}
		if isZero(hb[:batch.LengthFieldEnd]) {
			r.stop, r.zeroTail = errZeroHeader, true
			if !zeroFrom(f, pos, size) {
				r.stop, r.zeroTail = errZerosThenData, false
			}
			break
		}
		h, err := batch.ReadHeader(hb)
		if err != nil {
			r.stop = err
			break
		}
		if int64(h.Size()) > size-pos {
			r.stop = fmt.Errorf("%w: batch of %d bytes at %d past the end %d", batch.ErrShort, h.Size(), pos, size)
			break
		}
		b, err := get(pos, h.Size())
		if err != nil {
			r.stop = err
			break
		}
		if _, err := batch.Validate(b); err != nil {
			r.stop = err
			break
		}
		if r.unext >= 0 && h.BaseOffset != r.unext {
			r.stop = fmt.Errorf("%w: base offset %d at %d, want %d", ErrCorrupt, h.BaseOffset, pos, r.unext)
			break
		}
		rbase := r.last + 1
		if rlast(&h, rbase)-base > maxRel {
			r.stop = fmt.Errorf("%w: offset %d too far from base %d", ErrCorrupt, rlast(&h, rbase), base)
			break
		}
		if h.PartitionLeaderEpoch < epoch || h.PartitionLeaderEpoch < 0 {
			r.stop = fmt.Errorf("%w: epoch %d after %d at offset %d", ErrCorrupt, h.PartitionLeaderEpoch, epoch, rbase)
			break
		}
		if h.PartitionLeaderEpoch > epoch || len(r.epochs) == 0 && r.batches == 0 {
			r.epochs = append(r.epochs, EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: rbase})
			epoch = h.PartitionLeaderEpoch
		}
		if r.batches == 0 {
			r.firstTs, r.ufirst = h.MaxTimestamp, h.BaseOffset
		}
		r.idx.add(uint32(rbase-base), pos, h.Size(), h.MaxTimestamp, intervalBytes)
		r.batches++
		r.last, r.unext = rlast(&h, rbase), h.LastOffset()+1
		pos += int64(h.Size())
		r.end = pos
	}
	r.idx.markTime()
	return r
}

// maxRel is the largest offset a segment may hold relative to its base
// (relative offsets are 32-bit in the index).
const maxRel = 1<<32 - 1

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// loadIndex makes s.idx available for a sealed segment: from its index
// files when they check out against the .log, else by a scan that must
// account for the whole file. A segment that fails both is marked damaged.
func (l *Log) loadIndex(s *segment) error {
	if s.idx != nil {
		return nil
	}
	if s.damaged != nil {
		return s.damaged
	}
	small := !s.sealed && !needsIndexFiles(s) // a clean close wrote none
	if !small {
		x := newSegIndex()
		ib, err1 := readWhole(l.fs, l.path(segName(s.base, indexSuffix)))
		tb, err2 := readWhole(l.fs, l.path(segName(s.base, timeIndexSuffix)))
		if err1 == nil && err2 == nil {
			err1 = decodeIndex(ib, s.base, s.size, s.last, x)
			if err1 == nil {
				err2 = decodeTimeIndex(tb, s.base, s.size, s.last, x)
			}
		}
		if err1 == nil && err2 == nil {
			s.idx = x
			return nil
		}
	}
	r := scanSegment(s.file.f, s.base, s.size, 0, l.cfg.IndexIntervalBytes)
	if r.end != s.size || r.last != s.last {
		s.damaged = fmt.Errorf("%w: segment %d holds offsets up to %d in %d of %d bytes (%v)",
			ErrCorrupt, s.base, r.last, r.end, s.size, r.stop)
		return s.damaged
	}
	s.idx = r.idx
	if !small {
		l.report.IndexesRebuilt++
	}
	return nil
}

// indexFilesMinBytes is the smallest active segment a clean close writes
// index files for. A smaller one is scanned at the next open instead:
// reading under 64 KiB costs less than creating two files, which took
// 0.7 ms of kernel time each on this machine's file system.
const indexFilesMinBytes = 64 << 10

// needsIndexFiles says whether a clean close writes s's index files.
func needsIndexFiles(s *segment) bool { return s.size >= indexFilesMinBytes }

// readWhole reads a small file whole.
func readWhole(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	if n > int64(indexHeaderSize)+indexEntriesMax*timeIndexEntrySize {
		return nil, fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, name, n)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !(err == io.EOF && n == 0) {
		return nil, err
	}
	return b, nil
}

// writeIndexFiles writes s's .index and .timeindex whole and syncs them.
// Their directory entries become durable with the next SyncDir.
func (l *Log) writeIndexFiles(s *segment) error {
	return writeFiles(l.fs, l.indexFiles(s), true)
}

// namedBytes is a file to write whole.
type namedBytes struct {
	name string
	b    []byte
}

// indexFiles encodes s's index files (paths and contents).
func (l *Log) indexFiles(s *segment) []namedBytes {
	s.idx.markTime()
	return []namedBytes{
		{l.path(segName(s.base, indexSuffix)), encodeIndex(s.base, s.size, s.last, s.idx)},
		{l.path(segName(s.base, timeIndexSuffix)), encodeTimeIndex(s.base, s.size, s.idx)},
	}
}

// writeFiles creates each file, writes it whole and, when sync, syncs it.
// Without sync an existing file is rewritten in place rather than created
// anew: creating a file took about 0.7 ms here, and truncating one to zero
// first frees its blocks (with a discard, on this machine's file system)
// only to allocate them again. It only touches fsys, so a background job may run it.
func writeFiles(fsys vfs.FS, files []namedBytes, sync bool) error {
	for _, w := range files {
		var f vfs.File
		var err error
		if !sync {
			f, err = fsys.OpenReadWrite(w.name)
		}
		if sync || errors.Is(err, fs.ErrNotExist) {
			f, err = fsys.Create(w.name)
		}
		if err != nil {
			return err
		}
		_, err = f.WriteAt(w.b, 0)
		if err == nil && sync {
			err = f.Sync()
		}
		if err == nil && !sync {
			err = f.Truncate(int64(len(w.b)))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// removeIndexFiles removes s's index files (stale once s is appended to
// again). Missing files are fine.
func (l *Log) removeIndexFiles(base int64) error {
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if err := l.fs.Remove(l.path(segName(base, suf))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (l *Log) path(name string) string { return path.Join(l.dir, name) }
