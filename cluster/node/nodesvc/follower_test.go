package nodesvc

import (
	"errors"
	"github.com/corestream/corestream/cluster/routes"
	"testing"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard/partition"
)

// fixedRoutes is a route table of one route for every key.
type fixedRoutes struct {
	rt routes.Route
	ok bool
}

func (f fixedRoutes) Get([20]byte) (routes.Route, bool) { return f.rt, f.ok }

// staticRoster is a fixed roster for a hand-built service.
func staticRoster(r []config.RosterNode) func() []config.RosterNode {
	return func() []config.RosterNode { return r }
}

// The primary's choice of a preferred read replica and a follower's
// permission to serve, rule by rule: replicas 1 (rack a, the primary
// here), 2 and 4 (rack b), 3 (rack c).
func TestFollowerReadRules(t *testing.T) {
	roster := []config.RosterNode{{ID: 1, Rack: "a"}, {ID: 2, Rack: "b"}, {ID: 3, Rack: "c"}, {ID: 4, Rack: "b"}}
	topic := &metadata.Topic{Name: "t", Replicas: [][]metadata.NodeID{{1, 2, 3, 4}}}
	all := []int32{1, 2, 3, 4}
	cases := []struct {
		name   string
		self   int32
		inSync []int32
		dead   int32
		rack   string
		want   int32
	}{
		{"the first in-sync replica of the rack", 1, all, 0, "b", 2},
		{"the first one out of sync: the next", 1, []int32{1, 3, 4}, 0, "b", 4},
		{"the first one dead: the next", 1, all, 2, "b", 4},
		{"the primary in the consumer's rack serves itself", 1, all, 0, "a", service.NoReplica},
		{"no replica in the rack", 1, all, 0, "z", service.NoReplica},
		{"none of the rack in sync", 1, []int32{1, 3}, 0, "b", service.NoReplica},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Deps{Self: 1, Roster: staticRoster(roster),
				Routes: fixedRoutes{routes.Route{Leader: 1, Term: 3, InSync: tc.inSync}, true},
				Alive:  func(id int32) bool { return id != tc.dead }})
			if got := s.preferredReadReplica(topic, 0, tc.rack); got != tc.want {
				t.Fatalf("preferred read replica %d, want %d", got, tc.want)
			}
		})
	}

	follower := func(inSync []int32, ok bool) error {
		s := New(Deps{Self: 2, Roster: staticRoster(roster), Routes: fixedRoutes{routes.Route{Leader: 1, Term: 3, InSync: inSync}, ok},
			AddrOf: func(int32) string { return "10.0.0.1:7070" }})
		return s.followerMayServe(topic, 0)
	}
	if err := follower(all, true); err != nil {
		t.Fatalf("an in-sync follower may not serve: %v", err)
	}
	if err := follower(nil, true); err != nil {
		t.Fatalf("a follower with no in-sync report yet (every live replica counts) may not serve: %v", err)
	}
	err := follower([]int32{1, 3}, true)
	var se *service.Error
	if !errors.As(err, &se) || !errors.Is(err, partition.ErrNotPrimary) || se.Hint == nil || se.Hint.NodeID != 1 {
		t.Fatalf("a follower out of the in-sync set: %v, want ErrNotPrimary with the primary (1) as hint", err)
	}
	if err := follower(nil, false); !errors.Is(err, partition.ErrNotPrimary) {
		t.Fatalf("a follower with no route: %v, want ErrNotPrimary", err)
	}
}
