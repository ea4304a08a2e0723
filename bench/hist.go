package bench

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The latency histogram's range: 1 ns to one minute at three significant
// digits (every value within 0.1 %; about 210 KiB per histogram). Longer
// latencies are recorded as latencyNsMax and counted in
// Summary.Saturated.
const (
	latencyNsMin   = 1
	latencyNsMax   = int64(time.Minute)
	latencyDigits  = 3
	percentilesLen = 5
)

// percentiles are the quantiles every Summary reports, in percent.
var percentiles = [percentilesLen]float64{50, 90, 99, 99.9, 99.99}

// latencies is one actor's latency histogram. It is not safe for
// concurrent use: one goroutine records, and Run reads it after that
// goroutine finished.
type latencies struct {
	h         *hdrhistogram.Histogram
	saturated int64
}

func newLatencies() *latencies {
	return &latencies{h: hdrhistogram.New(latencyNsMin, latencyNsMax, latencyDigits)}
}

// record adds one latency in nanoseconds; negative values (a clock that
// cannot go backwards did not) are recorded as the minimum.
func (l *latencies) record(ns int64) {
	switch {
	case ns < latencyNsMin:
		ns = latencyNsMin
	case ns > latencyNsMax:
		ns = latencyNsMax
		l.saturated++
	}
	l.h.RecordValue(ns) // in range by construction
}

// merge adds o's values to l.
func (l *latencies) merge(o *latencies) {
	l.h.Merge(o.h)
	l.saturated += o.saturated
}

// Summary is a latency distribution reduced to what reports print.
type Summary struct {
	// Count is the number of values.
	Count int64 `json:"count"`
	// Saturated counts values over a minute, recorded as one minute.
	Saturated int64 `json:"saturated,omitempty"`
	MinNs     int64 `json:"min_ns"`
	MeanNs    int64 `json:"mean_ns"`
	P50Ns     int64 `json:"p50_ns"`
	P90Ns     int64 `json:"p90_ns"`
	P99Ns     int64 `json:"p99_ns"`
	P999Ns    int64 `json:"p99_9_ns"`
	P9999Ns   int64 `json:"p99_99_ns"`
	MaxNs     int64 `json:"max_ns"`
}

// summary returns l's Summary; nil when it holds no value.
func (l *latencies) summary() *Summary {
	if l.h.TotalCount() == 0 {
		return nil
	}
	v := l.h.ValueAtPercentilesSlice(percentiles[:])
	return &Summary{
		Count: l.h.TotalCount(), Saturated: l.saturated,
		MinNs: l.h.Min(), MeanNs: int64(l.h.Mean()),
		P50Ns: v[0], P90Ns: v[1], P99Ns: v[2], P999Ns: v[3], P9999Ns: v[4],
		MaxNs: l.h.Max(),
	}
}
