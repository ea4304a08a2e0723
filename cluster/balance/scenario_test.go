package balance

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden transcripts in testdata/")

// TestScenarios runs every testdata/*.txt script and compares the
// transcript (each command echoed, then its output) with the golden file
// beside it (*.golden). Commands:
//
//	nodes 1 2 3                      the roster, all alive
//	imbalance PCT | mute MS | now MS
//	preferred PCT|off                the preferred-primary rule at PCT, or off
//	preferred-only on|off            only moves back to preferred primaries
//	partition KEY replicas=1,2,3 primary=N [insync=1,2]   (insync defaults to replicas)
//	kill N | revive N                node liveness
//	fail N                           node N dies and its primaries move to the
//	                                 next live in-sync replica (what elections do)
//	lag KEY N | catchup KEY N        N leaves / rejoins KEY's in-sync set
//	moved KEY MS                     KEY was last moved at MS
//	inflight on|off                  an earlier move is (not) running
//	next                             print Next's move
//	apply                            Next, and carry it out (primary := To, moved now)
//	settle                           apply until none; print each move
//	plan                             print Plan without changing anything
//	counts                           primaries per live node and the bounds
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scenarios")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			got := runScript(t, f)
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
			if *rewrite {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create it)", err)
			}
			if got != string(want) {
				t.Errorf("transcript differs from %s (run with -rewrite after checking):\n%s", golden, got)
			}
		})
	}
}

func runScript(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := &View{ImbalancePercent: 10, MuteMs: 0, NowMs: 1}
	var out strings.Builder
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			out.WriteString(text + "\n")
			continue
		}
		out.WriteString("> " + text + "\n")
		res, err := step(v, strings.Fields(text))
		if err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		out.WriteString(res)
	}
	return out.String()
}

func step(v *View, f []string) (string, error) {
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("bad number %q", s))
		}
		return n
	}
	ids := func(s string) []NodeID {
		var out []NodeID
		for _, x := range strings.Split(s, ",") {
			if x != "" {
				out = append(out, NodeID(num(x)))
			}
		}
		return out
	}
	part := func(key string) (*Partition, error) {
		for i := range v.Partitions {
			if v.Partitions[i].Key == key {
				return &v.Partitions[i], nil
			}
		}
		return nil, fmt.Errorf("no partition %s", key)
	}
	node := func(id NodeID) *Node {
		for i := range v.Nodes {
			if v.Nodes[i].ID == id {
				return &v.Nodes[i]
			}
		}
		panic(fmt.Sprintf("no node %d", id))
	}
	switch f[0] {
	case "nodes":
		for _, s := range f[1:] {
			v.Nodes = append(v.Nodes, Node{ID: NodeID(num(s)), Alive: true})
		}
	case "imbalance":
		v.ImbalancePercent = int(num(f[1]))
	case "mute":
		v.MuteMs = num(f[1])
	case "preferred":
		v.PreferredCheck = f[1] != "off"
		if v.PreferredCheck {
			v.PreferredImbalancePercent = int(num(f[1]))
		}
	case "preferred-only":
		v.PreferredOnly = f[1] == "on"
	case "now":
		v.NowMs = num(f[1])
	case "partition":
		p := Partition{Key: f[1]}
		for _, kv := range f[2:] {
			k, val, _ := strings.Cut(kv, "=")
			switch k {
			case "replicas":
				p.Replicas = ids(val)
			case "primary":
				p.Primary = NodeID(num(val))
			case "insync":
				p.InSync = ids(val)
			default:
				return "", fmt.Errorf("unknown partition field %q", k)
			}
		}
		if p.InSync == nil {
			p.InSync = append([]NodeID(nil), p.Replicas...)
		}
		v.Partitions = append(v.Partitions, p)
	case "kill", "revive":
		node(NodeID(num(f[1]))).Alive = f[0] == "revive"
	case "fail":
		dead := NodeID(num(f[1]))
		node(dead).Alive = false
		var b strings.Builder
		for i := range v.Partitions {
			p := &v.Partitions[i]
			p.InSync = without(p.InSync, dead)
			if p.Primary != dead {
				continue
			}
			p.Primary = 0
			for _, r := range p.Replicas {
				if r != dead && node(r).Alive && contains(p.InSync, r) {
					p.Primary = r
					break
				}
			}
			fmt.Fprintf(&b, "%s: primary %d -> %d\n", p.Key, dead, p.Primary)
		}
		return b.String(), nil
	case "lag", "catchup":
		p, err := part(f[1])
		if err != nil {
			return "", err
		}
		n := NodeID(num(f[2]))
		p.InSync = without(p.InSync, n)
		if f[0] == "catchup" {
			p.InSync = append(p.InSync, n)
		}
	case "moved":
		p, err := part(f[1])
		if err != nil {
			return "", err
		}
		p.LastMovedMs = num(f[2])
	case "inflight":
		v.MoveInFlight = f[1] == "on"
	case "next":
		return fmtMove(Next(v)), nil
	case "apply":
		m, ok := Next(v)
		if ok {
			carryOut(v, m)
		}
		return fmtMove(m, ok), nil
	case "settle":
		var b strings.Builder
		for i := 0; i < 1000; i++ {
			m, ok := Next(v)
			if !ok {
				break
			}
			carryOut(v, m)
			b.WriteString(fmtMove(m, ok))
		}
		b.WriteString(fmtCounts(v))
		return b.String(), nil
	case "plan":
		var b strings.Builder
		for _, m := range Plan(*v, 100) {
			b.WriteString(fmtMove(m, true))
		}
		if b.Len() == 0 {
			b.WriteString("no moves\n")
		}
		return b.String(), nil
	case "counts":
		return fmtCounts(v), nil
	default:
		return "", fmt.Errorf("unknown command %q", f[0])
	}
	return "", nil
}

func carryOut(v *View, m Move) {
	for i := range v.Partitions {
		if v.Partitions[i].Key == m.Key {
			v.Partitions[i].Primary = m.To
			v.Partitions[i].LastMovedMs = v.NowMs
		}
	}
}

func without(s []NodeID, n NodeID) []NodeID {
	var out []NodeID
	for _, x := range s {
		if x != n {
			out = append(out, x)
		}
	}
	return out
}

func fmtMove(m Move, ok bool) string {
	if !ok {
		return "no move\n"
	}
	return fmt.Sprintf("move %s %d -> %d (%s)\n", m.Key, m.From, m.To, m.Why)
}

func fmtCounts(v *View) string {
	c := Counts(v)
	var ids []int
	for id := range c {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	var parts []string
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%d:%d", id, c[NodeID(id)]))
	}
	lo, hi, _ := Bounds(v)
	return fmt.Sprintf("primaries %s allowed %d..%d balanced=%v\n", strings.Join(parts, " "), lo, hi, Balanced(v))
}
