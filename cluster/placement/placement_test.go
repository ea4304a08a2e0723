package placement

import (
	"errors"
	"fmt"
	"testing"
)

func counts(as [][]NodeID) (prim, reps map[NodeID]int) {
	prim, reps = map[NodeID]int{}, map[NodeID]int{}
	for _, a := range as {
		prim[a[0]]++
		for _, r := range a {
			reps[r]++
		}
	}
	return
}

func TestSpreadEvenly(t *testing.T) {
	cases := []struct {
		nodes, parts, rf int
	}{
		{3, 12, 3}, {3, 12, 1}, {3, 12, 2}, {5, 12, 3}, {5, 10, 3}, {32, 64, 3}, {1, 4, 1}, {4, 7, 2},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("n%d_p%d_rf%d", tc.nodes, tc.parts, tc.rf), func(t *testing.T) {
			var nodes []NodeID
			for i := 1; i <= tc.nodes; i++ {
				nodes = append(nodes, NodeID(i))
			}
			as, err := Place(nodes, nil, tc.parts, tc.rf)
			if err != nil {
				t.Fatal(err)
			}
			if len(as) != tc.parts {
				t.Fatalf("%d assignments", len(as))
			}
			for _, a := range as {
				if len(a) != tc.rf {
					t.Fatalf("assignment %v has %d replicas", a, len(a))
				}
				seen := map[NodeID]bool{}
				for _, r := range a {
					if seen[r] {
						t.Fatalf("duplicate replica in %v", a)
					}
					seen[r] = true
				}
			}
			prim, reps := counts(as)
			spread := func(m map[NodeID]int, total int) {
				lo, hi := total/tc.nodes, (total+tc.nodes-1)/tc.nodes
				for _, id := range nodes {
					if m[id] < lo || m[id] > hi {
						t.Errorf("node %d has %d, want %d..%d (%v)", id, m[id], lo, hi, m)
					}
				}
			}
			spread(prim, tc.parts)
			spread(reps, tc.parts*tc.rf)
		})
	}
}

func TestExistingLoadIsEvenedOut(t *testing.T) {
	nodes := []NodeID{1, 2, 3}
	// Node 1 already leads 4 partitions and holds 4 replicas: new partitions
	// should lead elsewhere first.
	load := map[NodeID]Load{1: {Replicas: 4, Preferred: 4}}
	as, err := Place(nodes, load, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	prim, _ := counts(as)
	if prim[1] != 0 || prim[2] != 4 || prim[3] != 4 {
		t.Fatalf("primaries %v, want node 1: 0, 2: 4, 3: 4", prim)
	}
	if load[1].Replicas != 4 {
		t.Fatal("input load modified")
	}
}

func TestDeterministic(t *testing.T) {
	nodes := []NodeID{5, 3, 9, 1}
	a, _ := Place(nodes, map[NodeID]Load{3: {2, 1}}, 10, 3)
	b, _ := Place([]NodeID{1, 3, 5, 9}, map[NodeID]Load{3: {2, 1}}, 10, 3)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("order of eligible nodes changed the result:\n%v\n%v", a, b)
	}
}

func TestFactorErrors(t *testing.T) {
	for _, rf := range []int{0, 4, 33} {
		if _, err := Place([]NodeID{1, 2, 3}, nil, 1, rf); !errors.Is(err, ErrFactor) {
			t.Errorf("rf %d: err = %v", rf, err)
		}
	}
}

func spreadOf(nodes []NodeID, m map[NodeID]int) int {
	lo, hi := m[nodes[0]], m[nodes[0]]
	for _, id := range nodes {
		lo, hi = min(lo, m[id]), max(hi, m[id])
	}
	return hi - lo
}

// TestFreshIsExact checks every roster size up to 32, factor up to 5 and
// partition count up to 69: both counts stay within one of even.
func TestFreshIsExact(t *testing.T) {
	for n := 1; n <= 32; n++ {
		var nodes []NodeID
		for i := 1; i <= n; i++ {
			nodes = append(nodes, NodeID(i))
		}
		for rf := 1; rf <= min(n, 5); rf++ {
			for parts := 1; parts < 70; parts++ {
				as, err := Place(nodes, nil, parts, rf)
				if err != nil {
					t.Fatal(err)
				}
				prim, reps := counts(as)
				if spreadOf(nodes, prim) > 1 || spreadOf(nodes, reps) > 1 {
					t.Fatalf("n=%d rf=%d parts=%d: primaries %v replicas %v", n, rf, parts, prim, reps)
				}
			}
		}
	}
}

// TestSuccessiveTopicsStayNearEven creates topics of mixed factors one
// after another: the spread never exceeds two.
func TestSuccessiveTopicsStayNearEven(t *testing.T) {
	for n := 2; n <= 9; n++ {
		var nodes []NodeID
		for i := 1; i <= n; i++ {
			nodes = append(nodes, NodeID(i))
		}
		load := map[NodeID]Load{}
		prim, reps := map[NodeID]int{}, map[NodeID]int{}
		for topic := 0; topic < 12; topic++ {
			rf := 1 + topic%n
			parts := 1 + (topic*7)%11
			as, err := Place(nodes, load, parts, rf)
			if err != nil {
				t.Fatal(err)
			}
			p, r := counts(as)
			for _, id := range nodes {
				prim[id] += p[id]
				reps[id] += r[id]
				load[id] = Load{Replicas: reps[id], Preferred: prim[id]}
			}
			if spreadOf(nodes, prim) > 2 || spreadOf(nodes, reps) > 2 {
				t.Fatalf("n=%d after topic %d: primaries %v replicas %v", n, topic, prim, reps)
			}
		}
	}
}

// rackSpread checks that every assignment spreads over racks before one
// repeats: no rack holds more than ceil(len(a)/racks) of its replicas,
// and it spans min(len(a), racks) racks.
func rackSpread(t *testing.T, as [][]NodeID, racks map[NodeID]string, rackCount int) {
	t.Helper()
	for _, a := range as {
		per := map[string]int{}
		for _, id := range a {
			per[racks[id]]++
		}
		maxPer := (len(a) + rackCount - 1) / rackCount
		for r, c := range per {
			if c > maxPer {
				t.Errorf("%v: rack %q holds %d replicas, at most %d before a rack repeats", a, r, c, maxPer)
			}
		}
		if want := min(len(a), rackCount); len(per) != want {
			t.Errorf("%v spans %d racks, want %d (%v)", a, len(per), want, per)
		}
	}
}

func TestRacksSpreadBeforeRepeating(t *testing.T) {
	cases := []struct {
		name       string
		racks      []string // racks[i] is node i+1's
		parts, rf  int
		evenCounts bool // racks of equal size: counts stay within one of even
	}{
		{"3 racks of 2, rf 3", []string{"a", "a", "b", "b", "c", "c"}, 12, 3, true},
		{"3 racks of 2, rf 2", []string{"a", "a", "b", "b", "c", "c"}, 12, 2, true},
		{"ids interleave racks", []string{"a", "b", "c", "a", "b", "c"}, 30, 3, true},
		{"2 racks, rf 3 repeats one", []string{"a", "a", "b", "b"}, 8, 3, true},
		{"2 racks, rf 4", []string{"a", "a", "b", "b"}, 8, 4, true},
		{"3 racks of 3, rf 3", []string{"x", "x", "x", "y", "y", "y", "z", "z", "z"}, 27, 3, true},
		{"unequal racks", []string{"a", "a", "a", "b"}, 8, 2, false},
		{"one rack", []string{"a", "a", "a"}, 6, 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []NodeID
			racks := map[NodeID]string{}
			distinct := map[string]bool{}
			for i, r := range tc.racks {
				nodes = append(nodes, NodeID(i+1))
				racks[NodeID(i+1)] = r
				distinct[r] = true
			}
			as, err := PlaceRacks(nodes, racks, nil, tc.parts, tc.rf)
			if err != nil {
				t.Fatal(err)
			}
			rackSpread(t, as, racks, len(distinct))
			prim, reps := counts(as)
			if len(prim) != len(nodes) && tc.parts >= len(nodes) {
				t.Errorf("some node leads nothing: %v", prim)
			}
			if tc.evenCounts {
				for _, id := range nodes {
					lo, hi := tc.parts*tc.rf/len(nodes), (tc.parts*tc.rf+len(nodes)-1)/len(nodes)
					if reps[id] < lo || reps[id] > hi {
						t.Errorf("node %d holds %d replicas, want %d..%d (%v)", id, reps[id], lo, hi, reps)
					}
				}
			}
		})
	}
}

func TestNoRacksIsPlace(t *testing.T) {
	nodes := []NodeID{1, 2, 3, 4, 5}
	load := map[NodeID]Load{2: {3, 1}}
	want, _ := Place(nodes, load, 17, 3)
	for _, racks := range []map[NodeID]string{nil, {1: "", 2: "", 3: "", 4: "", 5: ""}} {
		got, err := PlaceRacks(nodes, racks, load, 17, 3)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("racks %v changed the placement:\n%v\n%v", racks, got, want)
		}
	}
}

func TestNodesWithoutRackStandAlone(t *testing.T) {
	// Nodes 3 and 4 have no rack: each counts as its own, so a factor-3
	// partition never puts two replicas in rack a while another is free.
	nodes := []NodeID{1, 2, 3, 4}
	racks := map[NodeID]string{1: "a", 2: "a"}
	as, err := PlaceRacks(nodes, racks, nil, 8, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		inA := 0
		for _, id := range a {
			if racks[id] == "a" {
				inA++
			}
		}
		if inA > 1 {
			t.Errorf("%v has %d replicas in rack a while racks of their own were free", a, inA)
		}
	}
}
