package partition

import (
	"errors"
	"fmt"
	"sort"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
)

// tailEntriesMax is how much entry metadata is kept in memory for the
// newest batches (the ones followers ask for): the tail is trimmed back to
// it once it holds twice as many, so that trimming costs O(1) per append
// rather than a shift of the whole tail on every one. Older ranges are
// read from the segment files.
const tailEntriesMax = 4096

// raftLog is the read side of the segment log as raftlite sees it
// (raftlite.Log). It keeps the metadata of the newest batches in memory:
// raftlite asks for entries right after they are appended, before the
// kernel has written them, and the segment log only reads written bytes.
//
// Invariant: tail holds contiguous entries ending at the log end; every
// entry above the log's written offset is in tail.
type raftLog struct {
	log  *segment.Log
	tail []raftlite.Entry
	// scratch is reused for header reads.
	scratch [batch.HeaderSize]byte
}

var _ raftlite.ConfLog = (*raftLog)(nil)

// ConfAt implements raftlite.ConfLog from the segment log's markers: every
// configuration entry is a marked batch (see membership.go), and the
// marker of offset StartOffset-1 is the configuration a reset or
// retention left as the log's base.
func (r *raftLog) ConfAt(offset int64) (raftlite.Membership, int64, bool, error) {
	start, end := r.log.LogStartOffset(), r.log.LogEndOffset()
	switch {
	case offset < start-1:
		return raftlite.Membership{}, -1, false, raftlite.ErrCompacted
	case offset >= end:
		return raftlite.Membership{}, -1, false, raftlite.ErrUnavailable
	}
	m, ok := r.log.MarkerAt(offset)
	if !ok {
		return raftlite.Membership{}, -1, false, nil
	}
	conf, err := decodeConf(m.Payload)
	if err != nil {
		return raftlite.Membership{}, -1, false, fmt.Errorf("%w: marker at %d: %v", segment.ErrCorrupt, m.Offset, err)
	}
	return conf, m.Offset, true, nil
}

// BaseAt implements raftlite.BaseLog: the consensus entries below offset,
// which a follower reset to start there needs to give its records their
// user offsets (docs/design/offsets.md).
func (r *raftLog) BaseAt(offset int64) (int64, error) { return r.log.ConsensusBelow(offset) }

var _ raftlite.BaseLog = (*raftLog)(nil)

func (r *raftLog) StartOffset() int64 { return r.log.LogStartOffset() }
func (r *raftLog) EndOffset() int64   { return r.log.LogEndOffset() }

// TermAt implements raftlite.Log.
func (r *raftLog) TermAt(offset int64) (int32, error) {
	start, end := r.log.LogStartOffset(), r.log.LogEndOffset()
	switch {
	case offset < start-1:
		return 0, raftlite.ErrCompacted
	case offset >= end:
		return 0, raftlite.ErrUnavailable
	case offset == start-1:
		return r.log.EpochBeforeStart(), nil
	}
	t, err := r.log.TermAt(offset)
	if err != nil {
		return 0, fmt.Errorf("partition: term at %d: %w", offset, err)
	}
	return t, nil
}

// EndOffsetForTerm implements raftlite.Log.
func (r *raftLog) EndOffsetForTerm(term int32) (int64, error) {
	start, end := r.log.LogStartOffset(), r.log.LogEndOffset()
	if start == end || term >= r.log.LastEpoch() {
		return end, nil
	}
	if term < 0 || r.log.EpochBeforeStart() > term {
		return start, nil
	}
	_, off := r.log.EndOffsetForEpoch(term)
	if off < 0 {
		return end, nil
	}
	return min(max(off, start), end), nil
}

// Entries implements raftlite.Log.
func (r *raftLog) Entries(lo, hi int64, bytesMax int64, buf []raftlite.Entry) ([]raftlite.Entry, error) {
	if lo < r.log.LogStartOffset() {
		return buf, raftlite.ErrCompacted
	}
	if hi > r.log.LogEndOffset() {
		return buf, raftlite.ErrUnavailable
	}
	if lo >= hi {
		return buf, nil
	}
	if n := len(r.tail); n > 0 && lo >= r.tail[0].Base {
		var total int64
		// The tail is contiguous: the first entry holding lo is found by
		// bisection (followers ask for the newest few of thousands).
		first := sort.Search(n, func(i int) bool { return r.tail[i].Last >= lo })
		for _, e := range r.tail[first:] {
			if e.Base >= hi || (total >= bytesMax && total > 0) {
				break
			}
			e.Data = nil
			buf = append(buf, e)
			total += int64(e.Bytes)
		}
		return buf, nil
	}
	return r.scan(lo, hi, bytesMax, buf)
}

// scan reads batch headers from the segment files for [lo, hi).
func (r *raftLog) scan(lo, hi, bytesMax int64, buf []raftlite.Entry) ([]raftlite.Entry, error) {
	upTo := min(hi-1, r.log.WrittenOffset())
	spans, err := r.log.Read(lo, int(min(bytesMax, 1<<30)), upTo)
	if err != nil {
		return buf, fmt.Errorf("partition: entries [%d, %d): %w", lo, hi, err)
	}
	defer segment.ReleaseSpans(spans)
	var total int64
	for _, sp := range spans {
		at := sp.FirstOffset // raft offsets; the headers carry user ones
		for pos := sp.Pos; pos < sp.Pos+sp.Len; {
			if _, err := sp.File().ReadAt(r.scratch[:], pos); err != nil {
				return buf, fmt.Errorf("partition: batch header at %d: %w", pos, err)
			}
			h, err := batch.ReadHeader(r.scratch[:])
			if err != nil {
				return buf, fmt.Errorf("partition: batch header at %d: %w", pos, err)
			}
			if at >= hi || (total >= bytesMax && total > 0) {
				return buf, nil
			}
			e := raftlite.Entry{Base: at, Last: at + h.RaftWidth() - 1,
				Term: h.PartitionLeaderEpoch, Bytes: int32(h.Size())}
			if h.IsControl() {
				if m, ok := r.log.MarkerOf(e.Last); ok {
					conf, err := decodeConf(m.Payload)
					if err != nil {
						return buf, fmt.Errorf("partition: configuration entry at %d: %w", e.Last, err)
					}
					e.Kind, e.Conf = raftlite.EntryConfChange, conf
				}
			}
			buf = append(buf, e)
			total += int64(h.Size())
			pos += int64(h.Size())
			at += h.RaftWidth()
		}
	}
	if len(buf) == 0 {
		return buf, errors.New("partition: no batch found in a non-empty range")
	}
	return buf, nil
}

// appended records a batch just appended (its metadata, not its bytes).
func (r *raftLog) appended(e raftlite.Entry) {
	e.Data = nil
	r.tail = append(r.tail, e)
	r.trim()
}

// trim drops tail entries beyond the bound that are already written, once
// the tail holds twice the bound.
func (r *raftLog) trim() {
	if len(r.tail) <= 2*tailEntriesMax {
		return
	}
	written := r.log.WrittenOffset()
	n := 0
	for n < len(r.tail)-tailEntriesMax && r.tail[n].Last <= written {
		n++
	}
	if n > 0 {
		r.tail = append(r.tail[:0], r.tail[n:]...)
	}
}

// truncated forgets entries at or above end.
func (r *raftLog) truncated(end int64) {
	for len(r.tail) > 0 && r.tail[len(r.tail)-1].Base >= end {
		r.tail = r.tail[:len(r.tail)-1]
	}
}

// reset forgets everything (the log was replaced).
func (r *raftLog) reset() { r.tail = r.tail[:0] }
