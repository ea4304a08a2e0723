package harness

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The kinds of fault.
const (
	// KindKill kills a node with SIGKILL; the heal restarts it on its data.
	KindKill Kind = "kill"
	// KindStop freezes a node with SIGSTOP; the heal is SIGCONT.
	KindStop Kind = "stop"
	// KindIsolate cuts a node from every other node (both directions);
	// clients still reach it.
	KindIsolate Kind = "isolate"
	// KindClientCut cuts the harness's clients from a node; the nodes
	// still reach each other.
	KindClientCut Kind = "client-cut"
)

// AllKinds lists every kind, process faults first.
var AllKinds = []Kind{KindKill, KindStop, KindIsolate, KindClientCut}

// Network reports whether the kind needs iptables.
func (k Kind) Network() bool { return k == KindIsolate || k == KindClientCut }

// NodeLevel reports whether the kind affects the node's replication (so
// a partition may lose its quorum), not only its clients.
func (k Kind) NodeLevel() bool { return k != KindClientCut }

// ParseKinds parses a comma-separated list of kinds ("all" for every kind).
func ParseKinds(s string) ([]Kind, error) {
	if s == "" || s == "all" {
		return append([]Kind(nil), AllKinds...), nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		found := false
		for _, a := range AllKinds {
			found = found || a == k
		}
		if !found {
			return nil, fmt.Errorf("chaos: unknown fault kind %q (want %v or all)", k, AllKinds)
		}
		out = append(out, k)
	}
	return out, nil
}

// Fault is one planned fault: Kind on node Node, healed after Hold, and
// Gap of quiet after the cluster has settled, before the next fault.
type Fault struct {
	Index int
	Kind  Kind
	Node  int
	Hold  time.Duration
	Gap   time.Duration
}

func (f Fault) String() string {
	return fmt.Sprintf("#%d %s node %d for %v", f.Index, f.Kind, f.Node, f.Hold)
}

// ScheduleOptions bound a schedule.
type ScheduleOptions struct {
	Seed  uint64
	Count int
	Kinds []Kind
	Nodes int
	// HoldMin..HoldMax is the range of a fault's length; GapMax bounds the
	// quiet after each fault.
	HoldMin, HoldMax, GapMax time.Duration
}

// Schedule draws Count faults from Seed: the same options give the same
// schedule. Kinds come in rounds, each round every kind once in a drawn
// order, so that a short schedule covers every kind; the node and the
// lengths are drawn for each fault.
func Schedule(o ScheduleOptions) []Fault {
	if len(o.Kinds) == 0 || o.Nodes < 1 || o.Count < 1 {
		return nil
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x63686173))
	out := make([]Fault, 0, o.Count)
	var round []Kind
	for i := 0; i < o.Count; i++ {
		if len(round) == 0 {
			round = append(round, o.Kinds...)
			rng.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
		}
		k := round[0]
		round = round[1:]
		f := Fault{Index: i + 1, Kind: k, Node: 1 + rng.IntN(o.Nodes), Hold: o.HoldMin}
		if span := o.HoldMax - o.HoldMin; span > 0 {
			f.Hold += time.Duration(rng.Int64N(int64(span) + 1)).Round(time.Millisecond)
		}
		if o.GapMax > 0 {
			f.Gap = time.Duration(rng.Int64N(int64(o.GapMax) + 1)).Round(time.Millisecond)
		}
		out = append(out, f)
	}
	return out
}
