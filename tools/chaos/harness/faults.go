package harness

import (
	"context"
	"fmt"
	"time"
)

// faults runs the schedule until Options.Duration has passed or
// FaultsMax faults have run.
func (r *run) faults(ctx context.Context) error {
	kinds := r.o.Kinds
	if r.net == nil {
		kinds = nil
		for _, k := range r.o.Kinds {
			if !k.Network() {
				kinds = append(kinds, k)
			}
		}
	}
	if len(kinds) == 0 {
		return fmt.Errorf("chaos: no fault kind left to run (%v asked; network faults skipped: %s)", r.o.Kinds, r.rep.NetworkSkipped)
	}
	sched := Schedule(ScheduleOptions{Seed: r.o.Seed, Count: r.o.FaultsMax, Kinds: kinds, Nodes: r.o.Nodes,
		HoldMin: r.o.HoldMin, HoldMax: r.o.HoldMax, GapMax: r.o.GapMax})
	end := time.Now().Add(r.o.Duration)
	routes, _, err := r.routes(ctx)
	if err != nil {
		return fmt.Errorf("chaos: metadata before the first fault: %w", err)
	}
	for _, f := range sched {
		if time.Now().After(end) {
			break
		}
		if at := r.budget.spent(); at > 0 {
			r.rep.BudgetSpentNs = at
			r.logf("the budget of %d writes ran out %v into the run: no more faults", r.o.WritesMax, time.Duration(at).Round(time.Second))
			break
		}
		if err := r.cluster.Exited(); err != nil {
			return err
		}
		if fresh, _, err := r.routes(ctx); err == nil {
			routes = fresh
		}
		rec := FaultRecord{Fault: f, Routes: routes}
		if err := r.one(ctx, &rec); err != nil {
			r.faultsRun = append(r.faultsRun, rec)
			return err
		}
		r.faultsRun = append(r.faultsRun, rec)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.Gap):
		}
	}
	return nil
}

// one injects fault rec, holds it, heals it and waits (at most SettleMax)
// until every partition acknowledges a write started after the heal.
func (r *run) one(ctx context.Context, rec *FaultRecord) error {
	f := rec.Fault
	var err error
	switch f.Kind {
	case KindKill:
		err = r.cluster.Kill(f.Node)
	case KindStop:
		err = r.cluster.Freeze(f.Node)
	case KindIsolate:
		err = r.net.Cut(IsolateRules(r.net.nodePorts(), f.Node))
	case KindClientCut:
		err = r.net.Cut(ClientCutRules(r.net.nodePorts(), f.Node))
	}
	// The fault counts from when it is in force (the process reaped, the
	// rules in place): a write started while the rules were being added
	// may still go through.
	rec.AtNs = r.clock()
	if err != nil {
		return fmt.Errorf("chaos: injecting %v: %w", f, err)
	}
	r.logf("fault %v", f)
	hold := time.NewTimer(f.Hold)
	select {
	case <-ctx.Done():
	case <-hold.C:
	}
	hold.Stop()
	switch f.Kind {
	case KindKill:
		if ctx.Err() != nil {
			return ctx.Err() // stopping: the node stays down, cleanup stops the rest
		}
		err = r.cluster.Start(ctx, f.Node)
	case KindStop:
		err = r.cluster.Thaw(f.Node)
	case KindIsolate, KindClientCut:
		err = r.net.Heal()
	}
	rec.HealNs = r.clock()
	if err != nil {
		return fmt.Errorf("chaos: healing %v: %w", f, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.waitAcked(ctx, rec.HealNs, r.o.SettleMax) {
		rec.SettledNs = r.clock()
		r.logf("healed; every partition writing again %v after the heal", time.Duration(rec.SettledNs-rec.HealNs).Round(time.Millisecond))
	} else if r.budget.spent() == 0 {
		r.logf("healed; not every partition wrote within %v of the heal", r.o.SettleMax)
	}
	return nil
}

// drain stops the writers (each finishes its write in progress) and the
// tails, and flushes the producer.
func (r *run) drain(ctx context.Context) error {
	if r.stopWrites == nil {
		return nil
	}
	r.stopWrites()
	r.writesEndNs = r.clock()
	done := make(chan struct{})
	go func() {
		r.stopTails()
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainWaitMax):
		return fmt.Errorf("chaos: the writers did not stop within %v", drainWaitMax)
	}
	r.stopWrites, r.stopTails = nil, nil
	fctx, cancel := context.WithTimeout(ctx, drainWaitMax)
	defer cancel()
	if err := r.sender.close(fctx); err != nil {
		r.logf("closing the producer: %v", err)
	}
	r.sender = nil
	for _, t := range r.tails {
		r.rep.Tails = append(r.rep.Tails, t.report())
	}
	r.logf("writes stopped")
	return nil
}

// measure turns the writers' acknowledgements and the faults into
// resumption samples, and totals the writes.
func (r *run) measure() {
	acks := map[string][]Ack{}
	factor := map[string]int{}
	r.rep.Errors = map[string]int{}
	for _, w := range r.writers {
		name := w.part.String()
		acked, a, sent, fails, errs := w.snapshot()
		acks[name], factor[name] = a, w.part.Factor
		r.rep.WritesSent += sent
		r.rep.WritesAcked += int64(len(acked))
		r.rep.WritesFailed += int64(fails)
		for k, v := range errs {
			r.rep.Errors[k] += v
		}
	}
	spent := r.budget.spent()
	for i, f := range r.faultsRun {
		windowEnd := r.writesEndNs
		if i+1 < len(r.faultsRun) {
			windowEnd = r.faultsRun[i+1].AtNs
		}
		if spent > 0 && spent < windowEnd {
			windowEnd = spent // no write started after: nothing to measure
			r.rep.BudgetSpentNs = spent
		}
		for _, name := range r.sortedParts() {
			rt, ok := f.Routes[name]
			if !ok {
				continue
			}
			cat := Classify(f.Kind, f.Node, rt)
			base := Sample{Fault: f.Index, Kind: f.Kind, Category: cat, Partition: name, Factor: factor[name], Resumed: true}
			if cat == CatPrimary && f.Kind.NodeLevel() && factor[name] >= 3 && f.AtNs < windowEnd {
				s := base
				s.Phase = PhaseFirstAck
				s.Took, s.Resumed = Resume(acks[name], f.AtNs, windowEnd)
				r.rep.Samples = append(r.rep.Samples, s)
			}
			from, phase := f.AtNs, PhaseStallFault
			if cat != CatNone {
				from, phase = f.HealNs, PhaseStallHeal
			}
			if from > 0 && from < windowEnd {
				s := base
				s.Phase = phase
				s.Took = LongestStall(acks[name], from, windowEnd)
				s.Resumed = f.SettledNs > 0 || s.Took < time.Duration(windowEnd-from)
				r.rep.Samples = append(r.rep.Samples, s)
			}
		}
	}
	r.rep.Faults = r.faultsRun
	r.rep.Rows = Summarise(r.rep.Samples)
}
