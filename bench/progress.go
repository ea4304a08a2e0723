package bench

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
)

// progressTick is how often the progress bar is redrawn.
const progressTick = 250 * time.Millisecond

// startProgress draws a progress bar on w until the returned function is
// called: measured messages against --messages in count mode, time
// against warm-up + --duration otherwise, with the live rate. A nil w
// draws nothing.
func (r *runner) startProgress(w io.Writer) (stop func()) {
	if w == nil {
		return func() {}
	}
	s := r.spec
	countMode := s.Messages > 0
	barMax := s.Messages
	if !countMode {
		barMax = (r.endNs + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	}
	bar := progressbar.NewOptions64(barMax,
		progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(progressTick), progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetDescription(string(s.Mode)))
	actors := r.producers
	if s.Mode == ModeConsume {
		actors = r.consumers
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressTick)
		defer t.Stop()
		var prev int64
		prevNs := r.now()
		for {
			select {
			case <-done:
				bar.Finish()
				fmt.Fprintln(w)
				return
			case <-t.C:
			}
			var completions, measured int64
			for _, a := range actors {
				completions += a.completions.Load()
				measured += a.messages.Load()
			}
			now := r.now()
			rate := float64(completions-prev) / (float64(now-prevNs) / 1e9)
			prev, prevNs = completions, now
			phase := "measuring"
			if now < r.warmNs {
				phase = "warm-up"
			}
			bar.Describe(fmt.Sprintf("%s %s: %s msg/s, %s/s", s.Mode, phase,
				humanize.CommafWithDigits(rate, 0), humanize.Bytes(uint64(rate*float64(s.MessageBytes)))))
			if countMode {
				bar.Set64(min(measured, barMax))
			} else {
				bar.Set64(min(now/int64(time.Millisecond), barMax))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// The timeline: cumulative completions sampled every timelineTick, at
// most timelineSamplesMax samples (an hour).
const (
	timelineTick       = 100 * time.Millisecond
	timelineSamplesMax = 36000
)

// Sample is the cumulative count of completed messages (warm-up
// included) at a point of the run.
type Sample struct {
	AtMs     int64 `json:"at_ms"`
	Produced int64 `json:"produced"`
	Consumed int64 `json:"consumed"`
}

// startTimeline samples completions every timelineTick into r.timeline
// until the returned function is called.
func (r *runner) startTimeline() (stop func()) {
	sum := func(actors []*actor) (n int64) {
		for _, a := range actors {
			n += a.completions.Load()
		}
		return n
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(timelineTick)
		defer t.Stop()
		for len(r.timeline) < timelineSamplesMax {
			select {
			case <-done:
				return
			case <-t.C:
			}
			r.timeline = append(r.timeline, Sample{AtMs: r.now() / 1e6, Produced: sum(r.producers), Consumed: sum(r.consumers)})
		}
	})
	return func() { close(done); wg.Wait() }
}

// Steadiness is the spread of throughput over the measured part of a
// run, from its timeline: a stall shows as a slow interval.
type Steadiness struct {
	// IntervalMs is the length of each interval.
	IntervalMs int64 `json:"interval_ms"`
	// SlowestPerSec and FastestPerSec are the extreme interval rates, in
	// completions per second; SlowestAtMs is when the slowest began.
	SlowestPerSec float64 `json:"slowest_per_sec"`
	SlowestAtMs   int64   `json:"slowest_at_ms"`
	FastestPerSec float64 `json:"fastest_per_sec"`
}

// steadiness computes the spread of one count of the timeline between
// run times fromMs and toMs; nil with fewer than two whole intervals.
func steadiness(tl []Sample, fromMs, toMs int64, count func(Sample) int64) *Steadiness {
	var s *Steadiness
	for i := 1; i < len(tl); i++ {
		a, b := tl[i-1], tl[i]
		if a.AtMs < fromMs || b.AtMs > toMs || b.AtMs <= a.AtMs {
			continue
		}
		rate := float64(count(b)-count(a)) * 1000 / float64(b.AtMs-a.AtMs)
		if s == nil {
			s = &Steadiness{IntervalMs: timelineTick.Milliseconds(), SlowestPerSec: rate, SlowestAtMs: a.AtMs, FastestPerSec: rate}
			continue
		}
		if rate < s.SlowestPerSec {
			s.SlowestPerSec, s.SlowestAtMs = rate, a.AtMs
		}
		s.FastestPerSec = max(s.FastestPerSec, rate)
	}
	return s
}
