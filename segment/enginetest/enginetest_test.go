package enginetest_test

import (
	"errors"
	"io"
	"testing"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/enginetest"
	"github.com/corestream/corestream/segment/vfs"
)

// TestSuiteOnReferenceEngine runs the suite on a minimal synchronous engine
// (WakeFd -1, everything done inside Submit), so the suite itself is checked
// on the engine shape other than io_uring's, without depending on the
// segment package's own engine.
func TestSuiteOnReferenceEngine(t *testing.T) {
	enginetest.Run(t, func(t *testing.T) segment.Engine { return &refEngine{} })
}

// refEngine is the simplest correct Engine: Submit runs the queue in order.
type refEngine struct {
	queue  []refOp
	done   []refOp
	closed bool
}

type refOp struct {
	f     vfs.File
	buf   []byte
	off   int64
	write bool
	sync  bool
	token uint64
	err   error
}

var errRefClosed = errors.New("refEngine: closed")

func (e *refEngine) Name() string  { return "reference" }
func (e *refEngine) InFlight() int { return len(e.queue) + len(e.done) }
func (e *refEngine) WakeFd() int   { return -1 }

func (e *refEngine) Write(f vfs.File, buf []byte, off int64, sync bool, token uint64) error {
	if e.closed {
		return errRefClosed
	}
	e.queue = append(e.queue, refOp{f: f, buf: buf, off: off, write: true, sync: sync, token: token})
	return nil
}

func (e *refEngine) Sync(f vfs.File, token uint64) error {
	if e.closed {
		return errRefClosed
	}
	e.queue = append(e.queue, refOp{f: f, sync: true, token: token})
	return nil
}

func (e *refEngine) Submit() error {
	for _, op := range e.queue {
		if op.write {
			n, err := op.f.WriteAt(op.buf, op.off)
			if err == nil && n < len(op.buf) {
				err = io.ErrShortWrite
			}
			op.err = err
		}
		if op.err == nil && op.sync {
			op.err = op.f.Sync()
		}
		e.done = append(e.done, op)
	}
	e.queue = e.queue[:0]
	return nil
}

func (e *refEngine) Reap(wait bool, fn func(uint64, error)) (int, error) {
	if wait && len(e.done) == 0 {
		if err := e.Submit(); err != nil {
			return 0, err
		}
	}
	done := e.done
	e.done = nil
	for _, op := range done {
		fn(op.token, op.err)
	}
	return len(done), nil
}

func (e *refEngine) Close() error {
	if e.closed {
		return errRefClosed
	}
	e.closed = true
	return e.Submit()
}
