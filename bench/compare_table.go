package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
)

// Row is one figure of one scenario in the comparison.
type Row struct {
	Group    string `json:"group"`
	Scenario string `json:"scenario"`
	Title    string `json:"title"`
	Figure   string `json:"figure"`
	Unit     string `json:"unit"`
	// Corestream and Peer are the figures (nil: not measured).
	Corestream *float64 `json:"corestream,omitempty"`
	Peer       *float64 `json:"peer,omitempty"`
	// Ratio is corestream / peer in the peer group, and the figure over
	// the same figure of the group's first scenario in scaling groups.
	Ratio *float64 `json:"ratio,omitempty"`
	// OfLimit and PeerOfLimit are each figure against the machine's
	// limit: a fraction of the TCP blast for bytes/s figures, a multiple
	// of the loopback round trip at the same percentile for latencies.
	OfLimit     *float64 `json:"of_limit,omitempty"`
	PeerOfLimit *float64 `json:"peer_of_limit,omitempty"`
	// OfTwoProcRTT and PeerOfTwoProcRTT are a one-at-a-time latency as a
	// multiple of the two-process round trip (Limits.TCPRoundTripTwoProcs)
	// at the same percentile: the floor of a client and a broker that are
	// two processes, where OfLimit's is two goroutines of one.
	OfTwoProcRTT     *float64 `json:"of_two_process_rtt,omitempty"`
	PeerOfTwoProcRTT *float64 `json:"peer_of_two_process_rtt,omitempty"`
	// OfDisk is corestream's bytes/s as a fraction of the disk's
	// sequential write bandwidth.
	OfDisk *float64 `json:"of_disk,omitempty"`
	// OfIdeal is corestream's figure against the ideal broker measured
	// in the same run (Limits.Ideal): a fraction of its bytes/s, of its
	// msg/s where the scenario's messages are the ideal's size, and a
	// multiple of its server, client, or client+server CPU per message.
	OfIdeal *float64 `json:"of_ideal,omitempty"`
	Target  string   `json:"target,omitempty"`
	// Verdict is "met", "MISSED", "pending" or "" (no target, or nothing
	// to judge).
	Verdict string `json:"verdict,omitempty"`
	// Note says why a figure is missing (pending: cluster, a failure).
	Note string `json:"note,omitempty"`
}

func ptr(v float64) *float64 { return &v }

// buildRows turns the runs into rows, scenario by scenario.
func buildRows(scenarios []Scenario, runs []*RunResult, lim *Limits) []Row {
	find := func(sc, sys string) *RunResult {
		for _, r := range runs {
			if r.Scenario == sc && r.System == sys {
				return r
			}
		}
		return nil
	}
	first := map[string]string{} // group → its first scenario run
	var rows []Row
	for _, sc := range scenarios {
		cs, peer := find(sc.Name, "corestream"), find(sc.Name, "nats-jetstream")
		if cs == nil && peer == nil {
			continue
		}
		if _, ok := first[sc.Group]; !ok {
			first[sc.Group] = sc.Name
		}
		for _, f := range sc.Figures {
			row := Row{Group: sc.Group, Scenario: sc.Name, Title: sc.Title, Figure: f.Name, Unit: f.Unit}
			if f.Target != nil {
				row.Target = f.Target.Text
			}
			row.Corestream, row.Note = figure(f, cs)
			var peerNote string
			row.Peer, peerNote = figure(f, peer)
			if peerNote != "" && !strings.HasPrefix(row.Note, "pending") {
				row.Note = strings.TrimPrefix(row.Note+"; NATS: "+peerNote, "; ")
			}
			switch {
			case sc.Group == groupPeer && row.Corestream != nil && row.Peer != nil && *row.Peer > 0:
				row.Ratio = ptr(*row.Corestream / *row.Peer)
			case sc.Group != groupPeer && sc.Group != groupIdle && first[sc.Group] != sc.Name && row.Corestream != nil:
				if b, _ := figure(f, find(first[sc.Group], "corestream")); b != nil && *b > 0 {
					row.Ratio = ptr(*row.Corestream / *b)
				}
			}
			row.OfLimit, row.PeerOfLimit, row.OfDisk = ofLimit(f, row.Corestream, lim), ofLimit(f, row.Peer, lim), nil
			if lim != nil {
				row.OfTwoProcRTT, row.PeerOfTwoProcRTT = ofRTT(f, row.Corestream, lim.TCPRoundTripTwoProcs), ofRTT(f, row.Peer, lim.TCPRoundTripTwoProcs)
			}
			if f.Unit == "B/s" && row.Corestream != nil && lim != nil && lim.DiskWriteBytesPerSec > 0 {
				row.OfDisk = ptr(*row.Corestream / lim.DiskWriteBytesPerSec)
			}
			row.OfIdeal = ofIdeal(sc, f, row.Corestream, lim)
			row.Verdict = verdict(f.Target, row)
			rows = append(rows, row)
		}
	}
	return rows
}

// ofLimit returns v against the machine's limit: a fraction of the TCP
// blast for bytes/s, a multiple of the round trip's same percentile for
// latencies; nil when neither applies.
func ofLimit(f Figure, v *float64, lim *Limits) *float64 {
	if v == nil || lim == nil {
		return nil
	}
	switch {
	case f.Unit == "B/s" && lim.TCPBytesPerSec > 0:
		return ptr(*v / lim.TCPBytesPerSec)
	case f.Unit == "ns":
		return ofRTT(f, v, lim.TCPRoundTrip)
	}
	return nil
}

// ofRTT returns the one-at-a-time latency v as a multiple of the round
// trip rtt at the same percentile; nil for other figures.
func ofRTT(f Figure, v *float64, rtt *Summary) *float64 {
	if v == nil || rtt == nil || f.Unit != "ns" || !f.VsRTT {
		return nil
	}
	ns := map[float64]int64{50: rtt.P50Ns, 90: rtt.P90Ns, 99: rtt.P99Ns, 99.9: rtt.P999Ns}[f.Quantile]
	if ns <= 0 {
		return nil
	}
	return ptr(*v / float64(ns))
}

// ofIdeal returns v against the ideal broker of lim: a fraction of its
// throughput (msg/s only for messages of its size), a multiple of its
// server, client or client+server CPU per message; nil when none applies.
func ofIdeal(sc Scenario, f Figure, v *float64, lim *Limits) *float64 {
	if v == nil || lim == nil || lim.Ideal == nil || lim.Ideal.Messages == 0 {
		return nil
	}
	id := lim.Ideal
	switch {
	case f.Unit == "B/s":
		return ptr(*v / id.BytesPerSec())
	case f.Unit == "msg/s" && sc.Spec.MessageBytes == DefaultIdealOptions().MessageBytes:
		return ptr(*v / id.MessagesPerSec())
	case f.Unit == "ns" && f.Name == cpuFigureName && id.CPUPerMessageNs() > 0:
		return ptr(*v / id.CPUPerMessageNs())
	case f.Unit == "ns" && f.Name == clientCPUFigureName && id.ClientCPUPerMessageNs() > 0:
		return ptr(*v / id.ClientCPUPerMessageNs())
	case f.Unit == "ns" && f.Name == totalCPUFigureName && id.ClientCPUPerMessageNs() > 0:
		return ptr(*v / (id.CPUPerMessageNs() + id.ClientCPUPerMessageNs()))
	}
	return nil
}

// figure reads f from r; nil with a note when r is pending or failed.
func figure(f Figure, r *RunResult) (*float64, string) {
	switch {
	case r == nil:
		return nil, ""
	case r.Pending != "":
		return nil, r.Pending
	case r.Report == nil && r.Err != "":
		return nil, "failed: " + firstLine(r.Err)
	}
	v, ok := f.Get(r)
	note := ""
	switch {
	case r.Err != "":
		note = "run had failures: " + firstLine(r.Err)
	case !ok && f.Kind != "":
		note = nothingInWindow(r, f.Kind)
	}
	if !ok {
		return nil, note
	}
	return ptr(v), note
}

// nothingInWindow explains a figure missing because nothing of kind
// completed inside the measured window although the run completed some:
// how many, and by when.
func nothingInWindow(r *RunResult, kind string) string {
	if r.Report == nil || len(r.Report.Timeline) == 0 {
		return ""
	}
	last := r.Report.Timeline[len(r.Report.Timeline)-1]
	n := last.Produced
	if kind == "consume" {
		n = last.Consumed
	}
	if n == 0 {
		return "nothing completed"
	}
	return fmt.Sprintf("nothing completed in the window; %d by %.1fs", n, float64(last.AtMs)/1000)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// verdict judges row against t.
func verdict(t *Target, row Row) string {
	if t == nil {
		return ""
	}
	if strings.HasPrefix(row.Note, "pending") {
		return "pending"
	}
	var got *float64
	met := false
	switch t.Kind {
	case "ratio>=":
		got = row.Ratio
		met = got != nil && *got >= t.Value
	case "ratio<=":
		got = row.Ratio
		met = got != nil && *got <= t.Value
	case "tcp>=":
		got = row.OfLimit
		met = got != nil && *got >= t.Value
	case "rtt<=":
		got = row.OfLimit
		met = got != nil && *got <= t.Value
	case "ideal>=":
		got = row.OfIdeal
		met = got != nil && *got >= t.Value
	case "<":
		got = row.Corestream
		met = got != nil && *got < t.Value
	case "<=":
		got = row.Corestream
		met = got != nil && *got <= t.Value
	}
	switch {
	case got == nil:
		return ""
	case met:
		return "met"
	default:
		return "MISSED"
	}
}

// formatValue renders a figure in its unit.
func formatValue(v *float64, unit string) string {
	if v == nil {
		return "-"
	}
	switch unit {
	case "msg/s":
		return humanize.CommafWithDigits(*v, 0)
	case "B/s":
		return fmtMBps(*v) + " MB/s"
	case "ns":
		return FormatNs(int64(*v))
	case "%cpu":
		return fmt.Sprintf("%.1f%% of a core", *v)
	}
	return fmt.Sprintf("%g", *v)
}

func formatRatio(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f×", *v)
}

func formatPercent(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", *v*100)
}

// formatLimit renders a figure against its limit: "31% TCP" for bytes/s,
// "2.1× RTT" for latencies, followed by ", 1.2× 2-proc" when the
// two-process round trip was measured (twoProc).
func formatLimit(v, twoProc *float64, unit string) string {
	switch {
	case v == nil:
		return "-"
	case unit == "ns" && twoProc != nil:
		return fmt.Sprintf("%.1f× RTT, %.1f× 2-proc", *v, *twoProc)
	case unit == "ns":
		return fmt.Sprintf("%.1f× RTT", *v)
	}
	return fmt.Sprintf("%.0f%% TCP", *v*100)
}

// formatIdeal renders a figure against the ideal broker: "72% ideal"
// for throughput, "1.8× ideal" for CPU per message.
func formatIdeal(v *float64, unit string) string {
	switch {
	case v == nil:
		return "-"
	case unit == "ns":
		return fmt.Sprintf("%.1f× ideal", *v)
	}
	return fmt.Sprintf("%.0f%% ideal", *v*100)
}

// The column headers of the two kinds of group.
const (
	peerHeader    = "scenario\tfigure\tcorestream\tNATS\tcs/NATS\tcs vs ideal\tcs vs limit\tNATS vs limit\tcs %disk\ttarget\tverdict\tnote\n"
	scalingHeader = "scenario\tfigure\tcorestream\tvs first\tvs ideal\tvs limit\tnote\n"
)

// WriteTable prints the machine, its limits and the rows, group by group.
func (c *Comparison) WriteTable(w io.Writer) {
	m := c.Machine
	fmt.Fprintf(w, "machine: %s, %d cores, %s memory, %s, %s\n", m.CPUModel, m.Cores, humanize.IBytes(m.MemoryBytes), m.Kernel, m.GoVersion)
	fmt.Fprintf(w, "each run: warm-up %v, measured %v; whole comparison %v\n\n", c.Warmup, c.Duration, c.Elapsed.Round(1e9))
	if c.Limits != nil {
		c.Limits.WriteTable(w)
		fmt.Fprintln(w)
	}
	group := ""
	var tw *tabwriter.Writer
	for _, r := range c.Rows {
		if r.Group != group {
			if tw != nil {
				tw.Flush()
				fmt.Fprintln(w)
			}
			group = r.Group
			fmt.Fprintf(w, "== %s ==\n", group)
			tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			if group == groupPeer {
				io.WriteString(tw, peerHeader)
			} else {
				io.WriteString(tw, scalingHeader)
			}
		}
		if group == groupPeer {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Title, r.Figure,
				formatValue(r.Corestream, r.Unit), formatValue(r.Peer, r.Unit), formatRatio(r.Ratio), formatIdeal(r.OfIdeal, r.Unit),
				formatLimit(r.OfLimit, r.OfTwoProcRTT, r.Unit), formatLimit(r.PeerOfLimit, r.PeerOfTwoProcRTT, r.Unit), formatPercent(r.OfDisk), r.Target, r.Verdict, r.Note)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Title, r.Figure,
				formatValue(r.Corestream, r.Unit), formatRatio(r.Ratio), formatIdeal(r.OfIdeal, r.Unit), formatLimit(r.OfLimit, r.OfTwoProcRTT, r.Unit), r.Note)
		}
	}
	if tw != nil {
		tw.Flush()
	}
	var met, missed, pending int
	for _, r := range c.Rows {
		switch r.Verdict {
		case "met":
			met++
		case "MISSED":
			missed++
		case "pending":
			pending++
		}
	}
	fmt.Fprintf(w, "\ntargets: %d met, %d missed, %d pending\n", met, missed, pending)
}
