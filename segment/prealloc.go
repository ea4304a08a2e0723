package segment

import (
	"fmt"

	"github.com/corestream/corestream/segment/vfs"
)

// preallocMinBytes is the size a segment reaches before anything is
// prepared ahead of it (a partition holding a few records reserves
// nothing); from there steps double with the segment's size up to
// PreallocateBytes.
const preallocMinBytes = 64 << 10

// preallocate prepares space ahead of the active segment's write position
// once the position passes half of what is prepared: never the whole
// segment, and in steps that grow with what the segment already holds
// (nothing below 64 KiB, then as much again as it holds, at most
// Config.PreallocateBytes), so a broker with 10,000 partitions that each
// received one message reserves nothing, not 10,000 × 8 MiB. Failures are not fatal: the data write
// itself says whether space is there.
func (l *Log) preallocate(s *segment) {
	step := min(l.cfg.PreallocateBytes, s.size)
	if s.size < preallocMinBytes || step <= 0 || s.size+step/2 < s.preallocEnd || s.preallocEnd >= l.cfg.SegmentBytes {
		return
	}
	from := max(s.preallocEnd, s.size)
	n := min(step, l.cfg.SegmentBytes-from)
	if n <= 0 {
		return
	}
	if l.cfg.Preallocate != PreallocZeroFill {
		_ = s.file.f.Preallocate(from, n, true)
		s.preallocEnd = from + n
		return
	}
	if l.zerosInFlight > 0 {
		return // one step at a time
	}
	zeros, err := l.io.zeroBuf()
	if err != nil {
		return
	}
	// Writes beyond everything appended so far: no data write overlaps
	// them until awaitZeros says so.
	s.zeroedEnd, s.zeroingEnd = from, from+n
	for off := from; off < from+n; off += int64(len(zeros)) {
		o := l.io.newOp()
		*o = op{log: l, file: s.file, seg: s, zero: true, pos: off,
			data: zeros[:min(int64(len(zeros)), from+n-off)], sync: true}
		s.file.acquire()
		l.zerosInFlight++
		l.io.start(o)
	}
	s.preallocEnd = from + n
}

// awaitZeros waits until no zero-fill write overlaps [from, to).
func (l *Log) awaitZeros(s *segment, from, to int64) {
	if l.zerosInFlight == 0 || to <= s.zeroedEnd || from >= s.zeroingEnd {
		return
	}
	_ = l.io.waitFor(func() bool { return l.zerosInFlight == 0 })
}

// zeroDone handles a zero-fill completion. A write that found no space is
// only a missed preallocation; a failed sync may have dropped data pages of
// the same file, so it fails the log like any failed sync.
func (l *Log) zeroDone(o *op, err error) {
	l.zerosInFlight--
	if err != nil && !vfs.IsNoSpace(err) {
		l.poison(fmt.Errorf("zero-fill: %w", err))
	}
	if l.zerosInFlight == 0 {
		o.seg.zeroedEnd = o.seg.zeroingEnd
	}
	o.file.release()
	l.io.freeOp(o)
}
