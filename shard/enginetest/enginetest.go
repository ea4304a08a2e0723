// Package enginetest provides a fake write engine (a shard.Engine) for tests and
// experiments of the shard runtime: operations complete on a separate
// worker thread, which signals an eventfd the way the io_uring engine's
// kernel completions do, so the path "completion → shard notices → caller
// acknowledged" can be exercised and timed without a disk.
package enginetest

import (
	"errors"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by operations on a closed Engine.
var ErrClosed = errors.New("enginetest: engine closed")

type op struct {
	token uint64
	err   error
}

// Engine is a fake asynchronous write engine. Add records an
// operation; Submit hands the recorded operations to a worker thread, which
// completes each after Delay (no data is written anywhere) and writes the
// completion eventfd. It is owned by one goroutine, like every Engine.
type Engine struct {
	// Delay is how long the worker holds each submitted batch before
	// completing it. Set before the first Submit.
	Delay time.Duration

	pending  []op // recorded, not yet submitted; owner only
	inFlight int  // owner only

	mu     sync.Mutex
	queued []op // submitted, not yet taken by the worker; guarded by mu
	done   []op // completed, not yet reaped; guarded by mu
	closed bool // guarded by mu

	subFd  int // eventfd the worker blocks on (blocking)
	wakeFd int // eventfd signalled on completion (non-blocking)
	exited chan struct{}
	spare  []op // owner-only buffer swapped with done in Reap
}

// New starts a fake engine and its worker thread.
func New() (*Engine, error) {
	sub, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(sub)
		return nil, err
	}
	e := &Engine{subFd: sub, wakeFd: wake, exited: make(chan struct{})}
	go e.worker()
	return e, nil
}

// Add queues an operation that completes with token (a write or a sync, as
// far as the caller is concerned; nothing is written).
func (e *Engine) Add(token uint64) {
	e.pending = append(e.pending, op{token: token})
	e.inFlight++
}

// Submit implements shard.Engine.
func (e *Engine) Submit() error {
	if len(e.pending) == 0 {
		return nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.queued = append(e.queued, e.pending...)
	e.mu.Unlock()
	e.pending = e.pending[:0]
	signal(e.subFd)
	return nil
}

// Reap implements shard.Engine.
func (e *Engine) Reap(wait bool, fn func(token uint64, err error)) (int, error) {
	for {
		e.mu.Lock()
		got := e.done
		e.done = e.spare[:0]
		e.mu.Unlock()
		for _, o := range got {
			e.inFlight--
			fn(o.token, o.err)
		}
		e.spare = got[:0]
		if len(got) > 0 || !wait || e.inFlight-len(e.pending) <= 0 {
			return len(got), nil
		}
		fds := []unix.PollFd{{Fd: int32(e.wakeFd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 100); err != nil && err != unix.EINTR {
			return 0, err
		}
		var b [8]byte
		_, _ = unix.Read(e.wakeFd, b[:])
	}
}

// InFlight implements shard.Engine.
func (e *Engine) InFlight() int { return e.inFlight }

// WakeFd implements shard.Engine.
func (e *Engine) WakeFd() int { return e.wakeFd }

// Close implements shard.Engine: it stops the worker after it completed
// what was submitted.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	signal(e.subFd)
	<-e.exited
	_ = unix.Close(e.subFd)
	_ = unix.Close(e.wakeFd)
	return nil
}

func (e *Engine) worker() {
	runtime.LockOSThread()
	defer close(e.exited)
	var b [8]byte
	var batch []op
	for {
		if _, err := unix.Read(e.subFd, b[:]); err != nil && err != unix.EINTR {
			return
		}
		e.mu.Lock()
		batch, e.queued = e.queued, batch[:0]
		closed := e.closed
		e.mu.Unlock()
		if len(batch) > 0 {
			if e.Delay > 0 {
				time.Sleep(e.Delay)
			}
			e.mu.Lock()
			e.done = append(e.done, batch...)
			e.mu.Unlock()
			signal(e.wakeFd)
		}
		if closed {
			return
		}
	}
}

func signal(fd int) {
	one := [8]byte{1}
	for {
		if _, err := unix.Write(fd, one[:]); err != unix.EINTR {
			return
		}
	}
}
