package shard

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// run is the shard's goroutine. It reports the outcome of booting on
// started, then loops until stopped.
func (s *Shard) run(started chan<- error) {
	defer close(s.done)
	if err := s.lockAndPin(); err != nil {
		s.fail(err, started)
		return
	}
	if err := s.boot(); err != nil {
		s.fail(err, started)
		return
	}
	started <- nil
	s.err = s.loop()
	s.finish()
	s.shutdown()
}

// fail ends a shard that could not start.
func (s *Shard) fail(err error, started chan<- error) {
	s.err = err
	s.state.Store(stateStopped)
	s.poll.close()
	started <- err
}

// busyPollNs is how long a shard that always has messages to run may go
// without looking at its descriptors: a steady stream of cross-shard work
// must not starve the shard's own sockets (they are only seen through
// epoll_wait, which a busy shard would otherwise never reach).
const busyPollNs = 50_000

// inboxBudgetNs bounds a round's inbox batch in time as BatchMax bounds
// it in count: after a message that ran long, the round's replies,
// timers, deferred work (the IO flush that acknowledges produces) and
// descriptors come before the next message. Without it a stream of
// 100 ms messages (reconcile passes opening partitions, each queueing
// the next) ran 156 in one round and a produce waited 18 s.
const inboxBudgetNs = 1_000_000

// timerSlackNs is added to every timerfd deadline (see park).
const timerSlackNs = 20_000

// loop runs work until the shard is asked to stop and has nothing left.
func (s *Shard) loop() error {
	lastPoll := s.clock.Now()
	s.times.begin(lastPoll)
	defer func() { s.times.finish(s.clock.Now()) }()
	for {
		if s.runOnce() > 0 {
			if now := s.clock.Now(); now-lastPoll >= busyPollNs {
				lastPoll = now
				if err := s.pollNow(); err != nil {
					return err
				}
			}
			continue
		}
		lastPoll = s.clock.Now()
		if s.state.Load() >= stateStopping && s.quiescent() {
			return nil
		}
		if s.spin() {
			continue
		}
		if err := s.park(); err != nil {
			return err
		}
	}
}

// runOnce runs one round of pending work: a bounded batch of inbox
// messages, every call reply, due timers, then submits what the work queued
// on the engine and dispatches its completions. It returns how much it did.
func (s *Shard) runOnce() int {
	n := 0
	start := s.clock.Now()
	for i := 0; i < s.cfg.BatchMax; i++ {
		if i > 0 && s.clock.Now()-start >= inboxBudgetNs {
			break
		}
		t, ok := s.inbox.Pop()
		if !ok {
			break
		}
		t()
		n++
	}
	s.stats.Tasks.Add(uint64(n))
	r := 0
	for {
		t, ok := s.replies.Pop()
		if !ok {
			break
		}
		t()
		r++
	}
	s.stats.Replies.Add(uint64(r))
	n += r
	if s.wheel.Len() > 0 && s.state.Load() == stateRunning {
		f := s.wheel.Advance(s.nowTick())
		s.stats.Timers.Add(uint64(f))
		n += f
	}
	n += s.runDeferred()
	return n + s.pumpEngine()
}

// runDeferred runs the functions queued with Defer, including those they
// queue, for a bounded number of rounds; what is left runs next round.
func (s *Shard) runDeferred() int {
	n := 0
	for round := 0; round < 16 && len(s.deferred) > 0; round++ {
		batch := s.deferred
		s.deferred = s.spare[:0]
		for i, fn := range batch {
			batch[i] = nil
			fn()
		}
		n += len(batch)
		s.spare = batch[:0]
	}
	return n
}

// pumpEngine submits queued engine operations and dispatches completions
// already waiting; it returns the number dispatched.
func (s *Shard) pumpEngine() int {
	e := s.engine
	if e == nil || e.InFlight() == 0 {
		return 0
	}
	if err := e.Submit(); err != nil && s.cfg.Logf != nil {
		s.cfg.Logf("shard %d: engine submit: %v", s.id, err)
	}
	n, err := e.Reap(false, s.complete)
	if err != nil && s.cfg.Logf != nil {
		s.cfg.Logf("shard %d: engine reap: %v", s.id, err)
	}
	s.stats.Completions.Add(uint64(n))
	return n
}

func (s *Shard) complete(token uint64, err error) {
	if s.onComplete != nil {
		s.onComplete(token, err)
	}
}

// spin polls the inboxes for up to Config.SpinIdle before the shard parks,
// so that a reply arriving within microseconds does not pay a thread wake.
// It reports whether work arrived. It never calls runtime.Gosched: on a
// locked thread that hands the P to another thread and costs two thread
// wake-ups to get it back (measured in docs/design/threading.md).
func (s *Shard) spin() bool {
	if s.cfg.SpinIdle <= 0 {
		return false
	}
	deadline := s.clock.Now() + int64(s.cfg.SpinIdle)
	for i := 0; ; i++ {
		if !s.inbox.Empty() || !s.replies.Empty() {
			return true
		}
		if i&63 == 63 && s.clock.Now() >= deadline {
			return false
		}
	}
}

// park blocks until a message, a timer, a completion or a watched
// descriptor needs the shard.
func (s *Shard) park() error {
	s.inbox.Arm()
	s.replies.Arm()
	if !s.inbox.Empty() || !s.replies.Empty() || len(s.deferred) > 0 ||
		s.state.Load() >= stateStopping && s.quiescent() {
		s.inbox.Disarm()
		s.replies.Disarm()
		return nil
	}
	at := int64(0)
	if tick, ok := s.wheel.NextExpiry(); ok && s.state.Load() == stateRunning {
		// A little after the tick starts: the shard's clock (Go's monotonic
		// clock shifted onto CLOCK_MONOTONIC by an offset measured once)
		// may trail the timerfd's by a few microseconds, and a wake-up
		// before the tick begins would find nothing due.
		at = tick*s.tickNs + timerSlackNs
	}
	if _, mono := s.clock.(monoClock); !mono && at > 0 {
		// A test clock does not follow CLOCK_MONOTONIC: the test wakes the
		// shard after moving its clock.
		at = 0
	}
	if err := s.poll.armTimer(at); err != nil {
		return err
	}
	s.stats.Parks.Add(1)
	s.times.park(s.clock)
	evs, err := s.poll.wait(-1)
	s.times.wake(s.clock)
	s.inbox.Disarm()
	s.replies.Disarm()
	if err != nil {
		return err
	}
	s.dispatch(evs)
	return nil
}

// pollNow dispatches the descriptors that are ready, without blocking.
func (s *Shard) pollNow() error {
	evs, err := s.poll.wait(0)
	if err != nil {
		return err
	}
	s.dispatch(evs)
	return nil
}

// dispatch handles the events epoll_wait returned.
func (s *Shard) dispatch(evs []unix.EpollEvent) {
	for _, ev := range evs {
		fd := int(ev.Fd)
		switch fd {
		case s.poll.wakeFd:
			s.poll.drain(fd)
		case s.poll.timeFd:
			s.poll.drain(fd)
			s.poll.armedAt = 0 // it fired: the kernel disarmed it
		case s.engineFd:
			// Completions are reaped by runOnce.
		default:
			if fn := s.watches[fd]; fn != nil {
				fn(ev.Events)
			}
		}
	}
}

// quiescent reports whether a stopping shard may exit: nothing queued or
// deferred, no call waiting for its reply. (A Post racing the exit is
// handled by finish.)
func (s *Shard) quiescent() bool {
	return s.inbox.Empty() && s.replies.Empty() && s.callsOut == 0 && len(s.deferred) == 0
}

// finish runs after the loop: Posts that passed their state check before
// Stop may still push; they finish within nanoseconds, and the tasks they
// pushed run here.
func (s *Shard) finish() {
	s.state.Store(stateStopped)
	for i := 0; s.posters.Load() != 0; i++ {
		if i > 1000 {
			runtime.Gosched()
		}
	}
	for {
		t, ok := s.inbox.Pop()
		if !ok {
			break
		}
		t()
		s.stats.Tasks.Add(1)
	}
	s.runDeferred()
}

// shutdown runs on the shard's thread after the loop: it waits for the
// engine's in-flight operations (dispatching their completions), runs
// OnStop and releases the engine and the poller.
func (s *Shard) shutdown() {
	if e := s.engine; e != nil {
		for i := 0; e.InFlight() > 0 && i < 1<<20; i++ {
			_ = e.Submit()
			n, err := e.Reap(true, s.complete)
			s.stats.Completions.Add(uint64(n))
			if err != nil {
				break
			}
		}
	}
	if s.cfg.OnStop != nil {
		s.cfg.OnStop(s)
	}
	if e := s.engine; e != nil {
		if err := e.Close(); err != nil && s.err == nil {
			s.err = fmt.Errorf("shard %d: engine close: %w", s.id, err)
		}
	}
	for fd := range s.watches {
		_ = unix.EpollCtl(s.poll.ep, unix.EPOLL_CTL_DEL, fd, nil)
	}
	s.poll.close()
}
