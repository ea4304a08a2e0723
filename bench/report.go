package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
)

// ReportVersion is the version of the JSON report's layout; it changes
// when a field changes meaning or goes away.
const ReportVersion = 1

// Report is everything one run measured, and under what conditions.
type Report struct {
	Version int `json:"version"`
	// System names what ran ("corestream", "nats-jetstream").
	System string `json:"system"`
	// Settings are the system's settings that matter to the figures.
	Settings map[string]string `json:"settings,omitempty"`
	Spec     Spec              `json:"spec"`
	Machine  Machine           `json:"machine"`
	Started  time.Time         `json:"started"`
	// Producers and Consumers are per-actor figures.
	Producers []ActorReport `json:"producers,omitempty"`
	Consumers []ActorReport `json:"consumers,omitempty"`
	// Produce and Consume are the totals of each kind (nil without
	// actors of that kind).
	Produce *ActorReport `json:"produce,omitempty"`
	Consume *ActorReport `json:"consume,omitempty"`
	// Lost counts, in e2e mode, acknowledged messages that no consumer
	// received before the drain timeout.
	Lost int64 `json:"lost,omitempty"`
	// Errors counts failed operations across actors.
	Errors int64 `json:"errors"`
	// FirstError is the first failure's text.
	FirstError string `json:"first_error,omitempty"`
	// Timeline samples the completions every 100 ms, warm-up included.
	Timeline []Sample `json:"timeline,omitempty"`
}

// ActorReport is one actor's (or a total's) figures over the measured
// part of the run.
type ActorReport struct {
	Name string `json:"name"`
	// Messages and Bytes count completed, measured messages (acknowledged
	// for producers, received for consumers) and their value bytes.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// ElapsedNs runs from the end of the warm-up to the last counted
	// completion.
	ElapsedNs      int64   `json:"elapsed_ns"`
	MessagesPerSec float64 `json:"messages_per_sec"`
	BytesPerSec    float64 `json:"bytes_per_sec"`
	// Latency is produce call → acknowledgement for producers, produce
	// call → receipt for e2e consumers; nil for consume mode readers.
	Latency *Summary `json:"latency,omitempty"`
	Errors  int64    `json:"errors,omitempty"`
	// Steadiness is the spread of the totals' throughput over 100 ms
	// intervals (totals only).
	Steadiness *Steadiness `json:"steadiness,omitempty"`
}

// rates fills the per-second figures from the counts and the time.
func (a *ActorReport) rates() {
	if a.ElapsedNs > 0 {
		s := float64(a.ElapsedNs) / 1e9
		a.MessagesPerSec = float64(a.Messages) / s
		a.BytesPerSec = float64(a.Bytes) / s
	}
}

// WriteJSON writes r, indented, to path ("-": standard output, w).
func (r *Report) WriteJSON(path string, stdout io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// StartCPUProfile writes a CPU profile of this process to path until the
// returned function is called (the load generator's --cpuprofile).
func StartCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
}

// MarshalIndent renders v as indented JSON with a final newline.
func MarshalIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bench: encoding JSON: %w", err)
	}
	return append(b, '\n'), nil
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench: report %s: %w", path, err)
	}
	if r.Version != ReportVersion {
		return nil, fmt.Errorf("bench: report %s has version %d, not %d", path, r.Version, ReportVersion)
	}
	return &r, nil
}

// WriteTable prints r as a table: one row per actor and one per total.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s %s: %d producers, %d consumers, %s messages, %d partitions",
		r.System, r.Spec.Mode, r.Spec.Producers, r.Spec.Consumers, humanize.IBytes(uint64(r.Spec.MessageBytes)), r.Spec.Partitions)
	if r.Spec.Sync {
		fmt.Fprint(w, ", synchronous")
	} else if r.Spec.Mode != ModeConsume {
		fmt.Fprintf(w, ", batches of %s, linger %v", humanize.IBytes(uint64(r.Spec.BatchBytes)), r.Spec.Linger)
	}
	fmt.Fprintf(w, ", acks %s\n", r.Spec.Acks)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "actor\tmessages\tmsg/s\tMB/s\tp50\tp90\tp99\tp99.9\tp99.99\tmax\terrors\t")
	rows := func(list []ActorReport, total *ActorReport) {
		if total == nil {
			return
		}
		if len(list) > 1 {
			for i := range list {
				writeRow(tw, &list[i])
			}
		}
		writeRow(tw, total)
	}
	rows(r.Producers, r.Produce)
	rows(r.Consumers, r.Consume)
	tw.Flush()
	for _, t := range []*ActorReport{r.Produce, r.Consume} {
		if t != nil && t.Steadiness != nil {
			s := t.Steadiness
			fmt.Fprintf(w, "%s: over %d ms intervals, slowest %s msg/s (at %.1fs), fastest %s msg/s\n", t.Name, s.IntervalMs,
				humanize.CommafWithDigits(s.SlowestPerSec, 0), float64(s.SlowestAtMs)/1000, humanize.CommafWithDigits(s.FastestPerSec, 0))
		}
	}
	if r.Lost > 0 {
		fmt.Fprintf(w, "LOST: %d acknowledged messages never reached a consumer\n", r.Lost)
	}
	if r.Errors > 0 {
		fmt.Fprintf(w, "ERRORS: %d; first: %s\n", r.Errors, r.FirstError)
	}
}

func writeRow(w io.Writer, a *ActorReport) {
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t", a.Name, humanize.Comma(a.Messages),
		humanize.CommafWithDigits(a.MessagesPerSec, 0), fmtMBps(a.BytesPerSec))
	if l := a.Latency; l != nil {
		for _, v := range []int64{l.P50Ns, l.P90Ns, l.P99Ns, l.P999Ns, l.P9999Ns, l.MaxNs} {
			fmt.Fprintf(w, "%s\t", FormatNs(v))
		}
	} else {
		fmt.Fprint(w, "-\t-\t-\t-\t-\t-\t")
	}
	fmt.Fprintf(w, "%d\t\n", a.Errors)
}

// fmtMBps renders bytes per second in MB/s (10^6 bytes).
func fmtMBps(bps float64) string {
	return fmt.Sprintf("%.1f", bps/1e6)
}

// FormatNs renders a latency with three significant digits and a unit
// (µs below a millisecond, ms below a second).
func FormatNs(ns int64) string {
	d := float64(ns)
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1e6:
		return trim3(d/1e3) + "µs"
	case ns < 1e9:
		return trim3(d/1e6) + "ms"
	default:
		return trim3(d/1e9) + "s"
	}
}

// trim3 prints v (1 <= v < 1000) with three significant digits.
func trim3(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}
