package raftlite

import (
	"errors"
	"fmt"
	"sort"
)

// ErrLogGap is returned by MemLog.Append for entries that do not continue
// the log (a gap, an overlap below the start, or an out-of-order batch).
var ErrLogGap = errors.New("raftlite: entries do not continue the log")

// MemLog is an in-memory Log: the simulator's and the tests' log, and a
// model of what the segment log must do. It also offers the write side the
// node layer needs (Append with truncation, Reset, Compact). Not safe for
// concurrent use.
//
// Invariant: entries are contiguous, entries[0].Base == start, terms never
// decrease, and prevTerm (the term at start-1) <= entries[0].Term.
// baseConf is the configuration in force at start-1 (zero: none known).
type MemLog struct {
	start    int64
	prevTerm int32
	baseConf Membership
	entries  []Entry
}

var _ ConfLog = (*MemLog)(nil)

// NewMemLog returns an empty log starting at offset 0.
func NewMemLog() *MemLog { return &MemLog{} }

// NewMemLogAt returns an empty log starting at start whose previous entry
// has term prevTerm.
func NewMemLogAt(start int64, prevTerm int32) *MemLog {
	return &MemLog{start: start, prevTerm: prevTerm}
}

// StartOffset implements Log.
func (l *MemLog) StartOffset() int64 { return l.start }

// EndOffset implements Log.
func (l *MemLog) EndOffset() int64 {
	if n := len(l.entries); n > 0 {
		return l.entries[n-1].Last + 1
	}
	return l.start
}

// index returns the index of the batch covering off.
// REQUIRES: start <= off < EndOffset().
func (l *MemLog) index(off int64) int {
	return sort.Search(len(l.entries), func(i int) bool { return l.entries[i].Last >= off })
}

// TermAt implements Log.
func (l *MemLog) TermAt(off int64) (int32, error) {
	switch {
	case off < l.start-1:
		return 0, ErrCompacted
	case off >= l.EndOffset():
		return 0, ErrUnavailable
	case off == l.start-1:
		return l.prevTerm, nil
	}
	return l.entries[l.index(off)].Term, nil
}

// EndOffsetForTerm implements Log.
func (l *MemLog) EndOffsetForTerm(term int32) (int64, error) {
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].Term > term })
	if i < len(l.entries) {
		return l.entries[i].Base, nil
	}
	return l.EndOffset(), nil
}

// Entries implements Log. The returned entries carry their Data.
func (l *MemLog) Entries(lo, hi, bytesMax int64, buf []Entry) ([]Entry, error) {
	if lo < l.start {
		return buf, ErrCompacted
	}
	if hi > l.EndOffset() {
		return buf, ErrUnavailable
	}
	var size int64
	n0 := len(buf)
	for i := l.index(lo); i < len(l.entries) && l.entries[i].Base < hi; i++ {
		if size >= bytesMax && len(buf) > n0 {
			break
		}
		buf = append(buf, l.entries[i])
		size += int64(l.entries[i].Bytes)
	}
	return buf, nil
}

// Append writes ents after truncating the log to end at ents[0].Base. It
// returns the entries it removed (for checkers) and ErrLogGap when ents do
// not continue the log.
func (l *MemLog) Append(ents ...Entry) (removed []Entry, err error) {
	if len(ents) == 0 {
		return nil, nil
	}
	base := ents[0].Base
	if base < l.start || base > l.EndOffset() {
		return nil, fmt.Errorf("%w: base %d, log [%d, %d)", ErrLogGap, base, l.start, l.EndOffset())
	}
	prevTerm := l.prevTerm
	if base > l.start {
		prevTerm, _ = l.TermAt(base - 1)
	}
	next := base
	for _, e := range ents {
		if e.Base != next || e.Last < e.Base || e.Term < prevTerm {
			return nil, fmt.Errorf("%w: %v after %d/%d", ErrLogGap, e, prevTerm, next-1)
		}
		next, prevTerm = e.Last+1, e.Term
	}
	i := len(l.entries)
	if base < l.EndOffset() {
		i = l.index(base)
		if l.entries[i].Base != base {
			return nil, fmt.Errorf("%w: truncation at %d inside batch %v", ErrLogGap, base, l.entries[i])
		}
		removed = append(removed, l.entries[i:]...)
	}
	l.entries = append(l.entries[:i], ents...)
	return removed, nil
}

// Reset replaces the log with an empty one starting at start, whose
// previous entry has term prevTerm (a follower brought forward to the
// leader's log start). It returns the entries it removed. The base
// configuration becomes unknown; ResetTo records one.
func (l *MemLog) Reset(start int64, prevTerm int32) (removed []Entry) {
	return l.ResetTo(LogReset{Start: start, PrevTerm: prevTerm})
}

// ResetTo applies a Ready's LogReset: Reset, recording r.Conf as the
// configuration in force at r.Start-1.
func (l *MemLog) ResetTo(r LogReset) (removed []Entry) {
	removed = l.entries
	l.start, l.prevTerm, l.entries = r.Start, r.PrevTerm, nil
	l.baseConf = r.Conf
	return removed
}

// ConfAt implements ConfLog by scanning the entries back from offset
// (bounded by their number).
func (l *MemLog) ConfAt(off int64) (conf Membership, at int64, ok bool, err error) {
	switch {
	case off < l.start-1:
		return Membership{}, -1, false, ErrCompacted
	case off >= l.EndOffset():
		return Membership{}, -1, false, ErrUnavailable
	}
	if off >= l.start {
		for i := l.index(off); i >= 0; i-- {
			if e := l.entries[i]; e.Kind == EntryConfChange && e.Last <= off {
				return e.Conf, e.Last, true, nil
			}
		}
	}
	if l.baseConf.IsZero() {
		return Membership{}, -1, false, nil
	}
	return l.baseConf, l.start - 1, true, nil
}

// Compact moves the log start forward to start (retention, or a snapshot
// taken up to start-1), keeping the term of start-1.
// REQUIRES: start is a batch boundary in [StartOffset, EndOffset].
func (l *MemLog) Compact(start int64) error {
	if start <= l.start {
		return nil
	}
	if start > l.EndOffset() {
		return fmt.Errorf("%w: compact to %d past end %d", ErrLogGap, start, l.EndOffset())
	}
	if conf, _, ok, _ := l.ConfAt(start - 1); ok {
		l.baseConf = conf // the configuration at the new start-1
	}
	if start == l.EndOffset() {
		l.prevTerm = l.entries[len(l.entries)-1].Term
		l.start, l.entries = start, nil
		return nil
	}
	i := l.index(start)
	if l.entries[i].Base != start {
		return fmt.Errorf("%w: compact to %d inside batch %v", ErrLogGap, start, l.entries[i])
	}
	l.prevTerm = l.entries[i-1].Term
	l.start = start
	l.entries = append([]Entry(nil), l.entries[i:]...)
	return nil
}

// All returns the log's entries (shared; do not modify).
func (l *MemLog) All() []Entry { return l.entries }

// PrevTerm is the term at StartOffset-1.
func (l *MemLog) PrevTerm() int32 { return l.prevTerm }

// Clone returns a copy that shares entry Data (which is never modified).
func (l *MemLog) Clone() *MemLog {
	return &MemLog{start: l.start, prevTerm: l.prevTerm, baseConf: l.baseConf, entries: append([]Entry(nil), l.entries...)}
}

// TruncateTo drops every entry at or past end, which must be a batch
// boundary (a crash that loses an unsynced tail). It returns the removed
// entries.
func (l *MemLog) TruncateTo(end int64) ([]Entry, error) {
	if end >= l.EndOffset() {
		return nil, nil
	}
	if end < l.start {
		return nil, fmt.Errorf("%w: truncate to %d below start %d", ErrLogGap, end, l.start)
	}
	i := l.index(end)
	if l.entries[i].Base != end {
		return nil, fmt.Errorf("%w: truncate to %d inside batch %v", ErrLogGap, end, l.entries[i])
	}
	removed := append([]Entry(nil), l.entries[i:]...)
	l.entries = l.entries[:i:i]
	return removed, nil
}
