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

// count records one measured completion at run time nowNs.
// REQUIRES: called from one goroutine at a time.
func (a *actor) count(nowNs int64, bytes int, latencyNs int64, withLatency bool) {
	if withLatency {
		a.hist.record(latencyNs)
	}
	a.messages.Add(1)
	a.bytes.Add(int64(bytes))
	a.lastNs.Store(nowNs)
}

// report returns the actor's figures; the measured part began at run
// time startNs. REQUIRES: the actor's completing goroutine has finished.
func (a *actor) report(startNs int64) ActorReport {
	r := ActorReport{Name: a.name, Messages: a.messages.Load(), Bytes: a.bytes.Load(),
		Latency: a.hist.summary(), Errors: a.errors.Load()}
	if r.Messages > 0 {
		r.ElapsedNs = a.lastNs.Load() - startNs
	}
	r.rates()
	return r
}

// total merges actors into one ActorReport named name.
func total(name string, actors []*actor, startNs int64) *ActorReport {
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
		t.ElapsedNs = last - startNs
	}
	t.rates()
	return &t
}
