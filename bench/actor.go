package bench

import (
	"sync"
	"sync/atomic"
)

// actor is one producer's or consumer's tally.
//
// The counters are written by the goroutine that completes the actor's
// operations (a producer's delivery goroutine, a consumer's Run) and read
// live by the progress goroutine, so they are atomics; the histogram is
// read only after that goroutine finished (Flush or Run returned).
type actor struct {
	name string
	hist *latencies
	// completions counts every completion, warm-up included (progress).
	completions atomic.Int64
	// acked counts successful completions, warm-up included: what an e2e
	// consumer must eventually receive.
	acked atomic.Int64
	// messages and bytes count measured completions.
	messages atomic.Int64
	bytes    atomic.Int64
	// lastNs is the run time of the last measured completion.
	lastNs atomic.Int64
	errors atomic.Int64
	// lastAckNs is the run time of the last timed acknowledgement, which
	// untimed ones take as theirs (runner.complete). Only the completing
	// goroutine touches it.
	lastAckNs int64

	errMu    sync.Mutex // guards firstErr
	firstErr error
}

func newActor(name string) *actor {
	return &actor{name: name, hist: newLatencies()}
}

// fail counts an error, keeping the first.
func (a *actor) fail(err error) {
	a.completions.Add(1)
	a.errors.Add(1)
	a.errMu.Lock()
	if a.firstErr == nil {
		a.firstErr = err
	}
	a.errMu.Unlock()
}

// first returns the first error counted, or nil.
func (a *actor) first() error {
	a.errMu.Lock()
	defer a.errMu.Unlock()
	return a.firstErr
}

// window is the measured part of a run, in run time.
type window struct {
	// warmNs ends the warm-up.
	warmNs int64
	// endNs ends the measured part in duration mode; 0 in count mode.
	endNs int64
	// runEndNs is when the run stopped (set after it did).
	runEndNs int64
}

// counts reports whether a completion at now of a message sent at sent
// counts toward throughput: in duration mode, completions inside the
// window (steady state, whenever the message was sent); in count mode,
// the messages sent after the warm-up.
func (w window) counts(now, sent int64) bool {
	if w.endNs > 0 {
		return now >= w.warmNs && now < w.endNs
	}
	return sent >= w.warmNs
}

// elapsed returns the time throughput is divided by: the window in
// duration mode (cut short if the run stopped first), else from the
// warm-up's end to the last counted completion.
func (w window) elapsed(lastNs int64) int64 {
	if w.endNs > 0 && !w.drainedEarly(lastNs) {
		return min(w.endNs, max(w.runEndNs, w.warmNs)) - w.warmNs
	}
	return lastNs - w.warmNs
}

// drainedEarly reports whether a duration-mode run ran out of work before
// its end (a consume run that read everything): then the time is up to
// the last completion.
func (w window) drainedEarly(lastNs int64) bool {
	return w.runEndNs > 0 && w.runEndNs < w.endNs && lastNs > 0
}

// measure records a completion at run time now of a message sent at sent
// (for readers of old messages, sent = now): its latency when withLatency
// and it was sent after the warm-up, and its count when w counts it.
// REQUIRES: called from one goroutine at a time.
func (a *actor) measure(w window, now, sent int64, bytes int, withLatency bool) {
	if withLatency && sent >= w.warmNs {
		a.hist.record(now - sent)
	}
	if w.counts(now, sent) {
		a.messages.Add(1)
		a.bytes.Add(int64(bytes))
		a.lastNs.Store(now)
	}
}

// report returns the actor's figures over w.
// REQUIRES: the actor's completing goroutine has finished.
func (a *actor) report(w window) ActorReport {
	r := ActorReport{Name: a.name, Messages: a.messages.Load(), Bytes: a.bytes.Load(),
		Latency: a.hist.summary(), Errors: a.errors.Load()}
	if r.Messages > 0 {
		r.ElapsedNs = w.elapsed(a.lastNs.Load())
	}
	r.rates()
	return r
}

// total merges actors into one ActorReport named name.
func total(name string, actors []*actor, w window) *ActorReport {
	if len(actors) == 0 {
		return nil
	}
	h := newLatencies()
	t := ActorReport{Name: name}
	var last int64
	for _, a := range actors {
		h.merge(a.hist)
		t.Messages += a.messages.Load()
		t.Bytes += a.bytes.Load()
		t.Errors += a.errors.Load()
		last = max(last, a.lastNs.Load())
	}
	t.Latency = h.summary()
	if t.Messages > 0 {
		t.ElapsedNs = w.elapsed(last)
	}
	t.rates()
	return &t
}
