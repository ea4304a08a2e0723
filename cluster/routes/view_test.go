package routes

import "testing"

// A local replica's route never hides a newer generation learned from its
// primary (control-plane simulator seeds 98 and 397), and is otherwise
// the authority for its own group: same or newer generations replace.
func TestRoutesSetLocal(t *testing.T) {
	key := Key([16]byte{1}, 0)
	cases := []struct {
		name   string
		have   *Route
		local  Route
		stored bool
		want   Route
	}{
		{"first route", nil, Route{Leader: 2, Term: 1}, true, Route{Leader: 2, Term: 1}},
		{"a replica that just opened keeps the announced primary", &Route{Leader: 2, Term: 3}, Route{Leader: -1, Term: 0}, false, Route{Leader: 2, Term: 3}},
		{"a deposed local primary does not come back", &Route{Leader: 3, Term: 3}, Route{Leader: 1, Term: 2}, false, Route{Leader: 3, Term: 3}},
		{"a newer local generation replaces", &Route{Leader: 3, Term: 3}, Route{Leader: 1, Term: 4}, true, Route{Leader: 1, Term: 4}},
		{"a replica that forgot its dead primary says so", &Route{Leader: 3, Term: 3}, Route{Leader: -1, Term: 3}, true, Route{Leader: -1, Term: 3}},
	}
	for _, c := range cases {
		var rt Table
		if c.have != nil {
			rt.Learn(key, *c.have)
		}
		if got := rt.SetLocal(key, c.local); got != c.stored {
			t.Errorf("%s: stored %v, want %v", c.name, got, c.stored)
		}
		if got, _ := rt.Get(key); got.Leader != c.want.Leader || got.Term != c.want.Term {
			t.Errorf("%s: route %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Announced undoes Announcement: a route sent to the peers is learned
// there as it was, its in-sync set included (nodes 1 and 32 are the
// mask's ends); the metadata group's key is the one every node uses.
func TestRoutesAnnouncedRoundTrip(t *testing.T) {
	for _, r := range []Route{
		{Leader: 3, Term: 7, InSync: []int32{1, 3, 32}},
		{Leader: 1, Term: 1},
	} {
		key := Key([16]byte{9, 8, 7}, 5)
		gotKey, got := Announced(Announcement(key, r))
		if gotKey != key || got.Leader != r.Leader || got.Term != r.Term || len(got.InSync) != len(r.InSync) {
			t.Fatalf("Announced(Announcement(%v)) = %x %+v", r, gotKey, got)
		}
		for i := range r.InSync {
			if got.InSync[i] != r.InSync[i] {
				t.Fatalf("in-sync set %v came back as %v", r.InSync, got.InSync)
			}
		}
	}
	if MetaKey != Key(MetaTopicID, 0) {
		t.Fatal("MetaKey is not the metadata group's key")
	}
}
