package raftlite

import (
	"fmt"
	"sort"
)

// Log is the read side of a group's log, as raftlite sees it. The segment log
// of a partition and MemLog both satisfy it. raftlite never writes through
// it: the node layer applies Ready.Reset and Ready.Entries to the log, then
// calls Advance, and from then on raftlite reads those entries through Log.
//
// Offsets: entries cover [StartOffset, EndOffset); the offset before the
// first entry is StartOffset-1 and its term is still known (0 for a log that
// has never held anything), because log matching needs it. The segment log
// keeps it in its leader-epoch cache; MemLog keeps it in a field.
//
// The log must stay consistent with what raftlite asked for: only the node
// layer changes it, only by applying Readys in order, and by moving the start
// forward (retention, snapshots) to at most Commit+1.
type Log interface {
	// StartOffset is the first offset held (inclusive).
	StartOffset() int64
	// EndOffset is one past the last offset held (exclusive); it equals
	// StartOffset when the log is empty.
	EndOffset() int64
	// TermAt returns the term of the batch that covers offset, for offset in
	// [StartOffset-1, EndOffset-1]. It returns ErrCompacted below that range
	// and ErrUnavailable above it.
	TermAt(offset int64) (int32, error)
	// EndOffsetForTerm returns the first offset whose batch has a term
	// greater than term, or EndOffset when there is none (Kafka's
	// OffsetsForLeaderEpoch). When even the entry at StartOffset-1 has a
	// greater term it returns StartOffset; callers treat the answer as an
	// upper bound.
	EndOffsetForTerm(term int32) (int64, error)
	// Entries appends to buf the metadata of the batches that overlap
	// offsets [lo, hi), in order, and returns the result. The first batch
	// may begin before lo. It stops once the returned batches hold at least
	// bytesMax bytes, but always returns at least one batch when lo < hi.
	// Data may be nil (by reference). It returns ErrCompacted when lo <
	// StartOffset and ErrUnavailable when hi > EndOffset.
	Entries(lo, hi int64, bytesMax int64, buf []Entry) ([]Entry, error)
}

// LogReset is a request to the node layer to replace the whole log with an
// empty one that starts at Start, with PrevTerm as the term of Start-1. For
// the metadata group Snapshot is the state-machine snapshot covering every
// offset below Start, to be installed; for partitions it is nil. Conf is
// the configuration in force at Start-1, which the log records as its base
// (see ConfLog); zero from a leader that knows none.
type LogReset struct {
	Start    int64
	PrevTerm int32
	Snapshot []byte
	Conf     Membership
	// Base is the leader's BaseAt(Start) (see BaseLog), 0 when its log
	// has none.
	Base int64
}

// BaseLog is implemented by a Log that keeps a number beside each offset
// which a follower restarting its log at that offset must take from the
// leader (the segment log's count of consensus entries below it, which
// translates its offsets into the ones clients see). raftlite carries
// BaseAt(start) in MsgReset to the follower's LogReset.Base and does
// nothing else with it.
type BaseLog interface {
	BaseAt(offset int64) (int64, error)
}

// baseAt is the stable log's BaseAt, 0 when it has none.
func (l *raftLog) baseAt(offset int64) int64 {
	if bl, ok := l.stable.(BaseLog); ok && l.reset == nil {
		if b, err := bl.BaseAt(offset); err == nil {
			return b
		}
	}
	return 0
}

// raftLog is raftlite's view of the log: the stable Log plus what the node
// layer has been asked to write but has not yet confirmed with Advance (in
// the manner of etcd's unstable log).
//
// Invariants:
//   - when reset is non-nil, the stable log is shadowed entirely: the view
//     starts at reset.Start with reset.PrevTerm at reset.Start-1.
//   - the view of the stable log ends at uoff (exclusive); stable entries at
//     or past uoff are shadowed (a truncation the node layer has yet to do);
//     stable.EndOffset() >= uoff unless reset is non-nil.
//   - unstable is contiguous from uoff; handedOut <= len(unstable) counts
//     the entries already given out in a Ready.
type raftLog struct {
	stable         Log
	reset          *LogReset
	resetHandedOut bool
	unstable       []Entry
	uoff           int64
	handedOut      int
}

func newRaftLog(stable Log) raftLog {
	return raftLog{stable: stable, uoff: stable.EndOffset()}
}

// start is the first offset of the view.
func (l *raftLog) start() int64 {
	if l.reset != nil {
		return l.reset.Start
	}
	return l.stable.StartOffset()
}

// end is one past the view's last offset.
func (l *raftLog) end() int64 {
	if n := len(l.unstable); n > 0 {
		return l.unstable[n-1].Last + 1
	}
	return l.uoff
}

// last is the view's last offset (start-1 when empty).
func (l *raftLog) last() int64 { return l.end() - 1 }

// termAt returns the term at offset in the view; see Log.TermAt.
func (l *raftLog) termAt(off int64) (int32, error) {
	start := l.start()
	switch {
	case off < start-1:
		return 0, ErrCompacted
	case off >= l.end():
		return 0, ErrUnavailable
	case off >= l.uoff:
		return l.unstable[l.unstableIndex(off)].Term, nil
	case off == start-1 && l.reset != nil:
		return l.reset.PrevTerm, nil
	}
	return l.stable.TermAt(off)
}

// lastTerm is the term of the last entry (or of start-1 when empty).
func (l *raftLog) lastTerm() int32 {
	t, err := l.termAt(l.last())
	if err != nil {
		panic(fmt.Sprintf("raftlite: term of last offset %d: %v", l.last(), err))
	}
	return t
}

// matchTerm reports whether the view holds term t at offset off.
func (l *raftLog) matchTerm(off int64, t int32) bool {
	got, err := l.termAt(off)
	return err == nil && got == t
}

// isUpToDate reports whether a log ending at (last, term) is at least as up
// to date as this one (Raft §5.4.1).
func (l *raftLog) isUpToDate(last int64, term int32) bool {
	lt := l.lastTerm()
	return term > lt || (term == lt && last >= l.last())
}

// unstableIndex returns the index of the unstable entry covering off.
// REQUIRES: uoff <= off < end().
func (l *raftLog) unstableIndex(off int64) int {
	return sort.Search(len(l.unstable), func(i int) bool { return l.unstable[i].Last >= off })
}

// endOffsetForTerm returns the first offset of the view whose term exceeds
// t (see Log.EndOffsetForTerm).
func (l *raftLog) endOffsetForTerm(t int32) (int64, error) {
	if l.reset == nil && l.uoff > l.stable.StartOffset() {
		s, err := l.stable.EndOffsetForTerm(t)
		if err != nil {
			return 0, err
		}
		if s < l.uoff {
			return s, nil
		}
	}
	i := sort.Search(len(l.unstable), func(i int) bool { return l.unstable[i].Term > t })
	if i < len(l.unstable) {
		return l.unstable[i].Base, nil
	}
	return l.end(), nil
}

// findConflictByTerm returns the largest offset <= off whose term is <= t,
// and that term; it never goes below start-1 (where it returns that offset
// and its term even if the term exceeds t).
func (l *raftLog) findConflictByTerm(off int64, t int32) (int64, int32) {
	if last := l.last(); off > last {
		off = last
	}
	if e, err := l.endOffsetForTerm(t); err == nil && e-1 < off {
		off = e - 1
	}
	if s := l.start() - 1; off < s {
		off = s
	}
	term, err := l.termAt(off)
	if err != nil {
		return l.start() - 1, 0
	}
	return off, term
}

// batchAt returns the entry covering off.
// REQUIRES: start() <= off < end().
func (l *raftLog) batchAt(off int64) (Entry, error) {
	if off >= l.uoff {
		return l.unstable[l.unstableIndex(off)], nil
	}
	var buf [1]Entry
	ents, err := l.stable.Entries(off, off+1, 1, buf[:0])
	if err != nil {
		return Entry{}, err
	}
	if len(ents) == 0 || ents[0].Base > off || ents[0].Last < off {
		return Entry{}, fmt.Errorf("raftlite: log returned no batch covering offset %d", off)
	}
	return ents[0], nil
}

// entries appends to buf the batches overlapping [lo, hi) of the view,
// stopping after bytesMax bytes (but returning at least one batch).
func (l *raftLog) entries(lo, hi, bytesMax int64, buf []Entry) ([]Entry, error) {
	if lo < l.start() {
		return buf, ErrCompacted
	}
	if hi > l.end() {
		return buf, ErrUnavailable
	}
	out := buf
	var size int64
	if lo < l.uoff {
		stHi := min(hi, l.uoff)
		var err error
		out, err = l.stable.Entries(lo, stHi, bytesMax, out)
		if err != nil {
			return buf, err
		}
		// Drop shadowed stable batches (a pending truncation).
		for len(out) > len(buf) && out[len(out)-1].Base >= l.uoff {
			out = out[:len(out)-1]
		}
		for _, e := range out[len(buf):] {
			size += int64(e.Bytes)
		}
		if size >= bytesMax || len(out) == len(buf) || out[len(out)-1].Last+1 < stHi {
			return out, nil
		}
		lo = out[len(out)-1].Last + 1
	}
	if lo >= hi {
		return out, nil
	}
	for i := l.unstableIndex(lo); i < len(l.unstable) && l.unstable[i].Base < hi; i++ {
		if size >= bytesMax && len(out) > len(buf) {
			break
		}
		out = append(out, l.unstable[i])
		size += int64(l.unstable[i].Bytes)
	}
	return out, nil
}

// appendLeader appends entries created by this node as leader.
// REQUIRES: ents[0].Base == end().
func (l *raftLog) appendLeader(ents ...Entry) {
	l.unstable = append(l.unstable, ents...)
}

// truncateAndAppend replaces the view from ents[0].Base onward with ents.
// The unstable slice is always rebuilt in fresh memory, so entries already
// handed out in a Ready (or carried by messages) are never overwritten.
// REQUIRES: start() <= ents[0].Base <= end(); the caller checked that no
// committed entry is replaced.
func (l *raftLog) truncateAndAppend(ents []Entry) {
	base := ents[0].Base
	switch {
	case base == l.end():
		l.unstable = append(l.unstable, ents...)
	case base <= l.uoff:
		l.unstable = append(make([]Entry, 0, len(ents)), ents...)
		l.uoff = base
		l.handedOut = 0
	default:
		i := l.unstableIndex(base)
		keep := make([]Entry, 0, i+len(ents))
		keep = append(keep, l.unstable[:i]...)
		l.unstable = append(keep, ents...)
		l.handedOut = min(l.handedOut, i)
	}
}

// resetTo makes the view an empty log starting at start.
func (l *raftLog) resetTo(r *LogReset) {
	l.reset = r
	l.resetHandedOut = false
	l.unstable = nil
	l.uoff = r.Start
	l.handedOut = 0
}

// hasPending reports whether a Ready has something to hand out.
func (l *raftLog) hasPending() bool {
	return (l.reset != nil && !l.resetHandedOut) || l.handedOut < len(l.unstable)
}

// takePending returns what the next Ready must carry and marks it handed
// out.
func (l *raftLog) takePending() (*LogReset, []Entry) {
	var r *LogReset
	if l.reset != nil && !l.resetHandedOut {
		r = l.reset
		l.resetHandedOut = true
	}
	ents := l.unstable[l.handedOut:len(l.unstable):len(l.unstable)]
	l.handedOut = len(l.unstable)
	if len(ents) == 0 {
		ents = nil
	}
	return r, ents
}

// advance records that the node layer applied r and ents to the stable log.
func (l *raftLog) advance(r *LogReset, ents []Entry) {
	if r != nil && r == l.reset {
		l.reset = nil
		l.resetHandedOut = false
	}
	// The entries handed out may since have been replaced (a truncation
	// after the Ready was taken). The ones still present are a prefix of
	// ents; find the last of them.
	for k := len(ents) - 1; k >= 0; k-- {
		e := ents[k]
		if e.Base < l.uoff || e.Last >= l.end() {
			continue
		}
		i := l.unstableIndex(e.Base)
		if u := l.unstable[i]; u.Base != e.Base || u.Last != e.Last || u.Term != e.Term {
			continue
		}
		l.unstable = l.unstable[i+1:]
		l.handedOut = max(0, l.handedOut-(i+1))
		l.uoff = e.Last + 1
		break
	}
	if len(l.unstable) == 0 {
		l.unstable = nil // let an idle group hold no buffer
		l.handedOut = 0
	}
}
