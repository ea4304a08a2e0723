package harness

import (
	"fmt"
	"sort"
	"time"
)

// Category says how a fault touched one partition.
type Category string

// The categories.
const (
	// CatNone: the fault acted neither on the partition's primary nor on
	// enough of its replicas to take its quorum: writes should not stop.
	CatNone Category = "untouched"
	// CatPrimary: the fault acted on the node of the partition's primary.
	CatPrimary Category = "primary"
	// CatQuorum: the primary was untouched but the fault took a majority
	// of the replica set (factor 2 with its follower down, say): writes
	// stop by design until the heal.
	CatQuorum Category = "quorum"
)

// Phase is what a sample measures, and from when.
type Phase string

// The phases.
const (
	// PhaseFirstAck is the time from the fault (in force) to the first
	// acknowledgement of a write started after it, measured where a
	// failover can happen (the primary's node hit, factor 3 or more): how
	// long the failover took. Reported, not held to the target.
	PhaseFirstAck Phase = "failover (first ack)"
	// PhaseStallFault is the longest time without an acknowledgement from
	// the fault until the next fault (or the end of the writes): for an
	// untouched partition, every stall the fault caused, including one
	// that starts late (a client misled by the cut-off node, say).
	PhaseStallFault Phase = "longest stall from fault"
	// PhaseStallHeal is the longest time without an acknowledgement from
	// the heal (restart served, SIGCONT, rules removed) until the next
	// fault: for a touched partition, how long it took to come back.
	PhaseStallHeal Phase = "longest stall from heal"
)

// TargetResume is the target: writes to a partition resume within
// 2 s of a fault that does not touch its primary, and within 2 s of the
// heal for one that did.
const TargetResume = 2 * time.Second

// Route is what the harness knew of a partition just before a fault.
type Route struct {
	Primary  int
	Replicas []int
}

// Classify says how a fault of kind on node touches a partition with
// route r.
func Classify(kind Kind, node int, r Route) Category {
	if r.Primary == node {
		return CatPrimary
	}
	if !kind.NodeLevel() {
		return CatNone
	}
	up := 0
	for _, id := range r.Replicas {
		if id != node {
			up++
		}
	}
	if up < len(r.Replicas)/2+1 {
		return CatQuorum
	}
	return CatNone
}

// Ack is one acknowledged write: when its Produce call started and when
// it returned, in nanoseconds since the run's start.
type Ack struct {
	StartNs, AckNs int64
}

// Resume returns the time from atNs until the first acknowledgement of a
// write started at or after atNs, and false when none came before endNs
// (then the duration is endNs - atNs: a lower bound). acks are sorted by
// AckNs.
func Resume(acks []Ack, atNs, endNs int64) (time.Duration, bool) {
	i := sort.Search(len(acks), func(i int) bool { return acks[i].AckNs >= atNs })
	for ; i < len(acks) && acks[i].AckNs <= endNs; i++ {
		if acks[i].StartNs >= atNs {
			return time.Duration(acks[i].AckNs - atNs), true
		}
	}
	return time.Duration(endNs - atNs), false
}

// LongestStall returns the longest time in [fromNs, toNs] without an
// acknowledgement: the gaps between successive acknowledgements, from
// fromNs to the first and from the last to toNs. acks are sorted by
// AckNs.
func LongestStall(acks []Ack, fromNs, toNs int64) time.Duration {
	i := sort.Search(len(acks), func(i int) bool { return acks[i].AckNs >= fromNs })
	prev, longest := fromNs, int64(0)
	for ; i < len(acks) && acks[i].AckNs <= toNs; i++ {
		longest = max(longest, acks[i].AckNs-prev)
		prev = acks[i].AckNs
	}
	return time.Duration(max(longest, toNs-prev))
}

// Sample is one measured resumption.
type Sample struct {
	Fault     int
	Kind      Kind
	Category  Category
	Phase     Phase
	Partition string
	Factor    int
	Took      time.Duration
	// Resumed is false when no write was acknowledged before the window
	// closed (Took is then a lower bound).
	Resumed bool
}

// Targeted reports whether the 2 s target applies to the sample: the
// stalls (from the fault for an untouched partition, from the heal for a
// touched one), not the failover time.
func (s Sample) Targeted() bool { return s.Phase != PhaseFirstAck }

// Met reports whether the sample meets the target.
func (s Sample) Met() bool { return s.Resumed && s.Took <= TargetResume }

// Row summarises the samples of one kind, category and phase.
type Row struct {
	Kind     Kind
	Category Category
	Phase    Phase
	N        int
	// Median and Max of Took; Unresumed counts samples with no write
	// before their window closed; Missed counts targeted samples over the
	// target.
	Median, Max time.Duration
	Unresumed   int
	Targeted    bool
	Missed      int
}

func (r Row) String() string {
	s := fmt.Sprintf("%-10s %-9s %-24s n=%-4d median %-8v max %-8v", r.Kind, r.Category, r.Phase, r.N,
		r.Median.Round(time.Millisecond), r.Max.Round(time.Millisecond))
	if r.Unresumed > 0 {
		s += fmt.Sprintf(" (%d never resumed in the window)", r.Unresumed)
	}
	if r.Targeted {
		s += fmt.Sprintf(" target %v: %d over", TargetResume, r.Missed)
	}
	return s
}

// Summarise groups samples by kind, category and phase, in a stable order.
func Summarise(samples []Sample) []Row {
	type key struct {
		k Kind
		c Category
		p Phase
	}
	groups := map[key][]Sample{}
	var keys []key
	for _, s := range samples {
		k := key{s.Kind, s.Category, s.Phase}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], s)
	}
	rank := func(k key) string {
		ki := 0
		for i, a := range AllKinds {
			if a == k.k {
				ki = i
			}
		}
		return fmt.Sprintf("%d/%s/%s", ki, k.c, k.p)
	}
	sort.Slice(keys, func(i, j int) bool { return rank(keys[i]) < rank(keys[j]) })
	out := make([]Row, 0, len(keys))
	for _, k := range keys {
		ss := groups[k]
		d := make([]time.Duration, len(ss))
		r := Row{Kind: k.k, Category: k.c, Phase: k.p, N: len(ss), Targeted: ss[0].Targeted()}
		for i, s := range ss {
			d[i] = s.Took
			if !s.Resumed {
				r.Unresumed++
			}
			if r.Targeted && !s.Met() {
				r.Missed++
			}
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		r.Median, r.Max = median(d), d[len(d)-1]
		out = append(out, r)
	}
	return out
}

// median of sorted d (the mean of the middle two for an even count).
func median(d []time.Duration) time.Duration {
	n := len(d)
	if n%2 == 1 {
		return d[n/2]
	}
	return (d[n/2-1] + d[n/2]) / 2
}
