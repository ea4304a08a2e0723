package segment

import (
	"errors"
	"io"

	"github.com/corestream/corestream/segment/vfs"
)

// NewPwriteEngine returns the portable engine: Submit performs each queued
// operation in order with pwrite and fdatasync on the calling goroutine, and
// Reap reports them. It works on any vfs.File (including the in-memory FS)
// and is what the log falls back to when io_uring is refused.
//
// Because it runs operations in queue order, a Sync covers every write
// queued before it; the log does not rely on that (the Engine contract is
// weaker) but it makes pwrite runs easy to reason about.
func NewPwriteEngine() Engine { return &pwriteEngine{} }

type pwriteOp struct {
	f     vfs.File
	buf   []byte
	off   int64
	write bool
	sync  bool
	token uint64
}

type pwriteDone struct {
	token uint64
	err   error
}

// pwriteEngine is owned by one goroutine (Engine).
// Invariant: inFlight == len(queue) + len(done).
type pwriteEngine struct {
	queue    []pwriteOp
	done     []pwriteDone
	spare    []pwriteDone
	inFlight int
	closed   bool
}

var errEngineClosed = errors.New("segment: engine closed")

func (e *pwriteEngine) Name() string { return "pwrite" }

func (e *pwriteEngine) Write(f vfs.File, buf []byte, off int64, sync bool, token uint64) error {
	if e.closed {
		return errEngineClosed
	}
	e.queue = append(e.queue, pwriteOp{f: f, buf: buf, off: off, write: true, sync: sync, token: token})
	e.inFlight++
	return nil
}

func (e *pwriteEngine) Sync(f vfs.File, token uint64) error {
	if e.closed {
		return errEngineClosed
	}
	e.queue = append(e.queue, pwriteOp{f: f, sync: true, token: token})
	e.inFlight++
	return nil
}

func (e *pwriteEngine) Submit() error {
	for i := range e.queue {
		op := &e.queue[i]
		var err error
		if op.write {
			var n int
			n, err = op.f.WriteAt(op.buf, op.off)
			if err == nil && n < len(op.buf) {
				err = io.ErrShortWrite
			}
		}
		if err == nil && op.sync {
			if serr := op.f.Sync(); serr != nil {
				err = &vfs.SyncError{Err: serr}
			}
		}
		e.done = append(e.done, pwriteDone{token: op.token, err: err})
		*op = pwriteOp{}
	}
	e.queue = e.queue[:0]
	return nil
}

func (e *pwriteEngine) Reap(wait bool, fn func(token uint64, err error)) (int, error) {
	if wait && len(e.done) == 0 && len(e.queue) > 0 {
		// Nothing can complete unless it is submitted; the caller asked
		// to wait, so run the queue.
		if err := e.Submit(); err != nil {
			return 0, err
		}
	}
	// fn may queue more operations: deliver from a detached slice.
	done := e.done
	e.done = e.spare[:0]
	for _, d := range done {
		e.inFlight--
		fn(d.token, d.err)
	}
	clear(done)
	e.spare = done[:0]
	return len(done), nil
}

func (e *pwriteEngine) InFlight() int { return e.inFlight }
func (e *pwriteEngine) WakeFd() int   { return -1 }

func (e *pwriteEngine) Close() error {
	if e.closed {
		return nil
	}
	err := e.Submit()
	e.closed = true
	return err
}
