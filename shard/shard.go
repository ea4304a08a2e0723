package shard

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrStopped is returned by Post, Call and Do when the target shard is
// stopping or stopped; the message was not queued.
var ErrStopped = errors.New("shard: stopped")

// ErrCallsFull is returned by Call when the calling shard already has
// Config.CallsInFlightMax calls waiting for their replies.
var ErrCallsFull = errors.New("shard: too many calls in flight")

// ErrNotOnShard is returned by methods that must run on the shard's own
// thread when they can tell they were called from elsewhere.
var ErrNotOnShard = errors.New("shard: not on the shard's thread")

// Task is a message: a function run on the receiving shard's thread.
type Task func()

// Engine is the part of segment.Engine the shard drives: every
// segment.Engine satisfies it. The shard submits what its work queued,
// blocks on WakeFd with its other descriptors, and dispatches completions to
// the handler set with SetCompletionHandler. (The shard does not import
// segment, so that the runtime builds and is tested on its own; the code
// that owns the logs keeps the full segment.Engine it created in the
// factory.)
type Engine interface {
	// Submit hands every queued operation to the kernel.
	Submit() error
	// Reap calls fn for each completed operation; wait blocks for one.
	Reap(wait bool, fn func(token uint64, err error)) (int, error)
	// InFlight counts operations queued or submitted and not yet reaped.
	InFlight() int
	// WakeFd is an eventfd readable when completions wait, or -1.
	WakeFd() int
	// Close waits for in-flight operations and releases the engine.
	Close() error
}

// Shard states.
const (
	stateNew int32 = iota
	stateRunning
	stateStopping
	stateStopped
)

// Shard is one per-core runtime: a goroutine locked to an OS thread that owns
// the partitions (and the write Engine) assigned to it. Everything a shard
// owns is touched on that thread only; other goroutines reach it with Post,
// Call or Do. An idle shard blocks in epoll_wait on its inbox eventfd, its
// timerfd, its engine's completion eventfd and the descriptors it watches.
//
// Methods documented "shard thread" must run on the shard's thread (from a
// Task, a timer, a watch callback, a completion or the OnStart hook).
type Shard struct {
	id    int
	group *Group
	cfg   *Config

	inbox   *Inbox[Task] // Post; refused when full
	replies *Inbox[Task] // Call replies; never full (see callsOut)
	poll    *poller
	wheel   *Wheel
	clock   Clock
	tickNs  int64

	// callsOut counts Calls issued by this shard whose reply has not run.
	// Invariant: 0 <= callsOut <= cfg.CallsInFlightMax <= replies.Cap(), so a
	// reply push never finds the replies inbox full. Shard thread only.
	callsOut int

	engine     Engine
	engineFd   int
	onComplete func(token uint64, err error)

	watches map[int]func(events uint32) // shard thread only

	// deferred holds Defer'd functions for the end of the round; spare is
	// the previous batch's backing array. Shard thread only.
	deferred, spare []func()

	state atomic.Int32
	// posters counts goroutines that may push into an inbox or write the
	// wake eventfd: Post, a Call's reply, Wake. An exiting shard marks itself
	// stopped, waits for posters to reach zero and runs what they pushed (a
	// Post that passed its state check just before Stop), so an accepted
	// task is never dropped and nobody writes the eventfd after it is
	// closed (its number could belong to another file by then).
	posters atomic.Int32
	tid     atomic.Int32 // OS thread id once running
	cpu     int          // CPU pinned to, or -1
	done    chan struct{}
	err     error // why the loop ended abnormally; read after done

	stats Stats
	times loopTimes
}

// Stats are counters a shard keeps about itself. They are written on the
// shard's thread and read with Snapshot from anywhere.
type Stats struct {
	Tasks       atomic.Uint64 // inbox messages run
	Replies     atomic.Uint64 // call replies run
	Timers      atomic.Uint64 // timers fired
	Completions atomic.Uint64 // engine completions dispatched
	Parks       atomic.Uint64 // times the shard blocked in epoll_wait
	Refused     atomic.Uint64 // Posts refused because the inbox was full
}

// ID is the shard's index in its group, 0..Count-1.
func (s *Shard) ID() int { return s.id }

// Group is the group the shard belongs to.
func (s *Shard) Group() *Group { return s.group }

// TID is the OS thread id the shard runs on, or 0 before it started.
func (s *Shard) TID() int { return int(s.tid.Load()) }

// CPU is the CPU the shard's thread is pinned to, or -1 when not pinned.
func (s *Shard) CPU() int { return s.cpu }

// Stats returns the shard's counters.
func (s *Shard) Stats() *Stats { return &s.stats }

// InboxDepth is the number of messages waiting in the inbox now (a
// sample for metrics; any goroutine).
func (s *Shard) InboxDepth() int { return s.inbox.Len() }

// OnThread reports whether the caller runs on the shard's thread. It makes a
// system call (gettid); use it in assertions, not on hot paths.
func (s *Shard) OnThread() bool { return s.TID() != 0 && unix.Gettid() == s.TID() }

// Engine is the shard's write Engine, or nil when the group has no
// EngineFactory. Shard thread only.
func (s *Shard) Engine() Engine { return s.engine }

// SetCompletionHandler sets the function the shard calls, on its thread,
// for every completion it reaps from its Engine. Shard thread only.
func (s *Shard) SetCompletionHandler(fn func(token uint64, err error)) { s.onComplete = fn }

// Post queues t to run on the shard's thread. Safe from any goroutine,
// including other shards and network loops. It never blocks: a full inbox
// returns ErrInboxFull, a stopping or stopped shard ErrStopped. A task that
// Post accepted always runs, even when the group stops meanwhile. Tasks
// from one poster run in the order they were posted.
func (s *Shard) Post(t Task) error {
	s.posters.Add(1)
	defer s.posters.Add(-1)
	if s.state.Load() >= stateStopping {
		return ErrStopped
	}
	err := s.inbox.TryPush(t)
	if err != nil {
		s.stats.Refused.Add(1)
	}
	return err
}

// Do runs fn on the shard and waits for it to return: the control-plane way
// for a goroutine that is not a shard (an admin request, a test) to touch
// shard state. It must not be called from a shard's thread (it would block
// that shard). A full inbox returns ErrInboxFull at once.
func (s *Shard) Do(fn func(*Shard)) error {
	if s.group.stepped {
		return s.doStepped(fn)
	}
	done := make(chan struct{})
	if err := s.Post(func() { fn(s); close(done) }); err != nil {
		return err
	}
	<-done
	return nil
}

// Call runs fn on shard to, then runs done with its result on shard from.
// done always runs later on from's thread, never inside Call, even when from
// and to are the same shard. A reply cannot be lost or refused: each call
// holds one of from's Config.CallsInFlightMax reply slots until done ran.
//
// It returns ErrCallsFull when from has no free slot, or the error of
// posting to to (ErrInboxFull, ErrStopped); then neither fn nor done runs.
// REQUIRES: called on from's thread.
func Call[R any](from, to *Shard, fn func(to *Shard) R, done func(R)) error {
	return CallAsync(from, to, func(to *Shard, reply func(R)) { reply(fn(to)) }, done)
}

// CallAsync is Call for work that finishes later: fn runs on shard to with
// a reply function, which fn (or whatever it schedules: a completion, a
// timer) must call exactly once; done then runs with the value on from's
// thread. reply is safe from any goroutine. The reply slot is held until
// done ran, so a reply is never lost or refused — which also means a
// shard stops only after every CallAsync it made was answered: work that
// waits on something (a commit, a long poll) must answer on shutdown.
//
// Errors as for Call. REQUIRES: called on from's thread.
func CallAsync[R any](from, to *Shard, fn func(to *Shard, reply func(R)), done func(R)) error {
	if from.state.Load() == stateStopped {
		return ErrStopped // a task run by finish: no reply could run
	}
	if from.callsOut >= from.cfg.CallsInFlightMax {
		return ErrCallsFull
	}
	from.callsOut++
	err := to.Post(func() {
		var replied atomic.Bool
		fn(to, func(r R) {
			if replied.Swap(true) {
				panic("shard: CallAsync replied twice")
			}
			from.posters.Add(1) // the push may wake from: keep its eventfd open
			err := from.replies.TryPush(func() {
				from.callsOut--
				done(r)
			})
			from.posters.Add(-1)
			if err != nil {
				panic("shard: reply inbox full: callsOut invariant broken")
			}
		})
	})
	if err != nil {
		from.callsOut--
		return err
	}
	return nil
}

// Now is the shard's clock in nanoseconds (CLOCK_MONOTONIC unless the group
// was given a Clock).
func (s *Shard) Now() int64 { return s.clock.Now() }

// AfterFunc schedules fn to run on the shard's thread after at least d
// (rounded up to the group's tick) and returns its timer, which Stop
// cancels and Reset reschedules. Shard thread only.
func (s *Shard) AfterFunc(d time.Duration, fn func()) *Timer {
	t := NewTimer(fn)
	s.Reset(t, d)
	return t
}

// Reset schedules t (new or used, pending or not) to fire after d on this
// shard. Shard thread only.
func (s *Shard) Reset(t *Timer, d time.Duration) {
	if d < 0 {
		d = 0
	}
	at := s.clock.Now() + int64(d)
	s.wheel.Schedule(t, (at+s.tickNs-1)/s.tickNs) // round up: never early
}

// Stop cancels t; it reports whether t was pending. Shard thread only.
func (s *Shard) Stop(t *Timer) bool { return s.wheel.Stop(t) }

// nowTick is the current time in ticks; a timer due at tick k fires once
// nowTick() >= k.
func (s *Shard) nowTick() int64 { return s.clock.Now() / s.tickNs }

// Watch adds fd to the shard's epoll set; fn runs on the shard's thread with
// the ready events (EPOLLIN, EPOLLOUT, EPOLLERR, ...). events may include
// EPOLLET or EPOLLONESHOT; use Rewatch to re-arm a one-shot watch. The shard
// does not own fd: Unwatch it before closing it. Shard thread only.
func (s *Shard) Watch(fd int, events uint32, fn func(events uint32)) error {
	if _, dup := s.watches[fd]; dup || fd == s.poll.wakeFd || fd == s.poll.timeFd || fd == s.engineFd {
		return fmt.Errorf("shard: fd %d is already watched", fd)
	}
	if err := s.poll.add(fd, events); err != nil {
		return err
	}
	s.watches[fd] = fn
	return nil
}

// Rewatch changes the events watched on fd. Shard thread only.
func (s *Shard) Rewatch(fd int, events uint32) error {
	if _, ok := s.watches[fd]; !ok {
		return fmt.Errorf("shard: fd %d is not watched", fd)
	}
	return s.poll.mod(fd, events)
}

// Unwatch removes fd from the shard's epoll set. Shard thread only.
func (s *Shard) Unwatch(fd int) error {
	if _, ok := s.watches[fd]; !ok {
		return fmt.Errorf("shard: fd %d is not watched", fd)
	}
	delete(s.watches, fd)
	return s.poll.del(fd)
}

// Defer queues fn to run on the shard's thread at the end of the current
// round of work, before the shard looks at its descriptors again or parks:
// the way to batch (flush a connection once after many replies) or to leave
// a deep call stack (resume a paused reader) without using the inbox.
// Deferred functions run in order; one may Defer again. The queue is not
// bounded: callers keep at most one pending Defer per object (a flag).
// Shard thread only.
func (s *Shard) Defer(fn func()) { s.deferred = append(s.deferred, fn) }

// Wake makes a parked shard run its loop once more. Safe from any
// goroutine; it does nothing once the shard has stopped.
func (s *Shard) Wake() {
	s.posters.Add(1)
	if s.state.Load() < stateStopped {
		s.poll.wakeup()
	}
	s.posters.Add(-1)
}

// Err is the error that ended the shard's loop abnormally (a failed start
// or a failing epoll), valid once the shard has stopped.
func (s *Shard) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Done is closed when the shard's goroutine has exited.
func (s *Shard) Done() <-chan struct{} { return s.done }

func newShard(g *Group, id, cpu int) (*Shard, error) {
	cfg := &g.cfg
	p, err := newPoller()
	if err != nil {
		return nil, err
	}
	s := &Shard{
		id:       id,
		group:    g,
		cfg:      cfg,
		poll:     p,
		clock:    cfg.Clock,
		tickNs:   int64(cfg.Tick),
		engineFd: -1,
		watches:  make(map[int]func(uint32)),
		cpu:      cpu,
		done:     make(chan struct{}),
	}
	s.inbox = NewInbox[Task](cfg.InboxDepth, p.wakeup)
	s.replies = NewInbox[Task](cfg.CallsInFlightMax, p.wakeup)
	s.wheel = NewWheel(s.nowTick())
	return s, nil
}

// lockAndPin locks the calling goroutine to its thread and pins the thread
// to s.cpu when set. The thread stays locked until the goroutine exits, so
// a pinned thread is never handed back to the Go scheduler.
func (s *Shard) lockAndPin() error {
	runtime.LockOSThread()
	s.tid.Store(int32(unix.Gettid()))
	if s.cpu < 0 {
		return nil
	}
	var set unix.CPUSet
	set.Set(s.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("shard %d: pin to cpu %d: %w", s.id, s.cpu, err)
	}
	return nil
}

// boot runs on the shard's thread before the loop: it creates the Engine
// (which may need the locked, pinned thread) and runs OnStart.
func (s *Shard) boot() error {
	if f := s.cfg.EngineFactory; f != nil {
		e, err := f(s.id)
		if err != nil {
			return fmt.Errorf("shard %d: engine: %w", s.id, err)
		}
		s.engine = e
		if fd := e.WakeFd(); fd >= 0 {
			// Edge-triggered: every completion signal is one event, whether
			// or not Reap resets the eventfd counter.
			if err := s.poll.add(fd, unix.EPOLLIN|unix.EPOLLET); err != nil {
				_ = e.Close()
				s.engine = nil
				return err
			}
			s.engineFd = fd
		}
	}
	if s.cfg.OnStart != nil {
		s.cfg.OnStart(s)
	}
	return nil
}
