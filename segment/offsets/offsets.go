// Package offsets translates between a partition log's two offset spaces
// (docs/design/offsets.md): raft offsets, in which every entry of the
// consensus group takes offsets (data batches one per record, the leader
// no-op and configuration entries one each), and user offsets, in which
// only data records do, dense from 0. A consensus entry lies at a user
// position (the user offset of the next data record) but takes no user
// offset.
//
// With k(r) the number of consensus entries at raft offsets below r, a
// data record at raft offset r has user offset r - k(r). The table keeps
// the raft offsets of the consensus entries from the log start on, in
// order, and k at the log start (the base): lookups bisect, appends are
// O(1). It is a pure in-memory value: its owner rebuilds it from the log
// (epoch starts, markers and the base count in the log-start checkpoint)
// and keeps it in step with appends, truncations and the log start.
package offsets

import (
	"errors"
	"fmt"
	"sort"
)

// ConsensusEntriesMax bounds the consensus entries above the log start:
// one per term that wrote an entry plus one per membership change within
// the retained log (the epoch cache and the markers have bounds of the
// same order). Append refuses more with ErrFull.
const ConsensusEntriesMax = 1 << 21

// Errors returned by Table's methods.
var (
	// ErrNotContiguous: an append does not start at the table's end.
	ErrNotContiguous = errors.New("offsets: append not at the log end")
	// ErrOutOfRange: an offset lies outside [start, end] of the table.
	ErrOutOfRange = errors.New("offsets: offset out of range")
	// ErrFull: ConsensusEntriesMax consensus entries are held.
	ErrFull = errors.New("offsets: too many consensus entries above the log start")
)

// Table is the translation of one log. The zero value is an empty log
// starting at raft and user offset 0.
//
// Invariant: startRaft <= every cons[i] < endRaft, cons strictly
// increasing; base >= 0; endRaft - startRaft >= len(cons).
type Table struct {
	startRaft int64
	base      int64   // k(startRaft)
	cons      []int64 // raft offsets of the consensus entries >= startRaft
	endRaft   int64
}

// New returns the table of an empty log starting at raft offset start
// with base consensus entries below it. REQUIRES: 0 <= base <= start.
func New(start, base int64) *Table {
	if base < 0 || base > start {
		panic(fmt.Sprintf("offsets: base %d for start %d", base, start))
	}
	return &Table{startRaft: start, base: base, endRaft: start}
}

// StartRaft is the log start in raft offsets.
func (t *Table) StartRaft() int64 { return t.startRaft }

// EndRaft is the log end (next raft offset).
func (t *Table) EndRaft() int64 { return t.endRaft }

// Base is the number of consensus entries below the log start.
func (t *Table) Base() int64 { return t.base }

// StartUser is the log start in user offsets.
func (t *Table) StartUser() int64 { return t.startRaft - t.base }

// EndUser is the log end in user offsets: the next data record's offset.
func (t *Table) EndUser() int64 { return t.endRaft - t.base - int64(len(t.cons)) }

// Consensus is the number of consensus entries above the log start.
func (t *Table) Consensus() int { return len(t.cons) }

// AppendData records a data batch at raft offsets [base, last] and
// returns its user base offset.
func (t *Table) AppendData(base, last int64) (int64, error) {
	if base != t.endRaft || last < base {
		return 0, fmt.Errorf("%w: data [%d, %d], end %d", ErrNotContiguous, base, last, t.endRaft)
	}
	u := t.EndUser()
	t.endRaft = last + 1
	return u, nil
}

// AppendConsensus records a consensus entry at raft offset r and returns
// its user position (the user offset of the data record after it).
func (t *Table) AppendConsensus(r int64) (int64, error) {
	if r != t.endRaft {
		return 0, fmt.Errorf("%w: consensus entry at %d, end %d", ErrNotContiguous, r, t.endRaft)
	}
	if len(t.cons) >= ConsensusEntriesMax {
		return 0, ErrFull
	}
	u := t.EndUser()
	t.cons = append(t.cons, r)
	t.endRaft = r + 1
	return u, nil
}

// K returns the number of consensus entries at raft offsets below r.
// REQUIRES: StartRaft() <= r <= EndRaft().
func (t *Table) K(r int64) (int64, error) {
	if r < t.startRaft || r > t.endRaft {
		return 0, fmt.Errorf("%w: raft offset %d, log [%d, %d]", ErrOutOfRange, r, t.startRaft, t.endRaft)
	}
	return t.base + int64(t.below(r)), nil
}

// below is the number of held consensus entries at raft offsets < r.
func (t *Table) below(r int64) int {
	return sort.Search(len(t.cons), func(i int) bool { return t.cons[i] >= r })
}

// IsConsensus reports whether raft offset r holds a consensus entry.
func (t *Table) IsConsensus(r int64) bool {
	i := t.below(r)
	return i < len(t.cons) && t.cons[i] == r
}

// ToUser returns the user offset of the data record at raft offset r, or
// the user position of the consensus entry there; r == EndRaft() gives
// EndUser().
func (t *Table) ToUser(r int64) (int64, error) {
	k, err := t.K(r)
	if err != nil {
		return 0, err
	}
	return r - k, nil
}

// ToRaft returns the raft offset of the data record with user offset u
// (u == EndUser() gives EndRaft()): u plus the consensus entries at user
// positions up to u, which lie before it.
func (t *Table) ToRaft(u int64) (int64, error) {
	if u < t.StartUser() || u > t.EndUser() {
		return 0, fmt.Errorf("%w: user offset %d, log [%d, %d]", ErrOutOfRange, u, t.StartUser(), t.EndUser())
	}
	if u == t.EndUser() {
		return t.endRaft, nil
	}
	// The position of cons[i] is cons[i] - base - i: non-decreasing in i.
	n := sort.Search(len(t.cons), func(i int) bool { return t.cons[i]-t.base-int64(i) > u })
	return u + t.base + int64(n), nil
}

// ConsensusAt returns the user positions of the consensus entries whose
// position lies in [lo, hi), appended to dst in order: the batches a
// client fetch of that user range leaves out.
func (t *Table) ConsensusAt(lo, hi int64, dst []int64) []int64 {
	i := sort.Search(len(t.cons), func(i int) bool { return t.cons[i]-t.base-int64(i) >= lo })
	for ; i < len(t.cons); i++ {
		p := t.cons[i] - t.base - int64(i)
		if p >= hi {
			break
		}
		dst = append(dst, p)
	}
	return dst
}

// TruncateTo drops every entry at raft offset >= end (a divergent tail).
func (t *Table) TruncateTo(end int64) error {
	if end < t.startRaft || end > t.endRaft {
		return fmt.Errorf("%w: truncate to %d, log [%d, %d]", ErrOutOfRange, end, t.startRaft, t.endRaft)
	}
	t.cons = t.cons[:t.below(end)]
	t.endRaft = end
	return nil
}

// AdvanceStart moves the log start to raft offset start (retention): the
// consensus entries below it join the base.
func (t *Table) AdvanceStart(start int64) error {
	if start < t.startRaft || start > t.endRaft {
		return fmt.Errorf("%w: start %d, log [%d, %d]", ErrOutOfRange, start, t.startRaft, t.endRaft)
	}
	n := t.below(start)
	t.base += int64(n)
	t.cons = append(t.cons[:0], t.cons[n:]...)
	t.startRaft = start
	return nil
}

// Reset empties the table to a log starting at raft offset start with
// base consensus entries below it (a follower's log replaced).
// REQUIRES: 0 <= base <= start.
func (t *Table) Reset(start, base int64) {
	if base < 0 || base > start {
		panic(fmt.Sprintf("offsets: base %d for start %d", base, start))
	}
	*t = Table{startRaft: start, base: base, cons: t.cons[:0], endRaft: start}
}
