package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// errorsPerActorMax stops an actor that keeps failing: the run is broken,
// and a tight loop of errors would only hide the first one.
const errorsPerActorMax = 1000

// ErrRunFailed is wrapped by Run's error when the run completed but some
// operations failed or, in e2e mode, acknowledged messages never arrived.
// The report is returned with it.
var ErrRunFailed = errors.New("bench: run had failures")

// Options are what Run needs besides the workload.
type Options struct {
	// Progress receives a progress bar while the run goes; nil: none.
	Progress io.Writer
	// PrepareTimeout bounds System.Prepare and the opening of every
	// actor. Default prepareTimeoutDefault.
	PrepareTimeout time.Duration
}

// prepareTimeoutDefault is Options.PrepareTimeout's default: creating a
// topic of thousands of partitions takes a while.
const prepareTimeoutDefault = 2 * time.Minute

// Run prepares sys for spec, runs the workload and returns its report.
// The report comes back with an error wrapping ErrRunFailed when
// operations failed; other errors (a bad spec, a system that cannot be
// prepared) come back without a report.
func Run(ctx context.Context, sys System, spec Spec, opt Options) (*Report, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Version: ReportVersion, System: sys.Name(), Settings: sys.Settings(&spec),
		Spec: spec, Machine: ThisMachine(), Started: time.Now().UTC()}
	if opt.PrepareTimeout <= 0 {
		opt.PrepareTimeout = prepareTimeoutDefault
	}
	pctx, cancel := context.WithTimeout(ctx, opt.PrepareTimeout)
	defer cancel()
	if err := sys.Prepare(pctx, &spec); err != nil {
		return nil, fmt.Errorf("bench: preparing %s: %w", sys.Name(), err)
	}
	if spec.Mode == ModeConsume && spec.Preload {
		if err := preload(ctx, sys, &spec, opt.Progress); err != nil {
			return nil, err
		}
	}
	r := &runner{sys: sys, spec: &spec, drained: make(chan struct{})}
	if err := r.open(pctx); err != nil {
		r.close(ctx)
		return nil, err
	}
	r.run(ctx, opt.Progress)
	r.close(ctx)
	r.fill(rep)
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("bench: interrupted: %w", err)
	}
	if rep.Errors > 0 || rep.Lost > 0 {
		return rep, fmt.Errorf("%w: %d errors, %d lost", ErrRunFailed, rep.Errors, rep.Lost)
	}
	return rep, nil
}

// runner is one measured run.
type runner struct {
	sys  System
	spec *Spec
	// base is the run clock's origin; every ns figure is time since base.
	base time.Time
	// warmNs ends the warm-up; endNs ends the producers in duration mode
	// (0 in count mode). w is the same as a window, fixed before any
	// actor starts; runEndNs is when the workload ended.
	warmNs, endNs int64
	w             window
	runEndNs      int64

	prods     []Producer
	cons      []Consumer
	producers []*actor
	consumers []*actor

	// received counts every message consumers received; target is how
	// many they must receive before the run ends, valid once targetSet.
	received  atomic.Int64
	target    atomic.Int64
	targetSet atomic.Bool
	drained   chan struct{}
	drainOnce sync.Once

	// timeline is written by the sampler goroutine, read after it stops.
	timeline []Sample
}

func (r *runner) now() int64 { return int64(time.Since(r.base)) }

// open creates the consumers (positioned before any message is sent) and
// the producers.
func (r *runner) open(ctx context.Context) error {
	s := r.spec
	start := StartLatest
	if s.Mode == ModeConsume {
		start = StartEarliest
	}
	for i := 0; i < s.Consumers && s.Mode != ModeProduce; i++ {
		c, err := r.sys.NewConsumer(ctx, s, i, consumerPartitions(s.Partitions, i, s.Consumers), start)
		if err != nil {
			return fmt.Errorf("bench: consumer %d: %w", i, err)
		}
		r.cons = append(r.cons, c)
		r.consumers = append(r.consumers, newActor(fmt.Sprintf("consumer-%d", i)))
	}
	for i := 0; i < s.Producers && s.Mode != ModeConsume; i++ {
		p, err := r.sys.NewProducer(ctx, s, i)
		if err != nil {
			return fmt.Errorf("bench: producer %d: %w", i, err)
		}
		r.prods = append(r.prods, p)
		r.producers = append(r.producers, newActor(fmt.Sprintf("producer-%d", i)))
	}
	return nil
}

// close closes every producer and consumer opened.
func (r *runner) close(ctx context.Context) {
	for i, p := range r.prods {
		if err := p.Close(ctx); err != nil && i < len(r.producers) {
			r.producers[i].fail(err)
		}
	}
	for _, c := range r.cons {
		c.Close()
	}
}

// run starts every actor and waits for the end of the workload.
func (r *runner) run(ctx context.Context, progress io.Writer) {
	s := r.spec
	r.base = time.Now()
	r.warmNs = int64(s.Warmup)
	if s.Messages == 0 {
		r.endNs = r.warmNs + int64(s.Duration)
	}
	r.w = window{warmNs: r.warmNs, endNs: r.endNs}
	if s.Mode == ModeConsume {
		r.setTarget(s.Messages)
	}
	cctx, stopConsumers := context.WithCancel(ctx)
	var cwg, pwg sync.WaitGroup
	for i, c := range r.cons {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			a := r.consumers[i]
			if err := c.Run(cctx, r.receiver(a), a.fail); err != nil && cctx.Err() == nil {
				a.fail(err)
			}
		}()
	}
	stopProgress := r.startProgress(progress)
	stopTimeline := r.startTimeline()
	for i, p := range r.prods {
		pwg.Go(func() { r.produce(ctx, i, p, r.producers[i]) })
	}
	pwg.Wait()
	switch s.Mode {
	case ModeE2E:
		var acked int64
		for _, a := range r.producers {
			acked += a.acked.Load()
		}
		r.setTarget(acked)
		r.waitDrained(ctx, time.After(s.DrainTimeout))
	case ModeConsume:
		var deadline <-chan time.Time
		if r.endNs > 0 {
			deadline = time.After(time.Duration(r.endNs - r.now()))
		}
		r.waitDrained(ctx, deadline)
	}
	r.runEndNs = r.now()
	stopConsumers()
	cwg.Wait()
	stopTimeline()
	stopProgress()
}

// setTarget says how many messages consumers must receive in all.
func (r *runner) setTarget(n int64) {
	r.target.Store(n)
	r.targetSet.Store(true)
	r.checkDrained(r.received.Load())
}

// checkDrained ends the consumers' wait once received reaches the target.
func (r *runner) checkDrained(received int64) {
	if r.targetSet.Load() && received >= r.target.Load() {
		r.drainOnce.Do(func() { close(r.drained) })
	}
}

// waitDrained waits until the consumers received the target, deadline
// fires, or ctx ends.
func (r *runner) waitDrained(ctx context.Context, deadline <-chan time.Time) {
	select {
	case <-r.drained:
	case <-deadline:
	case <-ctx.Done():
	}
}

// produce is producer i's loop: send until the quota or the end time,
// then flush.
func (r *runner) produce(ctx context.Context, i int, p Producer, a *actor) {
	s := r.spec
	value := newValue(s.MessageBytes, s.Seed, i)
	size := len(value)
	pc := newPacer(s.Rate / float64(len(r.prods)))
	quota := int64(-1)
	if s.Messages > 0 {
		quota = share(s.Messages, i, len(r.prods))
	}
	var measured int64
	// A message is timed exactly (its own clock reads and a histogram
	// entry) when every message must be: one at a time (the latency is
	// the figure), at a set rate, end to end (consumers read the send
	// time); otherwise one message in sampleEvery is, and the others
	// share its send time and its callback (sampleGroup).
	exact := s.Sync || pc.limited() || s.Mode == ModeE2E
	var g *sampleGroup
	for k := int64(0); k <= seqMax && ctx.Err() == nil; k++ {
		if exact || k%sampleEvery == 0 {
			g = r.newSampleGroup(a, size)
		}
		sent := g.sentNs
		if pc.limited() {
			sent = pc.due(0, k)
			waitUntil(r.now, sent)
			g.sentNs = sent
		}
		if r.endNs > 0 && sent >= r.endNs {
			break
		}
		if quota >= 0 && sent >= r.warmNs {
			if measured == quota {
				break
			}
			measured++
		}
		encodeHeader(value, header{sentNs: sent, producer: uint16(i), seq: uint64(k)})
		done := g.others
		if exact || k%sampleEvery == 0 {
			done = g.timed
		}
		err := p.Send(ctx, AnyPartition, value, done)
		if err != nil {
			a.fail(err)
			if a.errors.Load() >= errorsPerActorMax {
				break
			}
		}
	}
	if err := p.Flush(ctx); err != nil {
		a.fail(err)
	}
}

// sampleEvery is how many messages of a producer share one timed
// message (sampleGroup), when not every message must be timed. A clock
// read at send and at acknowledgement, a histogram entry and a callback
// allocated per message were most of the load generator's own cost
// (BenchmarkLoadGenerator), which it took from the broker sharing its
// cores.
const sampleEvery = 16

// sampleGroup is a timed message and the untimed ones sent after it: they
// share its send time and one callback, and an untimed acknowledgement
// takes the time of the producer's last timed one. Latency percentiles
// come from the timed messages; counts and bytes from all. The error in
// the window's edges is at most sampleEvery-1 messages.
type sampleGroup struct {
	sentNs int64
	// timed and others are the callbacks of the timed message and of the
	// rest of the group.
	timed, others func(error)
}

// newSampleGroup reads the clock for a new group of producer a's
// messages of size bytes.
func (r *runner) newSampleGroup(a *actor, size int) *sampleGroup {
	g := &sampleGroup{sentNs: r.now()}
	g.timed = func(err error) { r.complete(a, g.sentNs, size, err, true) }
	g.others = func(err error) { r.complete(a, g.sentNs, size, err, false) }
	return g
}

// complete records the outcome of a message sent at run time sentNs:
// timed, with its own clock read and latency; else at the actor's last
// timed acknowledgement.
func (r *runner) complete(a *actor, sentNs int64, size int, err error, timed bool) {
	if err != nil {
		a.fail(err)
		return
	}
	now := a.lastAckNs
	if timed || now == 0 {
		now = r.now()
		a.lastAckNs = now
	}
	a.completions.Add(1)
	a.acked.Add(1)
	a.measure(r.w, now, sentNs, size, timed)
}

// receiver returns consumer a's per-message function.
func (r *runner) receiver(a *actor) func([]byte) {
	e2e := r.spec.Mode == ModeE2E
	var n, now int64
	return func(v []byte) {
		// A reader of old messages times nothing: the clock only places
		// the message in the window, so it is read every sampleEvery
		// messages (end to end, every message's latency is the figure).
		if e2e || n%sampleEvery == 0 {
			now = r.now()
		}
		n++
		h, err := decodeHeader(v)
		if err != nil {
			a.fail(err)
			return
		}
		a.completions.Add(1)
		if e2e {
			a.measure(r.w, now, h.sentNs, len(v), true)
		} else {
			a.measure(r.w, now, now, len(v), false)
		}
		r.checkDrained(r.received.Add(1))
	}
}

// fill puts the actors' figures into rep.
// REQUIRES: run has returned.
func (r *runner) fill(rep *Report) {
	w := r.w
	w.runEndNs = r.runEndNs
	for _, a := range r.producers {
		rep.Producers = append(rep.Producers, a.report(w))
	}
	for _, a := range r.consumers {
		rep.Consumers = append(rep.Consumers, a.report(w))
	}
	rep.Produce = total("produce total", r.producers, w)
	rep.Consume = total("consume total", r.consumers, w)
	rep.Timeline = r.timeline
	if t := rep.Produce; t != nil && t.Messages > 0 {
		t.Steadiness = steadiness(r.timeline, r.warmNs/1e6, (r.warmNs+t.ElapsedNs)/1e6, func(s Sample) int64 { return s.Produced })
	}
	if t := rep.Consume; t != nil && t.Messages > 0 {
		t.Steadiness = steadiness(r.timeline, r.warmNs/1e6, (r.warmNs+t.ElapsedNs)/1e6, func(s Sample) int64 { return s.Consumed })
	}
	for _, a := range append(append([]*actor(nil), r.producers...), r.consumers...) {
		rep.Errors += a.errors.Load()
		if err := a.first(); err != nil && rep.FirstError == "" {
			rep.FirstError = a.name + ": " + err.Error()
		}
	}
	if r.spec.Mode == ModeE2E && r.targetSet.Load() {
		rep.Lost = max(0, r.target.Load()-r.received.Load())
	}
}

// preload produces spec.Messages messages as fast as the producers go,
// unmeasured, before a consume run.
func preload(ctx context.Context, sys System, spec *Spec, progress io.Writer) error {
	s := *spec
	s.Mode, s.Warmup, s.Rate, s.Sync, s.Duration = ModeProduce, 0, 0, false, 0
	r := &runner{sys: sys, spec: &s, drained: make(chan struct{})}
	if err := r.open(ctx); err != nil {
		r.close(ctx)
		return err
	}
	if progress != nil {
		fmt.Fprintf(progress, "preloading %d messages\n", s.Messages)
	}
	r.run(ctx, progress)
	r.close(ctx)
	var rep Report
	r.fill(&rep)
	if rep.Errors > 0 {
		return fmt.Errorf("bench: preloading: %d errors; first: %s", rep.Errors, rep.FirstError)
	}
	return ctx.Err()
}
