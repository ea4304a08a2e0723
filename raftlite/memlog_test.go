package raftlite

import (
	"errors"
	"testing"
)

func TestMemLog(t *testing.T) {
	l := NewMemLog()
	if _, err := l.Append(Entry{Base: 0, Last: 0, Term: 1, Bytes: 10}, Entry{Base: 1, Last: 4, Term: 1, Bytes: 20},
		Entry{Base: 5, Last: 5, Term: 2, Bytes: 30}, Entry{Base: 6, Last: 9, Term: 4, Bytes: 40}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		off  int64
		term int32
		err  error
	}{
		{-2, 0, ErrCompacted}, {-1, 0, nil}, {0, 1, nil}, {3, 1, nil}, {5, 2, nil}, {9, 4, nil}, {10, 0, ErrUnavailable},
	} {
		term, err := l.TermAt(tc.off)
		if term != tc.term || !errors.Is(err, tc.err) {
			t.Errorf("TermAt(%d) = %d, %v; want %d, %v", tc.off, term, err, tc.term, tc.err)
		}
	}
	for _, tc := range []struct {
		term int32
		end  int64
	}{{0, 0}, {1, 5}, {2, 6}, {3, 6}, {4, 10}, {9, 10}} {
		if end, _ := l.EndOffsetForTerm(tc.term); end != tc.end {
			t.Errorf("EndOffsetForTerm(%d) = %d, want %d", tc.term, end, tc.end)
		}
	}
	// Entries overlapping [2, 7): the batch covering 2 begins at 1.
	ents, err := l.Entries(2, 7, 1<<20, nil)
	if err != nil || len(ents) != 3 || ents[0].Base != 1 || ents[2].Base != 6 {
		t.Fatalf("Entries(2, 7) = %v, %v", ents, err)
	}
	// The byte bound stops after the batch that reaches it, never before
	// the first.
	if ents, _ := l.Entries(0, 10, 25, nil); len(ents) != 2 {
		t.Fatalf("Entries with 25 bytes = %v, want 2 batches", ents)
	}
	if ents, _ := l.Entries(6, 10, 1, nil); len(ents) != 1 {
		t.Fatalf("Entries with 1 byte = %v, want 1 batch", ents)
	}
	// Truncating append.
	removed, err := l.Append(Entry{Base: 5, Last: 7, Term: 3})
	if err != nil || len(removed) != 2 || l.EndOffset() != 8 {
		t.Fatalf("append at 5: removed %v, err %v, end %d", removed, err, l.EndOffset())
	}
	for _, bad := range [][]Entry{
		{{Base: 9, Last: 9, Term: 3}},  // gap
		{{Base: 3, Last: 3, Term: 3}},  // inside a batch
		{{Base: 8, Last: 8, Term: 2}},  // term going down
		{{Base: 8, Last: 7, Term: 3}},  // last before base
		{{Base: -1, Last: 0, Term: 3}}, // below start
	} {
		if _, err := l.Append(bad...); !errors.Is(err, ErrLogGap) {
			t.Errorf("Append(%v): err = %v, want ErrLogGap", bad, err)
		}
	}
	// Compaction keeps the term before the new start.
	if err := l.Compact(5); err != nil {
		t.Fatal(err)
	}
	if term, err := l.TermAt(4); term != 1 || err != nil {
		t.Fatalf("TermAt(start-1) = %d, %v", term, err)
	}
	if _, err := l.TermAt(3); !errors.Is(err, ErrCompacted) {
		t.Fatalf("TermAt below start: %v", err)
	}
	if err := l.Compact(6); !errors.Is(err, ErrLogGap) {
		t.Fatalf("compact inside a batch: %v", err)
	}
	if err := l.Compact(8); err != nil || l.StartOffset() != 8 || l.PrevTerm() != 3 {
		t.Fatalf("compact to end: %v start %d prev %d", err, l.StartOffset(), l.PrevTerm())
	}
	l.Reset(20, 7)
	if l.StartOffset() != 20 || l.EndOffset() != 20 {
		t.Fatal("reset")
	}
	if term, _ := l.TermAt(19); term != 7 {
		t.Fatalf("TermAt(19) after reset = %d", term)
	}
}

// TestMemLogConfAt checks the ConfLog side: the last configuration entry
// at or below an offset, the base kept across compaction and set by a
// reset, and "none" for a log that never held one.
func TestMemLogConfAt(t *testing.T) {
	c1 := Membership{Voters: NewReplicaSet(1, 2, 3), Learners: NewReplicaSet(4)}
	c2 := Membership{Voters: NewReplicaSet(1, 2, 3, 4)}
	l := NewMemLog()
	if _, err := l.Append(Entry{Base: 0, Last: 0, Term: 1}, Entry{Base: 1, Last: 1, Term: 1, Kind: EntryConfChange, Conf: c1},
		Entry{Base: 2, Last: 4, Term: 1}, Entry{Base: 5, Last: 5, Term: 2, Kind: EntryConfChange, Conf: c2},
		Entry{Base: 6, Last: 6, Term: 2}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		off  int64
		conf Membership
		at   int64
		ok   bool
		err  error
	}{
		{-2, Membership{}, -1, false, ErrCompacted}, {-1, Membership{}, -1, false, nil}, {0, Membership{}, -1, false, nil},
		{1, c1, 1, true, nil}, {4, c1, 1, true, nil}, {5, c2, 5, true, nil}, {6, c2, 5, true, nil},
		{7, Membership{}, -1, false, ErrUnavailable},
	} {
		conf, at, ok, err := l.ConfAt(tc.off)
		if conf != tc.conf || at != tc.at || ok != tc.ok || !errors.Is(err, tc.err) {
			t.Errorf("ConfAt(%d) = %v, %d, %v, %v; want %v, %d, %v, %v", tc.off, conf, at, ok, err, tc.conf, tc.at, tc.ok, tc.err)
		}
	}
	// Compacting past an entry keeps its configuration as the base.
	if err := l.Compact(2); err != nil {
		t.Fatal(err)
	}
	if conf, at, ok, _ := l.ConfAt(3); conf != c1 || at != 1 || !ok {
		t.Errorf("after Compact(2): ConfAt(3) = %v, %d, %v; want %v, 1, true", conf, at, ok, c1)
	}
	if conf, _, ok, _ := l.Clone().ConfAt(1); conf != c1 || !ok {
		t.Errorf("clone lost the base configuration: %v, %v", conf, ok)
	}
	// A truncation of the later entry falls back to the base.
	if _, err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if conf, _, _, _ := l.ConfAt(4); conf != c1 {
		t.Errorf("after TruncateTo(5): ConfAt(4) = %v, want %v", conf, c1)
	}
	// A reset records the configuration it carries.
	l.ResetTo(LogReset{Start: 10, PrevTerm: 3, Conf: c2})
	if conf, at, ok, _ := l.ConfAt(9); conf != c2 || at != 9 || !ok {
		t.Errorf("after ResetTo: ConfAt(9) = %v, %d, %v; want %v, 9, true", conf, at, ok, c2)
	}
}
