package balance

import "testing"

// TestPreferredRule pins when the preferred-primary rule moves a
// partition back, case by case, on one partition t/0 preferring node 1
// (plus the others named).
func TestPreferredRule(t *testing.T) {
	nodes := []Node{{1, true}, {2, true}, {3, true}}
	away := Partition{Key: "t/0", Replicas: []NodeID{1, 2, 3}, Primary: 2, InSync: []NodeID{1, 2, 3}}
	home := func(key string) Partition {
		return Partition{Key: key, Replicas: []NodeID{1, 2, 3}, Primary: 1, InSync: []NodeID{1, 2, 3}}
	}
	cases := []struct {
		name  string
		edit  func(v *View)
		want  string // "" for no move
		extra []Partition
	}{
		{name: "away at 100% over 10%: back to node 1", want: "t/0 2->1"},
		{name: "rule off: counts 1/0/0 of one partition are balanced", edit: func(v *View) { v.PreferredCheck = false }},
		{name: "preferred replica not in sync", edit: func(v *View) { v.Partitions[0].InSync = []NodeID{2, 3} }},
		{name: "preferred replica down", edit: func(v *View) { v.Nodes[0].Alive = false }},
		{name: "no primary now (an election's work, not a transfer's)", edit: func(v *View) { v.Partitions[0].Primary = 0 }},
		{name: "muted", edit: func(v *View) { v.Partitions[0].LastMovedMs = 9_000 }},
		{name: "muted, but on demand", edit: func(v *View) { v.Partitions[0].LastMovedMs, v.PreferredOnly = 9_000, true }, want: "t/0 2->1"},
		{name: "a move in flight", edit: func(v *View) { v.MoveInFlight = true }},
		{name: "1 of 10 away (10%) is not over 10%", extra: nine(home)},
		{name: "1 of 9 away (11%) is over 10%", extra: nine(home)[:8], want: "t/0 2->1"},
		{name: "preferred-only at 0%: any away partition", extra: nine(home),
			edit: func(v *View) { v.PreferredOnly, v.PreferredImbalancePercent = true, 0 }, want: "t/0 2->1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &View{Nodes: append([]Node(nil), nodes...), Partitions: append([]Partition{away}, tc.extra...),
				NowMs: 10_000, MuteMs: 5_000, ImbalancePercent: 10, PreferredCheck: true, PreferredImbalancePercent: 10}
			v.Partitions[0].InSync = append([]NodeID(nil), away.InSync...)
			if tc.edit != nil {
				tc.edit(v)
			}
			m, ok := Next(v)
			got := ""
			if ok {
				got = m.Key + " " + itoa(m.From) + "->" + itoa(m.To)
			}
			if got != tc.want {
				t.Fatalf("Next = %q (%s), want %q", got, m.Why, tc.want)
			}
		})
	}
}

// nine is nine partitions led by their preferred primary, node 1.
func nine(home func(string) Partition) []Partition {
	var out []Partition
	for _, k := range []string{"u/1", "u/2", "u/3", "u/4", "u/5", "u/6", "u/7", "u/8", "u/9"} {
		out = append(out, home(k))
	}
	return out
}

func itoa(n NodeID) string { return string(rune('0' + n)) }

// A node that has just returned is not yet in sync for the partitions it
// prefers. Evening the counts meanwhile must not hand one of those to a
// third node: the move would be muted for MuteMs, and the preferred rule,
// which wants it back as soon as the node catches up, would wait that
// long (the 60 s stall seen in TestClusterBalancerRestoresBalance).
func TestCountsWaitForAReturningPreferredReplica(t *testing.T) {
	v := &View{Nodes: []Node{{1, true}, {2, true}, {3, true}}, NowMs: 10_000, MuteMs: 5_000,
		ImbalancePercent: 10, PreferredCheck: true, PreferredImbalancePercent: 10}
	for i, pref := range []NodeID{1, 2, 3, 1, 2, 3, 1, 2, 3} {
		p := Partition{Key: "t/" + itoa(int32(i)), Replicas: []NodeID{pref, pref%3 + 1, (pref+1)%3 + 1}, InSync: []NodeID{1, 2}}
		p.Primary = pref
		if pref == 3 {
			p.Primary = 1 // led away while node 3 was down
		}
		v.Partitions = append(v.Partitions, p)
	}
	// Counts 6/3/0: uneven, but every move the counts could make would
	// give one of node 3's partitions to node 2.
	if m, ok := Next(v); ok {
		t.Fatalf("Next = %s %d->%d (%s), want no move until node 3 is in sync", m.Key, m.From, m.To, m.Why)
	}
	for i := range v.Partitions {
		v.Partitions[i].InSync = []NodeID{1, 2, 3}
	}
	m, ok := Next(v)
	if !ok || m.To != 3 {
		t.Fatalf("Next = %v %+v once node 3 is in sync, want a move back to node 3", ok, m)
	}
}
