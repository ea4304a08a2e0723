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
