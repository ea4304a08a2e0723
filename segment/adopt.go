package segment

import (
	"errors"
	"fmt"

	"github.com/corestream/corestream/segment/batch"
)

// ErrAdopt is returned by AdoptSegment for a received segment that cannot
// become part of the log: the log does not end at its base, or its bytes
// do not check out. The temporary file is removed; nothing changed.
var ErrAdopt = errors.New("segment: cannot adopt the received segment")

// adoptTempSuffix ends the name a segment received whole is written
// under. It ends in the checkpoint temporary suffix, so OpenLog removes a
// file a crash left behind, and it never parses as a segment name.
const adoptTempSuffix = ".log.adopt.tmp"

// AdoptTempPath is where a segment starting at base, received whole from
// the primary, is written before AdoptSegment makes it part of the log.
func (l *Log) AdoptTempPath(base int64) string { return l.path(segName(base, adoptTempSuffix)) }

// AdoptSegment makes the file at AdoptTempPath(base), written whole by
// the caller, a sealed segment of the log holding offsets base..last,
// whose last batch has leader epoch lastEpoch. It is how a replica far
// behind is caught up with the primary's sealed segments, byte for byte,
// instead of batch by batch.
//
// The log must end at base (LogEndOffset == base). The file is synced and
// validated as recovery would (every batch's CRC, offsets running from
// base to last without a gap, epochs never decreasing from the one at
// base-1), then renamed onto the segment's name, the directory synced, its
// index files written, and a new active segment created at last+1. A
// crash before the rename leaves only the temporary file, which OpenLog
// removes; after it, a whole segment that recovery scans as the active
// one. A file that fails a check is removed and ErrAdopt returned.
func (l *Log) AdoptSegment(base, last int64, lastEpoch int32) error {
	if err := l.usable(); err != nil {
		return err
	}
	tmp := l.AdoptTempPath(base)
	refuse := func(format string, args ...any) error {
		_ = l.fs.Remove(tmp)
		return fmt.Errorf("%w at %d: %s", ErrAdopt, base, fmt.Sprintf(format, args...))
	}
	if base != l.leo || last < base {
		return refuse("the log ends at %d, the segment holds %d..%d", l.leo, base, last)
	}
	if last-base > maxRel {
		return refuse("offsets %d..%d are more than a segment may hold", base, last)
	}
	// The epoch at base-1, which the segment's epochs may not go below.
	prevEpoch := l.EpochBeforeStart()
	if l.leo > l.logStart {
		e, err := l.TermAt(l.leo - 1)
		if err != nil {
			return err
		}
		prevEpoch = e
	}
	f, err := l.fs.OpenReadWrite(tmp)
	if err != nil {
		return fmt.Errorf("%w at %d: opening the received file: %w", ErrAdopt, base, err)
	}
	closeRefuse := func(format string, args ...any) error {
		_ = f.Close()
		return refuse(format, args...)
	}
	size, err := f.Size()
	if err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	r := scanSegment(f, base, size, max(prevEpoch, 0), l.cfg.IndexIntervalBytes)
	switch {
	case r.stop != nil:
		return closeRefuse("batch at byte %d: %v", r.end, r.stop)
	case r.last != last:
		return closeRefuse("the file ends at offset %d, want %d", r.last, last)
	case r.ufirst != l.tab.EndUser():
		return closeRefuse("its first batch is at user offset %d, the log ends at %d", r.ufirst, l.tab.EndUser())
	case len(r.epochs) == 0 || r.epochs[len(r.epochs)-1].Epoch != lastEpoch:
		got := int32(-1)
		if len(r.epochs) > 0 {
			got = r.epochs[len(r.epochs)-1].Epoch
		}
		return closeRefuse("the last batch's epoch is %d, want %d", got, lastEpoch)
	}
	markers, cons, err := fileMarkers(f, size, base, l.logStart)
	if err != nil {
		return closeRefuse("reading its marked batches: %v", err)
	}

	// The active segment becomes empty at base: seal what it holds (the
	// follower's own batches below base) first.
	if err := l.drainAll(); err != nil {
		_ = f.Close()
		return err
	}
	if !l.active().empty() {
		if err := l.roll(); err != nil {
			_ = f.Close()
			return err
		}
		if err := l.drainAll(); err != nil {
			_ = f.Close()
			return err
		}
	}
	if l.cur != nil {
		l.io.pool.put(l.cur)
		l.cur = nil
	}
	old := l.active()
	// From the rename on, <base>.log is the received segment: whole and
	// durable, so a crash anywhere after leaves a log ending at last.
	if err := l.fs.Rename(tmp, l.path(segName(base, logSuffix))); err != nil {
		_ = f.Close()
		return err
	}
	old.file.release()
	s := &segment{base: base, file: newSegFile(f), size: size, writtenSize: size, preallocEnd: size,
		last: last, idx: r.idx, sealed: true, rollAtMs: l.cfg.NowMs()}
	l.segs[len(l.segs)-1] = s
	l.leo, l.written, l.durable = last+1, last, last
	l.tabAdopt(base, last, cons)
	if err := l.fs.SyncDir(l.dir); err != nil {
		l.poison(err)
		return l.failed
	}
	for _, e := range r.epochs {
		l.epochs.assign(e.Epoch, e.StartOffset)
	}
	if err := l.persistEpochs(); err != nil {
		l.poison(err)
		return l.failed
	}
	if len(markers) > 0 {
		l.markers.entries = append(l.markers.entries, markers...)
		if err := l.persistMarkers(); err != nil {
			l.poison(err)
			return l.failed
		}
	}
	if err := l.writeIndexFiles(s); err != nil {
		l.poison(err)
		return l.failed
	}
	ns, err := l.createSegment(l.leo, true)
	if err != nil {
		l.poison(err)
		return l.failed
	}
	l.segs = append(l.segs, ns)
	return nil
}

// fileMarkers reads the marked batches (MarkerPayload) of a validated
// segment file at raft offset base, at or above from, and the raft
// offsets of its zero-width batches.
func fileMarkers(f interface {
	ReadAt([]byte, int64) (int, error)
}, size, base, from int64) ([]Marker, []int64, error) {
	var out []Marker
	var cons []int64
	var hdr [batch.HeaderSize]byte
	var buf []byte
	at := base
	for pos := int64(0); pos < size; {
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			return nil, nil, err
		}
		h, err := batch.ReadHeader(hdr[:])
		if err != nil {
			return nil, nil, err
		}
		if h.IsZeroWidth() {
			cons = append(cons, at)
		}
		if markerShaped(&h) {
			if at >= from && h.Size() <= batch.HeaderSize+64+MarkerBytesMax {
				buf = append(buf[:0], make([]byte, h.Size())...)
				if _, err := f.ReadAt(buf, pos); err != nil {
					return nil, nil, err
				}
				if p, ok := MarkerPayload(buf); ok {
					out = append(out, Marker{Offset: at, Payload: p})
				}
			}
		}
		pos += int64(h.Size())
		at += rwidth(&h)
	}
	return out, cons, nil
}

// SealedSegment describes one sealed segment of a log: offsets
// Base..Last in a file of Bytes bytes.
type SealedSegment struct {
	Base, Last, Bytes int64
}

// SealedSegments appends to dst the log's sealed segments that start at
// or above the log start (a segment retention cut into is not whole), in
// offset order: the ones a primary may send whole.
func (l *Log) SealedSegments(dst []SealedSegment) []SealedSegment {
	for _, s := range l.segs {
		if s.sealed && s.base >= l.logStart {
			dst = append(dst, SealedSegment{Base: s.base, Last: s.last, Bytes: s.size})
		}
	}
	return dst
}

// SegmentChunk returns the bytes [pos, pos+n) of the sealed segment
// starting at base as a Span (for sendfile; Release it), or
// ErrOffsetOutOfRange when there is no such sealed segment any more
// (retention removed it) or the range is outside its file.
func (l *Log) SegmentChunk(base, pos, n int64) (Span, error) {
	i := l.segFor(base)
	if i < 0 || l.segs[i].base != base || !l.segs[i].sealed || base < l.logStart {
		return Span{}, fmt.Errorf("%w: no sealed segment at %d", ErrOffsetOutOfRange, base)
	}
	s := l.segs[i]
	if pos < 0 || n <= 0 || pos+n > s.size {
		return Span{}, fmt.Errorf("%w: bytes [%d, %d) of segment %d of %d bytes", ErrOffsetOutOfRange, pos, pos+n, base, s.size)
	}
	s.file.acquire()
	return Span{file: s.file, Pos: pos, Len: n, FirstOffset: s.base, LastOffset: s.last}, nil
}

// ActiveBytes is the size of the active segment.
func (l *Log) ActiveBytes() int64 { return l.active().size }
