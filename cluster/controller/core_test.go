package controller

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/raftlite"
)

// The readiness rule (LoadedIn), case by case.
func TestLoadedIn(t *testing.T) {
	cases := []struct {
		name string
		core Core
		term int32
		led  bool
		want bool
	}{
		{"nothing ever elected", Core{applied: -1}, 0, false, false},
		{"an entry of the current term applied", Core{applied: 7, appliedTerm: 3}, 3, true, true},
		{"only entries of an older term applied", Core{applied: 7, appliedTerm: 2}, 3, true, false},
		{"no primary followed in the term", Core{applied: 7, appliedTerm: 3}, 3, false, false},
		{"the primary's snapshot of this term installed", Core{applied: 9, appliedTerm: 2, resetAt: 9, resetTerm: 3}, 3, true, true},
		{"the primary's snapshot not installed yet", Core{applied: 4, resetAt: 9, resetTerm: 3}, 3, true, false},
	}
	for _, c := range cases {
		if got := c.core.LoadedIn(c.term, c.led); got != c.want {
			t.Errorf("%s: LoadedIn = %v, want %v", c.name, got, c.want)
		}
	}
}

// A node started from a snapshot that ends at an entry of the current term
// is loaded once it follows that term's primary, with nothing new to
// apply (control-plane simulator, seed 146: it waited for the next
// metadata write); a snapshot of an older term, or an offset the log no
// longer knows, still waits.
func TestRestoredSnapshotTerm(t *testing.T) {
	log := raftlite.NewMemLogAt(10, 3) // compacted up to the snapshot at 9, of term 3
	m := Core{applied: 9}
	m.Restored(log.TermAt)
	if !m.LoadedIn(3, true) {
		t.Fatalf("a snapshot ending in term 3 is not loaded in term 3 (applied term %d)", m.appliedTerm)
	}
	if m.LoadedIn(4, true) {
		t.Fatal("a snapshot ending in term 3 is loaded in term 4")
	}
	gone := Core{applied: 9}
	gone.Restored(func(int64) (int32, error) { return 0, errors.New("compacted") })
	if gone.appliedTerm != 0 || gone.LoadedIn(3, true) {
		t.Fatal("an unknown snapshot term counts as loaded")
	}
	none := Core{applied: -1}
	none.Restored(log.TermAt)
	if none.appliedTerm != 0 {
		t.Fatal("a node without a snapshot took a term")
	}
}
