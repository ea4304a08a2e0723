package client

import (
	"testing"

	"github.com/corestream/corestream/netio/wire"
)

// nodesAlive builds a node list of n nodes (ids 1..n) with the given ones
// alive.
func nodesAlive(n int, alive ...int32) []wire.Node {
	out := make([]wire.Node, n)
	for i := range out {
		out[i] = wire.Node{ID: int32(i + 1), ClientAddr: "n" + string(rune('1'+i))}
		for _, a := range alive {
			out[i].Alive = out[i].Alive || a == out[i].ID
		}
	}
	return out
}

func TestAssessMetadata(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resp    wire.MetadataResponse
		trusted bool
	}{
		{"all alive, primary known", wire.MetadataResponse{MetadataPrimaryID: 1, Nodes: nodesAlive(3, 1, 2, 3)}, true},
		{"majority alive, primary among them", wire.MetadataResponse{MetadataPrimaryID: 2, Nodes: nodesAlive(3, 1, 2)}, true},
		{"cut off: alone, no primary", wire.MetadataResponse{MetadataPrimaryID: wire.NodeNone, Nodes: nodesAlive(3, 3)}, false},
		{"cut off: alone, stale primary", wire.MetadataResponse{MetadataPrimaryID: 1, Nodes: nodesAlive(3, 3)}, false},
		{"majority alive, no primary (election)", wire.MetadataResponse{MetadataPrimaryID: wire.NodeNone, Nodes: nodesAlive(3, 1, 2, 3)}, false},
		{"majority alive, primary down", wire.MetadataResponse{MetadataPrimaryID: 3, Nodes: nodesAlive(3, 1, 2)}, false},
		{"half of four is no majority", wire.MetadataResponse{MetadataPrimaryID: 1, Nodes: nodesAlive(4, 1, 2)}, false},
		{"single node", wire.MetadataResponse{MetadataPrimaryID: 1, Nodes: nodesAlive(1, 1)}, true},
		{"no nodes", wire.MetadataResponse{MetadataPrimaryID: 1}, false},
	} {
		if got := assessMetadata(&tc.resp).trusted; got != tc.trusted {
			t.Errorf("%s: trusted %v, want %v", tc.name, got, tc.trusted)
		}
	}
}

func TestMetaQualityOrder(t *testing.T) {
	// Each is better than every one after it.
	ordered := []metaQuality{
		{trusted: true, primaryKnown: true, alive: 2, nodes: 3, generation: 1},
		{primaryKnown: true, alive: 1, nodes: 3, generation: 5},
		{primaryKnown: true, alive: 3, nodes: 3, generation: 4},
		{primaryKnown: true, alive: 2, nodes: 3, generation: 4},
		{alive: 3, nodes: 3, generation: 9},
	}
	for i := range ordered {
		for j := range ordered {
			if got, want := ordered[i].betterThan(ordered[j]), i < j; got != want {
				t.Errorf("%d better than %d: %v, want %v", i, j, got, want)
			}
		}
	}
}

// An untrusted answer is merged: it adds what the cache lacks and newer
// routes, but never turns a usable route into "no primary", drops a topic
// or marks a node down.
func TestMergeUntrustedKeepsUsableRoutes(t *testing.T) {
	id := wire.TopicID{7}
	route := func(p, primary, gen int32, code int16) wire.PartitionRoute {
		return wire.PartitionRoute{Partition: p, PrimaryID: primary, Generation: gen, ErrorCode: code, Replicas: []int32{1, 2, 3}}
	}
	m := newMetaCache()
	m.applyRanked(&wire.MetadataResponse{MetadataPrimaryID: 1, Nodes: nodesAlive(3, 1, 2, 3), Topics: []wire.TopicMetadata{
		{Name: "t", ID: id, Partitions: []wire.PartitionRoute{route(0, 1, 1, 0), route(1, 2, 1, 0), route(2, 3, 1, 0)}},
		{Name: "kept", ID: wire.TopicID{8}, Partitions: []wire.PartitionRoute{route(0, 1, 1, 0)}},
	}}, metaQuality{trusted: true})
	cut := wire.MetadataResponse{MetadataPrimaryID: wire.NodeNone, Nodes: nodesAlive(3, 3), Topics: []wire.TopicMetadata{
		{Name: "t", ID: id, Partitions: []wire.PartitionRoute{
			route(0, wire.NodeNone, -1, wire.ErrNotEnoughReplicas.Code), // hides a usable route: kept
			route(1, 3, 2, 0), // a newer generation elsewhere: taken
			route(2, 3, 1, 0), // the same route: taken
		}},
		{Name: "new", ID: wire.TopicID{9}, Partitions: []wire.PartitionRoute{route(0, 3, 1, 0)}},
	}}
	m.applyRanked(&cut, assessMetadata(&cut))
	for _, tc := range []struct {
		topic   string
		p       int32
		primary int32
		gen     int32
	}{{"t", 0, 1, 1}, {"t", 1, 3, 2}, {"t", 2, 3, 1}, {"kept", 0, 1, 1}, {"new", 0, 3, 1}} {
		rt, err := m.lookup(tc.topic, tc.p)
		if err != nil || rt.primaryID != tc.primary || rt.ref.Generation != tc.gen {
			t.Errorf("%s/%d: primary %d gen %d (%v), want %d gen %d", tc.topic, tc.p, rt.primaryID, rt.ref.Generation, err, tc.primary, tc.gen)
		}
	}
	if m.confirmsAbsent("gone", 0) {
		t.Error("an untrusted answer confirmed a topic absent")
	}
	for _, a := range []string{"n1", "n2"} {
		found := false
		for _, n := range m.nodes {
			found = found || (n.ClientAddr == a && n.Alive)
		}
		if !found {
			t.Errorf("node %s marked down by an untrusted answer", a)
		}
	}
}
