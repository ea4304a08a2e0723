package harness

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// errorLinesMax bounds the error texts Write prints.
const errorLinesMax = 12

// Report is what a run did and found.
type Report struct {
	Seed    uint64
	Options Options `json:"-"`
	// Dir is the run's directory (nodes' data and logs).
	Dir string
	// Chain is the iptables chain of the run; NetworkSkipped says why
	// network faults did not run ("" when they could).
	Chain, NetworkSkipped string
	Faults                []FaultRecord
	// Writes attempted, acknowledged and failed, and the failures by
	// error text.
	WritesSent, WritesAcked, WritesFailed int64
	Errors                                map[string]int
	// RecordsRead were read back; AckedChecked of them were acknowledged
	// writes (each found once, in order, at its offset); Unacked were
	// written without an acknowledgement reaching the writer.
	RecordsRead, AckedChecked, Unacked int
	Violations                         []Violation
	ViolationCounts                    map[string]int
	// ReplicasCompared copies of replicated partitions were compared
	// byte for byte below the high watermark (BytesCompared per copy).
	ReplicasCompared  int
	BytesCompared     int64
	ReplicaMismatches []string
	StopErrors        string
	// Err is why the run stopped before its checks ("" when it did not).
	Err string
	// BudgetSpentNs is when the writes budget (Options.WritesMax) ran out,
	// ns since the start (0: it did not); faults stop there, and so do
	// the measurements.
	BudgetSpentNs int64
	Tails         []TailReport
	// Resources are the nodes' sampled figures; Growth compares each
	// node's after the warm-up with the warm-up's.
	Resources []ResourceSample
	Growth    []Growth
	// Group is the consumer group's (Kafka runs; nil without one).
	Group   *GroupReport
	Samples []Sample
	Rows    []Row
	Elapsed time.Duration
}

// OK reports whether every promise held: no acknowledged write lost,
// duplicated, moved or reordered, every replica equal.
func (r *Report) OK() bool {
	return len(r.Violations) == 0 && len(r.ReplicaMismatches) == 0 && r.WritesAcked == int64(r.AckedChecked) &&
		(r.Group == nil || len(r.Group.Violations) == 0) && (!r.Options.Soak || r.GrowthWithin())
}

// GrowthWithin reports whether every node's resources stayed within the
// soak's bound (false when nothing could be compared).
func (r *Report) GrowthWithin() bool {
	for _, g := range r.Growth {
		if !g.Within {
			return false
		}
	}
	return len(r.Growth) > 0
}

// TargetMissed counts the samples the 2 s target applies to and missed.
func (r *Report) TargetMissed() int {
	n := 0
	for _, s := range r.Samples {
		if s.Targeted() && !s.Met() {
			n++
		}
	}
	return n
}

// Write prints the report for people.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "chaos report — seed %d, %s clients, %d nodes, factors %v, %d partitions each, %d in flight per partition, fsync %s, %v\n",
		r.Seed, r.Options.Client, r.Options.Nodes, r.Options.Factors, r.Options.Partitions, r.Options.InFlight, r.Options.Fsync, r.Elapsed.Round(time.Second))
	if r.Options.Client == ClientKafka {
		age := "its default (5s)"
		if r.Options.KafkaMetadataMinAge > 0 {
			age = r.Options.KafkaMetadataMinAge.String()
		}
		fmt.Fprintf(w, "franz-go clients, metadata min age %s\n", age)
	}
	if r.NetworkSkipped != "" {
		fmt.Fprintf(w, "network faults skipped: %s\n", r.NetworkSkipped)
	}
	kinds := map[Kind]int{}
	for _, f := range r.Faults {
		kinds[f.Kind]++
	}
	var ks []string
	for _, k := range AllKinds {
		if kinds[k] > 0 {
			ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
		}
	}
	fmt.Fprintf(w, "faults: %d (%s)\n", len(r.Faults), strings.Join(ks, ", "))
	fmt.Fprintf(w, "writes: %d sent, %d acknowledged, %d failed\n", r.WritesSent, r.WritesAcked, r.WritesFailed)
	if r.BudgetSpentNs > 0 {
		fmt.Fprintf(w, "the budget of %d writes ran out %v into the run: faults and measurements stopped there\n",
			r.Options.WritesMax, time.Duration(r.BudgetSpentNs).Round(time.Second))
	}
	type kv struct {
		k string
		v int
	}
	var errs []kv
	for k, v := range r.Errors {
		errs = append(errs, kv{k, v})
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].v > errs[j].v || errs[i].v == errs[j].v && errs[i].k < errs[j].k })
	if len(errs) > errorLinesMax {
		fmt.Fprintf(w, "  (the %d most frequent of %d error texts)\n", errorLinesMax, len(errs))
		errs = errs[:errorLinesMax]
	}
	for _, e := range errs {
		fmt.Fprintf(w, "  %6d × %s\n", e.v, e.k)
	}
	fmt.Fprintf(w, "read back: %d records; %d of %d acknowledged writes present once, in order, at their offsets; %d unacknowledged writes present\n",
		r.RecordsRead, r.AckedChecked, r.WritesAcked, r.Unacked)
	fmt.Fprintf(w, "replicas: %d copies compared byte for byte below the high watermark; %d mismatches\n", r.ReplicasCompared, len(r.ReplicaMismatches))
	for _, m := range r.ReplicaMismatches {
		fmt.Fprintf(w, "  MISMATCH %s\n", m)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(w, "VIOLATIONS %v:\n", r.ViolationCounts)
		for _, v := range r.Violations {
			fmt.Fprintf(w, "  %v\n", v)
		}
	}
	for _, t := range r.Tails {
		fmt.Fprintf(w, "tailing consumer %s: %d records, %d repeated, %d out of order, %d poll errors", t.Topic, t.Read, t.Dups, t.Backwards, t.PollErrors)
		if len(t.FirstErrors) > 0 {
			fmt.Fprintf(w, " (first: %s)", t.FirstErrors[0])
		}
		fmt.Fprintln(w)
	}
	if g := r.Group; g != nil {
		fmt.Fprintf(w, "consumer group of %d members: %d records polled (%d offsets again after a rebalance), %d commits, %d refused, %d poll errors, caught up: %v\n",
			g.Members, g.Polled, g.Redelivered, g.Commits, g.CommitErrors, g.PollErrors, g.CaughtUp)
		if len(g.FirstErrors) > 0 {
			fmt.Fprintf(w, "  first poll error: %s\n", g.FirstErrors[0])
		}
		if len(g.Violations) > 0 {
			fmt.Fprintf(w, "GROUP VIOLATIONS %v:\n", g.Counts)
			for _, v := range g.Violations {
				fmt.Fprintf(w, "  %v\n", v)
			}
		}
	}
	if len(r.Growth) > 0 {
		fmt.Fprintf(w, "resources, the warm-up's second half (to %v) against after it (max of each):\n", r.Options.Warmup)
		for _, g := range r.Growth {
			fmt.Fprintf(w, "  %v\n", g)
		}
	} else if r.Options.Soak {
		fmt.Fprintf(w, "SOAK NOT CHECKED: no node was sampled both in the warm-up's second half and after it (%d samples)\n", len(r.Resources))
	}
	if r.StopErrors != "" {
		fmt.Fprintf(w, "stopping: %s\n", r.StopErrors)
	}
	fmt.Fprintf(w, "unavailability per fault kind and partition category (untouched: neither its primary nor its quorum hit; target %v where marked):\n", TargetResume)
	for _, row := range r.Rows {
		fmt.Fprintf(w, "  %v\n", row)
	}
	if n := r.TargetMissed(); n > 0 {
		fmt.Fprintf(w, "target missed by %d samples; the worst:\n", n)
		var missed []Sample
		for _, s := range r.Samples {
			if s.Targeted() && !s.Met() {
				missed = append(missed, s)
			}
		}
		sort.Slice(missed, func(i, j int) bool { return missed[i].Took > missed[j].Took })
		for _, s := range missed[:min(len(missed), 10)] {
			fmt.Fprintf(w, "  fault #%d %s: %s (factor %d, %s) %s %v%s\n", s.Fault, s.Kind, s.Partition, s.Factor, s.Category, s.Phase,
				s.Took.Round(time.Millisecond), map[bool]string{false: " (never resumed)", true: ""}[s.Resumed])
		}
	}
	switch {
	case r.Err != "":
		fmt.Fprintf(w, "result: NOT CHECKED — the run stopped before its checks: %s\n", r.Err)
	case r.OK():
		fmt.Fprint(w, "result: every acknowledged write present once, in order; replicas equal")
		if r.Group != nil {
			fmt.Fprint(w, "; the group polled every record, in order, with no commit going back")
		}
		fmt.Fprintln(w)
	default:
		fmt.Fprintln(w, "result: FAILED — see above; replay the schedule with -seed", r.Seed)
	}
}
