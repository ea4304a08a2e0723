package node

import "testing"

// A local replica's route never hides a newer generation learned from its
// primary (control-plane simulator seeds 98 and 397), and is otherwise
// the authority for its own group: same or newer generations replace.
func TestRoutesSetLocal(t *testing.T) {
	key := shardKey([16]byte{1}, 0)
	cases := []struct {
		name   string
		have   *route
		local  route
		stored bool
		want   route
	}{
		{"first route", nil, route{leader: 2, term: 1}, true, route{leader: 2, term: 1}},
		{"a replica that just opened keeps the announced primary", &route{leader: 2, term: 3}, route{leader: -1, term: 0}, false, route{leader: 2, term: 3}},
		{"a deposed local primary does not come back", &route{leader: 3, term: 3}, route{leader: 1, term: 2}, false, route{leader: 3, term: 3}},
		{"a newer local generation replaces", &route{leader: 3, term: 3}, route{leader: 1, term: 4}, true, route{leader: 1, term: 4}},
		{"a replica that forgot its dead primary says so", &route{leader: 3, term: 3}, route{leader: -1, term: 3}, true, route{leader: -1, term: 3}},
	}
	for _, c := range cases {
		var rt routes
		if c.have != nil {
			rt.learn(key, *c.have)
		}
		if got := rt.setLocal(key, c.local); got != c.stored {
			t.Errorf("%s: stored %v, want %v", c.name, got, c.stored)
		}
		if got, _ := rt.get(key); got.leader != c.want.leader || got.term != c.want.term {
			t.Errorf("%s: route %+v, want %+v", c.name, got, c.want)
		}
	}
}
