package shard

import "fmt"

// A stepped group is the shard runtime without its threads, for a
// deterministic simulation that runs many nodes' shards in one goroutine
// on a simulated clock (Config.Clock). StartStepped boots every shard on
// the caller's goroutine and starts no loop; the simulation then runs a
// shard's rounds with Step whenever it has delivered work (a Post, a
// reply, a timer now due after it moved the clock), exactly the rounds
// the real loop runs (runOnce: inbox batch, replies, timers, deferred
// work, engine), and asks NextTimerNs when to step it next. Nothing here
// is on the real loop's path: the real and the stepped group share every
// method except how a round is started, so no produce or fetch pays for
// the seam.
//
// A stepped shard never parks, so Post never writes its eventfd (a poster
// wakes only an armed inbox), and OnThread is false on it: the caller's
// goroutine is not a locked shard thread.

// StartStepped boots every shard (engine, OnStart) on the calling
// goroutine and marks it running without starting its loop. The caller
// must then drive each shard with Step, from one goroutine at a time,
// and end the group with StopStepped or AbandonStepped.
func (g *Group) StartStepped() error {
	g.stepped = true
	for _, s := range g.shards {
		if !s.state.CompareAndSwap(stateNew, stateRunning) {
			return fmt.Errorf("shard %d: already started", s.id)
		}
		if err := s.boot(); err != nil {
			s.state.Store(stateStopped)
			g.AbandonStepped()
			return err
		}
	}
	return nil
}

// Step runs one round of a stepped shard's pending work and returns how
// much it ran; 0 means the shard is idle until something is posted to it
// or its clock reaches NextTimerNs. REQUIRES: the group was started with
// StartStepped; not concurrently with another Step of this shard.
func (s *Shard) Step() int { return s.runOnce() }

// steppedDoRoundsMax bounds the rounds Do runs on a stepped shard
// before it gives up on fn.
const steppedDoRoundsMax = 1 << 16

// doStepped is Do on a stepped shard: the caller is the simulation's
// goroutine, which no loop serves, so a Do that waited for fn would wait
// for ever. It posts fn and runs the shard's rounds itself (and with
// them whatever else is due on the shard, as the loop would) until fn
// has run. REQUIRES: not concurrently with another Step of the shard.
func (s *Shard) doStepped(fn func(*Shard)) error {
	ran := false
	if err := s.Post(func() { fn(s); ran = true }); err != nil {
		return err
	}
	for round := 0; !ran; round++ {
		if round == steppedDoRoundsMax {
			return fmt.Errorf("shard %d: a Do did not run within %d rounds", s.id, steppedDoRoundsMax)
		}
		s.runOnce()
	}
	return nil
}

// NextTimerNs is the clock reading (ns) at which a stepped shard's next
// timer may be due; ok is false when no timer is pending. Stepping the
// shard once its clock reads at least that runs the timer (a cascade of
// the wheel may fire nothing; stepping early is harmless).
func (s *Shard) NextTimerNs() (ns int64, ok bool) {
	tick, ok := s.wheel.NextExpiry()
	if !ok || s.state.Load() != stateRunning {
		return 0, false
	}
	return tick * s.tickNs, true
}

// StopStepped stops a stepped group as Stop stops a running one: new
// Posts are refused, the shards run what they accepted until every one is
// quiescent (their calls to each other answered), for at most roundsMax
// rounds, then engines are drained and OnStop runs. It returns an error
// when a shard did not become quiescent (a call that never answers).
func (g *Group) StopStepped(roundsMax int) error {
	for _, s := range g.shards {
		s.state.CompareAndSwap(stateRunning, stateStopping)
	}
	for round := 0; round < roundsMax; round++ {
		busy := false
		for _, s := range g.shards {
			if !s.ended() && !s.quiescent() {
				s.runOnce()
				busy = true
			}
		}
		if !busy {
			break
		}
	}
	var first error
	for _, s := range g.shards {
		if s.ended() {
			continue
		}
		if !s.quiescent() && first == nil {
			first = fmt.Errorf("shard %d: not quiescent after %d rounds", s.id, roundsMax)
		}
		s.finish()
		s.shutdown()
		close(s.done)
	}
	return first
}

// AbandonStepped ends a stepped group the way a crash ends a process:
// nothing queued runs, no OnStop, the engines are closed and the epoll
// sets released. What the shards' work wrote survives only as the file
// system keeps it.
func (g *Group) AbandonStepped() {
	for _, s := range g.shards {
		if s.ended() {
			continue
		}
		s.state.Store(stateStopped)
		if s.engine != nil {
			_ = s.engine.Close()
			s.engine = nil
		}
		s.poll.close()
		close(s.done)
	}
}

// ended reports whether the shard's end (done) has been signalled.
func (s *Shard) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
