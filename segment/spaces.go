package segment

import (
	"fmt"
	"slices"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/offsets"
)

// rwidth is the number of raft offsets a batch takes: one for a
// zero-width consensus batch, one per offset of its records otherwise
// (docs/design/offsets.md). Its user offsets run from h.BaseOffset to
// h.LastOffset(), none for a zero-width batch.
func rwidth(h *batch.Header) int64 { return h.RaftWidth() }

// rlast is the raft offset of the last record of a batch at raft base.
func rlast(h *batch.Header, base int64) int64 { return base + rwidth(h) - 1 }

// tabAppend enters a batch at raft offset base in the translation.
func (l *Log) tabAppend(h *batch.Header, base int64) {
	var err error
	if h.IsZeroWidth() {
		_, err = l.tab.AppendConsensus(base)
	} else {
		_, err = l.tab.AppendData(base, rlast(h, base))
	}
	if err != nil {
		// The log's own bookkeeping disagrees with itself.
		panic(fmt.Sprintf("segment: %s: %v", l.dir, err))
	}
}

// tabAdopt enters raft offsets [base, last] in the translation, with the
// zero-width batches at the raft offsets cons (in order) and data batches
// between them.
func (l *Log) tabAdopt(base, last int64, cons []int64) {
	next := base
	for _, c := range cons {
		if c > next {
			l.tabMust(l.tab.AppendData(next, c-1))
		}
		l.tabMust(l.tab.AppendConsensus(c))
		next = c + 1
	}
	if last >= next {
		l.tabMust(l.tab.AppendData(next, last))
	}
}

func (l *Log) tabMust(_ int64, err error) {
	if err != nil {
		panic(fmt.Sprintf("segment: %s: %v", l.dir, err))
	}
}

// recoverTable rebuilds the translation at open (docs/design/offsets.md):
// base is the log-start checkpoint's count, and the zero-width batches
// are found where they can be: each is a term's no-op, at the start of
// its epoch, or a configuration entry, at its marker. Each candidate is
// checked against its header; the last batch's user end must then match
// the table's, or every header of the log is walked (the headers are the
// truth, the epochs and markers a cache of them). REQUIRES: segments,
// epochs and markers recovered.
func (l *Log) recoverTable(base int64) error {
	if l.leo == l.logStart {
		l.tab = *offsets.New(l.logStart, min(base, l.logStart))
		return nil
	}
	first, _, err := l.headerAt(l.logStart)
	if err != nil {
		return err
	}
	// The first batch says how many consensus entries lie below it.
	base = l.logStart - first.BaseOffset
	if base < 0 || base > l.logStart {
		return fmt.Errorf("%w: the batch at %d has user offset %d", ErrCorrupt, l.logStart, first.BaseOffset)
	}
	var cand []int64
	for _, e := range l.epochs.entries {
		cand = append(cand, e.StartOffset)
	}
	for _, m := range l.markers.entries {
		cand = append(cand, m.Offset)
	}
	slices.Sort(cand)
	cand = slices.Compact(cand)
	var cons []int64
	for _, c := range cand {
		if c < l.logStart || c >= l.leo {
			continue
		}
		h, at, err := l.headerAt(c)
		if err != nil {
			return err
		}
		if at == c && h.IsZeroWidth() {
			cons = append(cons, c)
		}
	}
	l.tab = *offsets.New(l.logStart, base)
	l.tabAdopt(l.logStart, l.leo-1, cons)
	last, _, err := l.headerAt(l.leo - 1)
	if err != nil {
		return err
	}
	if last.LastOffset()+1 == l.tab.EndUser() {
		return nil
	}
	return l.rebuildTable(base)
}

// rebuildTable walks every batch header from the log start.
func (l *Log) rebuildTable(base int64) error {
	l.report.TableRebuilt = true
	var cons []int64
	for _, s := range l.segs {
		if s.last < l.logStart {
			continue
		}
		pos, at := int64(0), s.base
		for pos < s.writtenSize {
			h, err := readHeader(s.file.f, pos, &l.hdr)
			if err != nil {
				return err
			}
			if h.IsZeroWidth() && at >= l.logStart {
				cons = append(cons, at)
			}
			pos += int64(h.Size())
			at += rwidth(&h)
		}
	}
	l.tab = *offsets.New(l.logStart, base)
	l.tabAdopt(l.logStart, l.leo-1, cons)
	last, _, err := l.headerAt(l.leo - 1)
	if err != nil {
		return err
	}
	if got := last.LastOffset() + 1; got != l.tab.EndUser() {
		return fmt.Errorf("%w: the log ends at user offset %d, its consensus batches say %d", ErrCorrupt, got, l.tab.EndUser())
	}
	return nil
}

// headerAt reads the header of the batch holding raft offset r and
// returns it with that batch's raft base. REQUIRES: r written.
func (l *Log) headerAt(r int64) (batch.Header, int64, error) {
	s := l.segs[l.segFor(r)]
	if err := l.loadIndex(s); err != nil {
		return batch.Header{}, 0, err
	}
	pos, base, err := l.positionOf(s, r)
	if err != nil {
		return batch.Header{}, 0, err
	}
	h, err := readHeader(s.file.f, pos, &l.hdr)
	return h, base, err
}
