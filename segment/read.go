package segment

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/corestream/corestream/segment/vfs"
)

// Span is a run of whole batches in one segment file: bytes [Pos, Pos+Len)
// of the file hold the batches with offsets FirstOffset..LastOffset. A span
// holds a reference to its file, so the file stays open (even if retention
// or truncation deletes the segment) until Release. A span may be handed to
// another goroutine (the network loop that sendfiles it); each span must be
// released exactly once, after which it must not be used.
type Span struct {
	file        *segFile
	Pos         int64
	Len         int64
	FirstOffset int64
	LastOffset  int64
}

// Fd is the file descriptor to sendfile from, or vfs.InvalidFd when the
// file system has none (then use ReadTo).
func (s Span) Fd() uintptr { return s.file.f.Fd() }

// File is the segment file the span lies in.
func (s Span) File() vfs.File { return s.file.f }

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// ReadTo copies the span's bytes to w through a buffer: the fallback when
// sendfile is not possible. It is safe on any goroutine.
func (s Span) ReadTo(w io.Writer) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var done int64
	for done < s.Len {
		n := min(int64(len(buf)), s.Len-done)
		m, err := s.file.f.ReadAt(buf[:n], s.Pos+done)
		if int64(m) < n && err == nil {
			err = io.ErrUnexpectedEOF
		}
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return done, werr
			}
			done += int64(m)
		}
		if err != nil && !(err == io.EOF && done == s.Len) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
	}
	return done, nil
}

// AppendTo appends the span's bytes to dst.
func (s Span) AppendTo(dst []byte) ([]byte, error) {
	n := len(dst)
	dst = append(dst, make([]byte, s.Len)...)
	if m, err := s.file.f.ReadAt(dst[n:], s.Pos); m < int(s.Len) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return dst[:n], err
	}
	return dst, nil
}

// Release drops the span's reference to its file.
func (s Span) Release() { s.file.release() }

// ReleaseSpans releases every span in spans.
func ReleaseSpans(spans []Span) {
	for i := range spans {
		spans[i].Release()
		spans[i] = Span{}
	}
}

// Read returns the batches from the one holding offset on, as file spans
// (one per segment touched): whole batches only, never a batch whose last
// offset is above upTo (inclusive; the broker passes the high watermark - 1)
// or above WrittenOffset, and at most maxBytes in all, except that the
// first batch is returned whatever its size so a consumer always makes
// progress. The first span may start before offset (at its batch's base).
// It returns no spans when nothing qualifies yet (offset == LogEndOffset,
// or above upTo). ErrOffsetOutOfRange when offset is below LogStartOffset
// or above LogEndOffset. The caller releases the spans.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) ([]Span, error) {
	return l.ReadAppend(nil, offset, maxBytes, upTo)
}

// ReadAppend is Read appending to dst.
func (l *Log) ReadAppend(dst []Span, offset int64, maxBytes int, upTo int64) ([]Span, error) {
	if l.closed {
		return dst, ErrClosed
	}
	if offset < l.logStart || offset > l.leo {
		return dst, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.logStart, l.leo)
	}
	limit := min(upTo, l.written)
	if offset > limit {
		return dst, nil
	}
	i := l.segFor(offset)
	budget := int64(max(maxBytes, 0))
	first := true
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		if s.base > limit {
			break
		}
		if err := l.loadIndex(s); err != nil {
			return dst, err
		}
		pos, base := int64(0), s.base
		if first {
			var err error
			if pos, base, err = l.positionOf(s, offset); err != nil {
				return dst, err
			}
		}
		end, last, err := l.extent(s, pos, base, budget, limit, first)
		if err != nil {
			return dst, err
		}
		if end == pos {
			break
		}
		s.file.acquire()
		dst = append(dst, Span{file: s.file, Pos: pos, Len: end - pos, FirstOffset: base, LastOffset: last})
		budget -= end - pos
		first = false
		if last != s.last || last >= limit || budget <= 0 {
			break
		}
	}
	return dst, nil
}

// segFor is the index of the segment holding offset.
// REQUIRES: segs[0].base <= offset.
func (l *Log) segFor(offset int64) int {
	return sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
}

// positionOf finds the batch holding offset in s: its position and base
// (raft offsets). User offsets are checked to run on from batch to batch.
// REQUIRES: s.idx loaded; offset written.
func (l *Log) positionOf(s *segment, offset int64) (pos, base int64, err error) {
	pos, rel, ok := s.idx.floor(uint32(offset - s.base))
	base = s.base
	if ok {
		base = s.base + int64(rel)
	}
	unext := int64(-1)
	for pos < s.writtenSize {
		h, err := readHeader(s.file.f, pos, &l.hdr)
		if err != nil {
			return 0, 0, err
		}
		if unext >= 0 && h.BaseOffset != unext {
			return 0, 0, fmt.Errorf("%w: segment %d: batch at %d has base %d, want %d", ErrCorrupt, s.base, pos, h.BaseOffset, unext)
		}
		if rlast(&h, base) >= offset {
			return pos, base, nil
		}
		pos += int64(h.Size())
		base, unext = base+rwidth(&h), h.LastOffset()+1
	}
	return 0, 0, fmt.Errorf("%w: segment %d: offset %d not found below byte %d", ErrCorrupt, s.base, offset, s.writtenSize)
}

// extent finds how far from pos (the batch at offset base) whole batches
// go within budget bytes and up to offset limit; when mustTake, the first
// batch counts whatever its size. It jumps through the index, then reads
// headers. It returns the end position and the last offset included.
func (l *Log) extent(s *segment, pos, base, budget, limit int64, mustTake bool) (end, last int64, err error) {
	end, last = pos, base-1
	if mustTake {
		h, err := readHeader(s.file.f, pos, &l.hdr)
		if err != nil {
			return 0, 0, err
		}
		if rlast(&h, base) > limit {
			return pos, last, nil
		}
		end, last = pos+int64(h.Size()), rlast(&h, base)
	}
	// Every indexed batch that starts within budget and whose predecessor
	// ends at or below limit bounds a run of qualifying whole batches.
	x := s.idx.off
	i := sort.Search(len(x), func(i int) bool {
		return int64(x[i].pos)-pos > budget || s.base+int64(x[i].rel)-1 > limit || int64(x[i].pos) > s.writtenSize
	})
	if i > 0 && int64(x[i-1].pos) > end {
		end, last = int64(x[i-1].pos), s.base+int64(x[i-1].rel)-1
	}
	for end < s.writtenSize {
		h, err := readHeader(s.file.f, end, &l.hdr)
		if err != nil {
			return 0, 0, err
		}
		if rlast(&h, last+1) > limit || end+int64(h.Size())-pos > budget {
			break
		}
		end, last = end+int64(h.Size()), rlast(&h, last+1)
	}
	return end, last, nil
}

// OffsetForTimestamp returns the (raft) base offset of the first data batch whose
// maxTimestamp is >= ts (batch granularity: the broker scans the records of
// that batch for the exact record). ErrNotFound when no written batch
// qualifies.
func (l *Log) OffsetForTimestamp(ts int64) (int64, error) {
	if l.closed {
		return 0, ErrClosed
	}
	for _, s := range l.segs {
		if s.empty() || s.base > l.written {
			break
		}
		if err := l.loadIndex(s); err != nil {
			return 0, err
		}
		if s.idx.maxTs < ts {
			continue
		}
		// Batches before the first time entry >= ts cannot qualify.
		t := s.idx.time
		j := sort.Search(len(t), func(j int) bool { return t[j].ts >= ts })
		pos, base := int64(0), s.base
		if j > 0 {
			var err error
			if pos, base, err = l.positionOf(s, s.base+int64(t[j-1].rel)); err != nil {
				return 0, err
			}
		}
		for pos < s.writtenSize {
			h, err := readHeader(s.file.f, pos, &l.hdr)
			if err != nil {
				return 0, err
			}
			if h.MaxTimestamp >= ts && !h.IsZeroWidth() {
				return base, nil
			}
			pos += int64(h.Size())
			base += rwidth(&h)
		}
	}
	return 0, fmt.Errorf("%w: no batch at or after timestamp %d", ErrNotFound, ts)
}

// MaxTimestamp returns the raft base offset and the max timestamp of the
// first data batch (not zero-width) whose MaxTimestamp is the largest of
// the data batches that end at or below limit (a raft offset, inclusive:
// the commit), as ListOffsets' max-timestamp lookup (KIP-734) asks.
// ErrNotFound when there is none.
//
// Each segment's time index knows its largest timestamp and the batch
// holding it, and bounds every batch of it, so a segment that cannot
// beat the best so far is skipped and one whose maximum is a data batch
// within limit is answered from that batch's header. Only a segment whose
// maximum is a consensus batch (a new primary's no-op, stamped with its
// clock) or lies above limit (the active segment's uncommitted tail) has
// its headers read, up to limit.
func (l *Log) MaxTimestamp(limit int64) (base, ts int64, err error) {
	if l.closed {
		return 0, 0, ErrClosed
	}
	limit = min(limit, l.written)
	found := false
	take := func(b, t int64) {
		if !found || t > ts {
			base, ts, found = b, t, true
		}
	}
	for _, s := range l.segs {
		if s.empty() || s.base > limit {
			break
		}
		if err := l.loadIndex(s); err != nil {
			return 0, 0, err
		}
		if found && s.idx.maxTs <= ts {
			continue // no batch of s beats the best
		}
		if off := s.base + int64(s.idx.maxTsRel); off <= limit {
			pos, b, err := l.positionOf(s, off)
			if err != nil {
				return 0, 0, err
			}
			h, err := readHeader(s.file.f, pos, &l.hdr)
			if err != nil {
				return 0, 0, err
			}
			if b == off && !h.IsZeroWidth() && h.MaxTimestamp == s.idx.maxTs && rlast(&h, b) <= limit {
				take(b, h.MaxTimestamp)
				continue
			}
		}
		for pos, b := int64(0), s.base; pos < s.writtenSize; {
			h, err := readHeader(s.file.f, pos, &l.hdr)
			if err != nil {
				return 0, 0, err
			}
			if rlast(&h, b) > limit {
				break
			}
			if !h.IsZeroWidth() {
				take(b, h.MaxTimestamp)
			}
			pos += int64(h.Size())
			b += rwidth(&h)
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("%w: no data batch at or below offset %d", ErrNotFound, limit)
	}
	return base, ts, nil
}
