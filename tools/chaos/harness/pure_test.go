package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// The same options draw the same schedule; another seed another one;
// every round covers every kind; lengths stay in their bounds.
func TestSchedule(t *testing.T) {
	o := ScheduleOptions{Seed: 7, Count: 40, Kinds: AllKinds, Nodes: 3, HoldMin: time.Second, HoldMax: 3 * time.Second, GapMax: time.Second}
	a, b := Schedule(o), Schedule(o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("one seed drew two schedules")
	}
	o.Seed = 8
	if reflect.DeepEqual(a, Schedule(o)) {
		t.Fatal("seeds 7 and 8 drew the same schedule")
	}
	if len(a) != 40 {
		t.Fatalf("%d faults, want 40", len(a))
	}
	nodes := map[int]bool{}
	for i, f := range a {
		if f.Index != i+1 || f.Node < 1 || f.Node > 3 || f.Hold < time.Second || f.Hold > 3*time.Second || f.Gap < 0 || f.Gap > time.Second {
			t.Fatalf("fault %+v out of bounds", f)
		}
		nodes[f.Node] = true
	}
	for r := 0; r+len(AllKinds) <= len(a); r += len(AllKinds) {
		seen := map[Kind]bool{}
		for _, f := range a[r : r+len(AllKinds)] {
			seen[f.Kind] = true
		}
		if len(seen) != len(AllKinds) {
			t.Fatalf("round at %d covers %v, want every kind", r, seen)
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("40 faults hit nodes %v only", nodes)
	}
	if Schedule(ScheduleOptions{Count: 3, Nodes: 3}) != nil {
		t.Fatal("a schedule without kinds")
	}
}

func TestParseKinds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Kind
		err  bool
	}{
		{"", AllKinds, false},
		{"all", AllKinds, false},
		{"kill, stop", []Kind{KindKill, KindStop}, false},
		{"client-cut", []Kind{KindClientCut}, false},
		{"kill,partition", nil, true},
	} {
		got, err := ParseKinds(c.in)
		if (err != nil) != c.err || (!c.err && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("ParseKinds(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

func TestClassify(t *testing.T) {
	f3 := Route{Primary: 1, Replicas: []int{1, 2, 3}}
	f2 := Route{Primary: 1, Replicas: []int{1, 2}}
	f1 := Route{Primary: 3, Replicas: []int{3}}
	for _, c := range []struct {
		kind Kind
		node int
		r    Route
		want Category
	}{
		{KindKill, 1, f3, CatPrimary},
		{KindKill, 2, f3, CatNone},   // factor 3 keeps a quorum
		{KindStop, 2, f2, CatQuorum}, // factor 2 loses its follower
		{KindIsolate, 2, f2, CatQuorum},
		{KindClientCut, 2, f2, CatNone}, // replication still flows
		{KindClientCut, 1, f2, CatPrimary},
		{KindKill, 1, f1, CatNone},
		{KindIsolate, 3, f1, CatPrimary},
	} {
		if got := Classify(c.kind, c.node, c.r); got != c.want {
			t.Errorf("%s node %d, route %+v: %s, want %s", c.kind, c.node, c.r, got, c.want)
		}
	}
}

func TestResumeAndStall(t *testing.T) {
	ms := int64(time.Millisecond)
	acks := []Ack{{0, 5 * ms}, {5 * ms, 10 * ms}, {8 * ms, 900 * ms}, {900 * ms, 905 * ms}, {905 * ms, 2000 * ms}}
	for _, c := range []struct {
		at, end int64
		took    time.Duration
		ok      bool
	}{
		{6 * ms, 3000 * ms, 894 * time.Millisecond, true}, // the write started at 8 ms
		{9 * ms, 3000 * ms, 896 * time.Millisecond, true}, // the one at 8 ms started before: the next
		{901 * ms, 3000 * ms, 1099 * time.Millisecond, true},
		{950 * ms, 1500 * ms, 550 * time.Millisecond, false}, // none started and acknowledged in the window
	} {
		took, ok := Resume(acks, c.at, c.end)
		if took != c.took || ok != c.ok {
			t.Errorf("Resume(%v..%v) = %v, %v; want %v, %v", time.Duration(c.at), time.Duration(c.end), took, ok, c.took, c.ok)
		}
	}
	for _, c := range []struct {
		from, to int64
		want     time.Duration
	}{
		{0, 3000 * ms, 1095 * time.Millisecond},         // 905 -> 2000
		{0, 950 * ms, 890 * time.Millisecond},           // 10 -> 900
		{2000 * ms, 4500 * ms, 2500 * time.Millisecond}, // nothing after: the whole tail
		{950 * ms, 1000 * ms, 50 * time.Millisecond},
	} {
		if got := LongestStall(acks, c.from, c.to); got != c.want {
			t.Errorf("LongestStall(%v..%v) = %v, want %v", time.Duration(c.from), time.Duration(c.to), got, c.want)
		}
	}
}

func TestSummarise(t *testing.T) {
	s := func(k Kind, c Category, p Phase, ms int, ok bool) Sample {
		return Sample{Kind: k, Category: c, Phase: p, Took: time.Duration(ms) * time.Millisecond, Resumed: ok}
	}
	rows := Summarise([]Sample{
		s(KindStop, CatNone, PhaseStallFault, 100, true),
		s(KindKill, CatPrimary, PhaseStallHeal, 3000, true),
		s(KindKill, CatPrimary, PhaseStallHeal, 1000, true),
		s(KindKill, CatPrimary, PhaseStallHeal, 500, false),
		s(KindKill, CatPrimary, PhaseFirstAck, 9000, true),
	})
	if len(rows) != 3 || rows[0].Kind != KindKill || rows[2].Kind != KindStop {
		t.Fatalf("rows %v", rows)
	}
	var heal Row
	for _, r := range rows {
		if r.Phase == PhaseStallHeal {
			heal = r
		}
		if r.Phase == PhaseFirstAck && (r.Targeted || r.Missed != 0) {
			t.Errorf("the failover time is held to the target: %v", r)
		}
	}
	if heal.N != 3 || heal.Median != time.Second || heal.Max != 3*time.Second || heal.Unresumed != 1 || heal.Missed != 2 || !heal.Targeted {
		t.Fatalf("heal row %+v", heal)
	}
}

// Check finds each broken promise in a partition's read-back, and only
// those: an unacknowledged write present is allowed.
func TestCheck(t *testing.T) {
	const name = "t/0"
	w := func(off, seq int64) Written { return Written{Offset: off, Key: Key(seq), Value: Value(name, seq)} }
	acked := []Acked{{0, 0}, {1, 1}, {3, 3}}
	for _, c := range []struct {
		desc string
		read []Written
		want map[string]int
	}{
		{"whole", []Written{w(0, 0), w(1, 1), w(2, 2), w(3, 3)}, map[string]int{}},
		{"lost", []Written{w(0, 0), w(1, 1), w(2, 2)}, map[string]int{"lost": 1}},
		{"duplicated unacknowledged", []Written{w(0, 0), w(1, 1), w(2, 2), w(3, 3), w(4, 2)}, map[string]int{"duplicated": 1}},
		{"duplicated acknowledged", []Written{w(0, 0), w(1, 1), w(2, 1), w(3, 3)}, map[string]int{"duplicated": 1}},
		{"moved", []Written{w(0, 0), w(1, 1), w(2, 3)}, map[string]int{"moved": 1}},
		{"reordered", []Written{w(0, 0), w(1, 3), w(2, 1)}, map[string]int{"reordered": 1, "moved": 2}},
		{"corrupt", []Written{w(0, 0), w(1, 1), {Offset: 2, Key: Key(2), Value: []byte("t/0#7")}, w(3, 3)}, map[string]int{"corrupt": 1}},
	} {
		res := Check(name, c.read, acked)
		if !reflect.DeepEqual(res.Counts, c.want) {
			t.Errorf("%s: %v (%v), want %v", c.desc, res.Counts, res.Violations, c.want)
		}
	}
	res := Check(name, []Written{w(0, 0), w(1, 1), w(2, 2), w(3, 3)}, acked)
	if res.Read != 4 || res.AckedPresent != 3 || res.Unacked != 1 {
		t.Fatalf("%+v", res)
	}
}

// The rules cut exactly the connections they should: a node's own
// connections to each peer and the peers' to it, or the clients' to one
// node; every rule matches only the nodes' ports.
func TestRules(t *testing.T) {
	nodes := []NodePorts{{1, NodeGID(42, 1), []int{101, 102}}, {2, NodeGID(42, 2), []int{201, 202}}, {3, NodeGID(42, 3), []int{301, 302}}}
	str := func(rs [][]string) []string {
		var out []string
		for _, r := range rs {
			out = append(out, strings.Join(r, " "))
		}
		return out
	}
	want := []string{
		"-p tcp -m connmark --mark 0x43530002 -m multiport --ports 101,102 -j DROP",
		"-p tcp -m connmark --mark 0x43530001 -m multiport --ports 201,202 -j DROP",
		"-p tcp -m connmark --mark 0x43530002 -m multiport --ports 301,302 -j DROP",
		"-p tcp -m connmark --mark 0x43530003 -m multiport --ports 201,202 -j DROP",
	}
	if got := str(IsolateRules(nodes, 2)); !reflect.DeepEqual(got, want) {
		t.Fatalf("isolate node 2:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := str(ClientCutRules(nodes, 3)); !reflect.DeepEqual(got, []string{"-p tcp -m connmark --mark 0 -m multiport --ports 301,302 -j DROP"}) {
		t.Fatalf("client cut of node 3: %v", got)
	}
	marks := str(markRules(nodes[:1]))
	if want := fmt.Sprintf("-m conntrack --ctstate NEW -m owner --gid-owner %d -j CONNMARK --set-mark 0x43530001", NodeGID(42, 1)); marks[0] != want {
		t.Fatalf("mark rule %q, want %q", marks[0], want)
	}
	if NodeGID(42, 1) == NodeGID(43, 1) || NodeGID(42, 1) == NodeGID(42, 2) {
		t.Fatal("two nodes of two runs share a group id")
	}
}

// The chains of dead runs are found and removed; a live run's chain and
// other chains are left alone.
func TestRemoveStale(t *testing.T) {
	listing := "-P OUTPUT ACCEPT\n-N CHAOS-100\n-N CHAOS-200\n-N CHAOS-x\n-N DOCKER\n-A OUTPUT -j CHAOS-100\n-A OUTPUT -j CHAOS-200\n"
	var calls []string
	run := func(args ...string) ([]byte, error) {
		calls = append(calls, strings.Join(args, " "))
		if args[0] == "-S" {
			return []byte(listing), nil
		}
		if args[0] == "-D" && strings.Count(strings.Join(calls, "|"), strings.Join(args, " ")) > 1 {
			return []byte("Bad rule"), fmt.Errorf("exit status 1") // the jump is gone after the first delete
		}
		return nil, nil
	}
	got := RemoveStale(run, func(pid int) bool { return pid == 200 })
	if !reflect.DeepEqual(got, []string{"CHAOS-100"}) {
		t.Fatalf("removed %v, want CHAOS-100", got)
	}
	want := []string{"-S", "-D OUTPUT -j CHAOS-100", "-D OUTPUT -j CHAOS-100", "-F CHAOS-100", "-X CHAOS-100"}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
}

func TestFirstDifference(t *testing.T) {
	a := testBatches(t, 0, "x", "y", "z")
	b := testBatches(t, 0, "x", "Y", "z")
	if d := firstDifference(a, a); d != -1 {
		t.Fatalf("equal copies differ at %d", d)
	}
	if d := firstDifference(a, b); d != 1 {
		t.Fatalf("first difference at %d, want batch 1", d)
	}
	if d := firstDifference(a, a[:len(a)-3]); d != -2 {
		t.Fatalf("a torn copy: %d, want -2", d)
	}
	if d := firstDifference(a, testBatches(t, 0, "x", "y")); d != -2 {
		t.Fatalf("a shorter copy: %d, want -2", d)
	}
}

// testBatches builds one batch per value, with base offsets from base on.
func testBatches(t *testing.T, base int64, values ...string) []byte {
	t.Helper()
	var out []byte
	for i, v := range values {
		b, err := batch.NewBuilder(batch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.AppendKV(1, Key(int64(i)), []byte(v)); err != nil {
			t.Fatal(err)
		}
		n := len(out)
		if out, err = b.BuildAppend(out); err != nil {
			t.Fatal(err)
		}
		batch.SetBaseOffset(out[n:], base+int64(i))
	}
	return out
}

// A replica's log is read offline, on a copy, up to the high watermark
// only; the node's own directory is left as it was.
func TestReadReplica(t *testing.T) {
	dir, scratch := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	l, err := segment.OpenLog(vfs.OS(), dir, segment.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := testBatches(t, 0, "a", "b", "c")
	rest := all
	for rest != nil && len(rest) > 0 {
		var one []byte
		if one, rest, err = batch.Cut(rest); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.AppendLeader(append([]byte(nil), one...), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	got, err := readReplica(dir, scratch, 2)
	if err != nil {
		t.Fatal(err)
	}
	two := testBatches(t, 0, "a", "b")
	first, _, _ := batch.Cut(got)
	if h, _ := batch.ReadHeader(first); h.BaseOffset != 0 || len(got) != len(two) {
		t.Fatalf("read %d bytes (first batch at %d), want the %d bytes of two batches", len(got), h.BaseOffset, len(two))
	}
	if _, err := readReplica(dir, scratch, 4); err == nil {
		t.Fatal("a log ending below the high watermark was read")
	}
	after, _ := os.ReadDir(dir)
	if len(before) != len(after) {
		t.Fatalf("reading changed the node's directory: %d entries, then %d", len(before), len(after))
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("the copy was left behind: %v", err)
	}
}

// CheckGroup finds each anomaly class in a made-up history, and nothing
// in a clean one with a rebalance's redelivery.
func TestCheckGroup(t *testing.T) {
	logOf := func(name string, n int) []Written {
		var out []Written
		for i := range int64(n) {
			out = append(out, Written{Offset: i, Key: Key(i), Value: Value(name, i)})
		}
		return out
	}
	const p = "t/0"
	logs := map[string][]Written{p: logOf(p, 4)}
	ev := func(m int, k GroupEventKind, off int64, at int64) GroupEvent {
		return GroupEvent{Member: m, Kind: k, Partition: p, Offset: off, Seq: off, StartNs: at, EndNs: at}
	}
	commit := func(m int, off, start, end int64) GroupEvent {
		return GroupEvent{Member: m, Kind: Committed, Partition: p, Offset: off, StartNs: start, EndNs: end}
	}
	clean := []GroupEvent{
		ev(1, Assigned, 0, 1), ev(1, Polled, 0, 2), ev(1, Polled, 1, 2), ev(1, Polled, 2, 2), commit(1, 2, 3, 4), ev(1, Revoked, 0, 5),
		ev(2, Assigned, 0, 6), ev(2, Polled, 2, 7), ev(2, Polled, 3, 7), commit(2, 4, 8, 9),
	}
	res := CheckGroup(clean, logs)
	if len(res.Violations) != 0 || res.Polled != 5 || res.Redelivered != 1 || res.Commits != 2 {
		t.Fatalf("clean history: %+v", res)
	}
	for _, c := range []struct {
		what   string
		events []GroupEvent
	}{
		{"poll-backwards", []GroupEvent{ev(1, Assigned, 0, 1), ev(1, Polled, 0, 2), ev(1, Polled, 1, 2), ev(1, Polled, 0, 3), ev(1, Polled, 1, 3),
			ev(1, Polled, 2, 3), ev(1, Polled, 3, 3)}},
		{"poll-skip", []GroupEvent{ev(1, Assigned, 0, 1), ev(1, Polled, 0, 2), ev(1, Polled, 2, 2), ev(2, Polled, 1, 3), ev(2, Polled, 3, 3)}},
		{"unseen", []GroupEvent{ev(1, Assigned, 0, 1), ev(1, Polled, 0, 2), ev(1, Polled, 1, 2), ev(1, Revoked, 0, 3), ev(2, Assigned, 0, 4), ev(2, Polled, 3, 5)}},
		{"inconsistent", []GroupEvent{ev(1, Polled, 0, 1), ev(1, Polled, 1, 1), ev(1, Polled, 2, 1), ev(1, Polled, 3, 1), ev(1, Polled, 4, 1),
			{Member: 1, Kind: Polled, Partition: p, Offset: 1, Seq: 7, StartNs: 2, EndNs: 2}}},
		{"commit-backwards", append(append([]GroupEvent(nil), clean...), commit(1, 3, 10, 11))},
	} {
		res := CheckGroup(c.events, logs)
		if res.Counts[c.what] == 0 {
			t.Errorf("%s not found: %+v", c.what, res)
		}
	}
	// Commits that overlap in time are not ordered: no violation.
	if res := CheckGroup([]GroupEvent{commit(1, 4, 1, 10), commit(2, 2, 5, 6)}, map[string][]Written{}); res.Counts["commit-backwards"] != 0 {
		t.Errorf("overlapping commits flagged: %+v", res)
	}
}

// CheckGrowth passes a node whose figures hold after the warm-up and
// flags one whose memory, descriptors or goroutines keep growing.
func TestCheckGrowth(t *testing.T) {
	warm := 10 * time.Minute
	var ss []ResourceSample
	for m := 1; m <= 30; m++ {
		at := int64(time.Duration(m) * time.Minute)
		ss = append(ss,
			ResourceSample{Node: 1, AtNs: at, RSSBytes: 200 << 20, FDs: 80, Goros: 300},
			ResourceSample{Node: 2, AtNs: at, RSSBytes: 200 << 20, FDs: 80 + int64(m)*10, Goros: 300},
			ResourceSample{Node: 3, AtNs: at, RSSBytes: int64(m) * 40 << 20, FDs: 80, Goros: 300})
	}
	ss = append(ss, ResourceSample{Node: 4, AtNs: int64(20 * time.Minute), RSSBytes: 1, FDs: 1, Goros: 1})
	got := CheckGrowth(ss, warm)
	if len(got) != 3 {
		t.Fatalf("%d nodes compared, want 3 (node 4 has no warm-up samples): %v", len(got), got)
	}
	for _, g := range got {
		if want := g.Node == 1; g.Within != want {
			t.Errorf("%v: within %v, want %v", g, g.Within, want)
		}
		if g.BaseSamples != 5 || g.LaterSamples != 20 {
			t.Errorf("%v: %d and %d samples, want 5 and 20", g, g.BaseSamples, g.LaterSamples)
		}
	}
}
