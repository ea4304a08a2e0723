//go:build linux

package uring

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/segment/vfs"
)

// Engine limits.
const (
	// QueueDepthDefault is Options.QueueDepth's default: operations the
	// engine keeps in the kernel at once.
	QueueDepthDefault = 256
	// QueueDepthMax bounds Options.QueueDepth.
	QueueDepthMax = 4096
	// submitRetriesMax bounds how often one Submit retries io_uring_enter
	// after EAGAIN/EBUSY (reaping completions in between) before failing.
	submitRetriesMax = 64
	// cqeBatchMax is how many CQEs one harvest step copies out at a time.
	cqeBatchMax = 256
	// InlineWriteMaxDefault is Options.InlineWriteMax's default: one
	// producer batch of the usual sizes (64 KiB and below) with room to
	// spare; larger writes (group commits of many batches) go to the ring.
	InlineWriteMaxDefault = 128 << 10
)

// ErrBadOffset is returned by Engine.Write for a negative offset (to the
// kernel, offset -1 means "the file position", which a log never wants).
var ErrBadOffset = errors.New("uring: negative write offset")

// Options configures NewEngine. The zero value is the default.
type Options struct {
	// QueueDepth is the most operations (a write with its fdatasync counts
	// as one) in the kernel at once; 0 means QueueDepthDefault, at most
	// QueueDepthMax. Write blocks, reaping, when it is reached.
	QueueDepth int
	// SingleIssuer creates the ring with IORING_SETUP_SINGLE_ISSUER. Set it
	// only when the goroutine that calls NewEngine holds
	// runtime.LockOSThread and is the only one ever to call the Engine:
	// otherwise submissions fail with EEXIST. Default false.
	SingleIssuer bool
	// WorkerCPUs, when not empty, restricts the kernel's io-wq workers
	// (which run the writes and fsyncs) to these CPU numbers; see
	// Ring.RegisterIOWQAffinity (it applies to the thread calling
	// NewEngine, so it is meant for a shard that holds
	// runtime.LockOSThread). Default nil: workers inherit the submitting
	// thread's affinity, which for a pinned shard means its own CPU.
	WorkerCPUs []int
	// WorkersMax, when > 0, bounds the io-wq workers that run file I/O for
	// this engine (Ring.SetIOWQMaxWorkers). Default 0: the kernel's limit.
	WorkersMax int

	// InlineWriteMax: a Write without an fdatasync of at most this many
	// bytes is made at once with pwrite(2) on the calling thread, and its
	// completion waits for the next Reap. 0 means InlineWriteMaxDefault;
	// a negative value sends every write to the ring.
	InlineWriteMax int

	// pieceBytes overrides pieceBytesMax (tests split small writes into
	// pieces to exercise resubmission).
	pieceBytes int
}

// Engine is the io_uring write engine. It satisfies segment.Engine (see the
// package doc for the design). It is owned by one goroutine at a time.
type Engine struct {
	ring   *Ring
	wakeFd int // eventfd registered with ring; owned by the Engine
	limit  int // piece size limit in bytes
	inline int // largest write made inline (Options.InlineWriteMax); < 0: none

	// ops is the slot table; free is a stack of free slot indexes.
	// Invariant: len(free) + active == len(ops).
	ops    []op
	free   []uint32
	active int

	// cqesOut counts SQEs prepared whose CQE has not arrived.
	// Invariant: cqesOut <= 2*active <= ring.SQEntries(), ring.CQEntries(),
	// so the SQ never lacks room for an allocated op and the CQ never
	// overflows.
	cqesOut int
	// again lists slots that need another submission (a short write's
	// remainder, the next piece); they are prepared after a harvest.
	again []uint32
	// ready holds settled completions not yet reported by Reap; spare is
	// the other buffer of the pair, swapped in while callbacks run.
	ready, spare []completion
	cqes         []CQE // harvest scratch

	resubmitted bool // harvest prepared SQEs that no one has submitted yet
	reaping     bool // Reap's callbacks are running
	closed      bool
}

// completion is one settled operation, waiting for Reap.
type completion struct {
	token uint64
	err   error
}

// NewEngine creates an io_uring engine. It returns an error matching
// ErrUnavailable when the kernel refuses io_uring (see Available).
func NewEngine(opts Options) (*Engine, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	depth := opts.QueueDepth
	if depth == 0 {
		depth = QueueDepthDefault
	}
	if depth < 1 || depth > QueueDepthMax {
		return nil, fmt.Errorf("uring: QueueDepth %d outside 1..%d", depth, QueueDepthMax)
	}
	ring, err := NewRing(RingOptions{Entries: uint32(2 * depth), SingleIssuer: opts.SingleIssuer})
	if err != nil {
		return nil, err
	}
	if ring.SQEntries() < 2*depth || ring.CQEntries() < 2*depth {
		ring.Close()
		return nil, fmt.Errorf("uring: kernel gave %d SQ / %d CQ entries, need %d",
			ring.SQEntries(), ring.CQEntries(), 2*depth)
	}
	if err := configureWorkers(ring, opts); err != nil {
		ring.Close()
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		ring.Close()
		return nil, fmt.Errorf("uring: eventfd: %w", err)
	}
	if err := ring.RegisterEventfd(efd); err != nil {
		ring.Close()
		unix.Close(efd)
		return nil, err
	}
	e := &Engine{
		ring:   ring,
		wakeFd: efd,
		limit:  pieceBytesMax,
		ops:    make([]op, depth),
		free:   make([]uint32, depth),
		cqes:   make([]CQE, min(cqeBatchMax, ring.CQEntries())),
	}
	if opts.pieceBytes > 0 {
		e.limit = opts.pieceBytes
	}
	if e.inline = opts.InlineWriteMax; e.inline == 0 {
		e.inline = InlineWriteMaxDefault // a negative one matches no write
	}

	for i := range e.free {
		e.free[i] = uint32(depth - 1 - i)
	}
	return e, nil
}

// configureWorkers applies the io-wq options.
func configureWorkers(ring *Ring, opts Options) error {
	if len(opts.WorkerCPUs) > 0 {
		var set unix.CPUSet
		for _, cpu := range opts.WorkerCPUs {
			if cpu < 0 || cpu >= len(set)*int(unsafe.Sizeof(set[0]))*8 {
				return fmt.Errorf("uring: WorkerCPUs has CPU %d out of range", cpu)
			}
			set.Set(cpu)
		}
		if err := ring.RegisterIOWQAffinity(&set); err != nil {
			return err
		}
	}
	if opts.WorkersMax < 0 || opts.WorkersMax > math.MaxUint32 {
		return fmt.Errorf("uring: WorkersMax %d out of range", opts.WorkersMax)
	}
	if opts.WorkersMax > 0 {
		if _, _, err := ring.SetIOWQMaxWorkers(uint32(opts.WorkersMax), 0); err != nil {
			return err
		}
	}
	return nil
}

// Name returns "io_uring".
func (e *Engine) Name() string { return "io_uring" }

// WakeFd returns the eventfd the kernel signals on every completion. Every
// Reap drains it, so it is left readable only while completions wait, plus
// at most one spurious wake when a signal trails a CQE that a Reap already
// took (the next Reap clears it).
func (e *Engine) WakeFd() int { return e.wakeFd }

// RingStats are the counters of the engine's ring (the queue depth and
// the completions reaped); any goroutine may call it, also after Close.
// Writes served inline (Options.InlineWriteMax) never reach the ring.
func (e *Engine) RingStats() RingStats { return e.ring.Stats() }

// InFlight is the number of operations written but not yet reported by Reap.
func (e *Engine) InFlight() int { return e.active + len(e.ready) }

// Write queues a write of buf at off in f, linked to an fdatasync when sync
// is true; the operation completes (one Reap callback) after both. A short
// write is resubmitted for its remainder (with a new fdatasync); a failed
// write, or one that stops making progress, completes with an *OpError
// wrapping the errno or io.ErrShortWrite.
//
// When QueueDepth operations are already in the kernel, Write submits what
// is queued and blocks until one completes; that completion is kept for the
// next Reap.
//
// It returns ErrClosed, ErrNoFd, ErrBadOffset, or an error of the submission
// it had to make to find room.
// REQUIRES: buf is not modified until the operation is reaped (the engine
// keeps it referenced and pinned); f stays open until then.
func (e *Engine) Write(f vfs.File, buf []byte, off int64, sync bool, token uint64) error {
	if off < 0 {
		return ErrBadOffset
	}
	if !sync && len(buf) <= e.inline {
		return e.writeInline(f, buf, off, token)
	}
	return e.queue(f, buf, off, true, sync, token)
}

// writeInline makes a write without fdatasync at once with pwrite(2) and
// queues its completion for the next Reap. On file systems whose buffered
// writes io_uring cannot run without blocking (ext4, for one), the ring
// hands every such write to an io-wq worker thread: the copy into the page
// cache then costs a thread wake-up and a completion wake-up, tens of
// microseconds on a small machine, where the copy itself takes one or two
// for a small write. Writes carrying an fdatasync always go to the ring:
// the sync is the slow part, and the shard must not wait for it.
func (e *Engine) writeInline(f vfs.File, buf []byte, off int64, token uint64) error {
	fd, err := e.fdOf(f)
	if err != nil {
		return err
	}
	for done, shorts := 0, 0; done < len(buf); {
		n, werr := unix.Pwrite(fd, buf[done:], off+int64(done))
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			err = &OpError{Op: "write", Path: f.Name(), Off: off + int64(done), Err: werr}
			break
		}
		if n <= 0 || shorts >= shortWritesMax {
			err = &OpError{Op: "write", Path: f.Name(), Off: off + int64(done), Err: io.ErrShortWrite}
			break
		}
		if done += n; done < len(buf) {
			shorts++
		}
	}
	e.ready = append(e.ready, completion{token: token, err: err})
	return nil
}

// Sync queues an fdatasync of f. It covers the writes to f that completed
// before the kernel runs it. Errors are those of Write.
func (e *Engine) Sync(f vfs.File, token uint64) error {
	return e.queue(f, nil, 0, false, true, token)
}

// queue allocates a slot for a new operation and prepares its first
// submission.
func (e *Engine) queue(f vfs.File, buf []byte, off int64, write, sync bool, token uint64) error {
	fd, err := e.fdOf(f)
	if err != nil {
		return err
	}
	slot, err := e.alloc()
	if err != nil {
		return err
	}
	o := &e.ops[slot]
	o.token, o.file, o.fd, o.buf, o.off = token, f, fd, buf, off
	o.write, o.sync, o.limit = write, sync, e.limit
	if len(buf) > 0 {
		o.pinner.Pin(&buf[0])
	}
	e.prepare(slot)
	return nil
}

// fdOf returns f's descriptor for an operation, or why there is none.
func (e *Engine) fdOf(f vfs.File) (int, error) {
	if e.closed {
		return 0, ErrClosed
	}
	fd := f.Fd()
	if fd == vfs.InvalidFd || fd > uintptr(math.MaxInt32) {
		return 0, ErrNoFd
	}
	return int(fd), nil
}

// alloc takes a free slot, waiting for a completion when none is free.
// The wait always progresses: every allocated op is in the kernel or
// prepared, and it submits before blocking.
func (e *Engine) alloc() (uint32, error) {
	for len(e.free) == 0 {
		if err := e.wait(); err != nil {
			return 0, err
		}
	}
	slot := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	e.active++
	e.ops[slot].gen++
	return slot, nil
}

// prepare writes the SQEs of slot's next submission into the SQ.
func (e *Engine) prepare(slot uint32) {
	o := &e.ops[slot]
	n, sync := o.nextPiece()
	o.start(n, sync)
	if o.write {
		sqe := e.getSQE()
		sqe.PrepWrite(o.fd, o.buf[o.done:o.done+n], o.off+int64(o.done))
		sqe.SetUserData(userData(slot, o.gen, roleWrite))
		if sync {
			sqe.SetFlags(SQEIOLink)
		}
	}
	if sync {
		sqe := e.getSQE()
		sqe.PrepFsync(o.fd, FsyncDatasync)
		sqe.SetUserData(userData(slot, o.gen, roleSync))
	}
	e.cqesOut += o.pending
}

// getSQE returns a free SQE. The cqesOut invariant guarantees one exists.
func (e *Engine) getSQE() *SQE {
	sqe := e.ring.GetSQE()
	if sqe == nil {
		panic(fmt.Sprintf("uring: SQ full with %d ops active (invariant broken)", e.active))
	}
	return sqe
}

// userData packs a slot, its generation and the SQE's role.
func userData(slot, gen uint32, role int) uint64 {
	return uint64(gen)<<32 | uint64(slot)<<2 | uint64(role)
}

// Submit hands every queued operation to the kernel.
func (e *Engine) Submit() error {
	if e.closed {
		return ErrClosed
	}
	return e.submit()
}

// submit submits until nothing prepared remains, riding out EAGAIN/EBUSY
// (and a call that consumed nothing) by reaping, or waiting for,
// completions; at most submitRetriesMax such stalls per call.
func (e *Engine) submit() error {
	e.resubmitted = false
	for stalls := 0; e.ring.SQPending() > 0; {
		n, err := e.ring.Submit()
		if n > 0 {
			continue
		}
		if err == nil {
			err = errNoProgress
		}
		stalls++
		if stalls > submitRetriesMax ||
			!(errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY) || err == errNoProgress) {
			return err
		}
		got, herr := e.harvest()
		if herr != nil {
			return herr
		}
		if got == 0 && e.cqesOut > e.ring.SQPending() {
			// Something is in the kernel: let it finish before retrying.
			if _, err := e.ring.enter(false, 1, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// errNoProgress is what submit reports when io_uring_enter keeps accepting
// none of the prepared SQEs without saying why.
var errNoProgress = errors.New("uring: io_uring_enter consumed no SQEs")

// wait submits what is prepared and blocks until at least one CQE has been
// harvested (which may settle an op, or only resubmit it).
// REQUIRES: e.active > 0.
func (e *Engine) wait() error {
	if err := e.submit(); err != nil {
		return err
	}
	for {
		got, err := e.harvest()
		if err != nil || got > 0 {
			return err
		}
		if _, err := e.ring.enter(false, 1, true); err != nil {
			return err
		}
	}
}

// harvest copies out every ready CQE, applies it to its op, settles the ops
// whose submission completed and prepares the ones that need another. It
// returns the number of CQEs seen.
func (e *Engine) harvest() (int, error) {
	total := 0
	for {
		n, err := e.ring.ReapCQEs(e.cqes)
		for _, c := range e.cqes[:n] {
			e.apply(c)
		}
		total += n
		if err != nil {
			return total, err
		}
		if n < len(e.cqes) {
			break
		}
	}
	for _, slot := range e.again {
		e.prepare(slot)
		e.resubmitted = true
	}
	e.again = e.again[:0]
	return total, nil
}

// apply routes one CQE to its op.
func (e *Engine) apply(c CQE) {
	slot, gen, role := uint32(c.UserData>>2)&(1<<30-1), uint32(c.UserData>>32), int(c.UserData&3)
	if int(slot) >= len(e.ops) || e.ops[slot].gen != gen || e.ops[slot].pending == 0 {
		panic(fmt.Sprintf("uring: CQE %#x matches no operation in flight", c.UserData))
	}
	e.cqesOut--
	o := &e.ops[slot]
	if !o.record(role, c.Res) {
		return
	}
	done, err := o.settle()
	if !done {
		e.again = append(e.again, slot)
		return
	}
	e.ready = append(e.ready, completion{token: o.token, err: err})
	o.reset()
	e.free = append(e.free, slot)
	e.active--
}

// Reap reports settled operations: fn is called once per operation with
// its token and error (nil, or an *OpError). With wait true and operations
// in flight it first submits anything queued and blocks until at least one
// operation settles. With nothing in flight it returns 0 at once. Reap may
// submit queued operations (resubmitted remainders share the SQ with them).
//
// fn may call Write, Sync and Submit; a Write that must wait for room keeps
// the completions it sees for the next Reap.
// REQUIRES: fn does not call Reap or Close.
func (e *Engine) Reap(wait bool, fn func(token uint64, err error)) (int, error) {
	if e.closed {
		return 0, ErrClosed
	}
	if e.reaping {
		panic("uring: Reap called from a Reap callback")
	}
	// Drain before harvesting: a CQE posted after the drain signals the
	// eventfd again, so no wake-up is lost. The drain runs on every call
	// (one non-blocking read): the kernel signals the eventfd just after it
	// publishes a CQE, so a signal can trail a CQE already harvested, and
	// only draining unconditionally guarantees such a stale signal costs
	// one spurious wake instead of leaving WakeFd readable forever.
	var b [8]byte
	_, _ = unix.Read(e.wakeFd, b[:])
	if _, err := e.harvest(); err != nil {
		return 0, err
	}
	for wait && len(e.ready) == 0 && e.active > 0 {
		if err := e.wait(); err != nil {
			return 0, err
		}
	}
	if e.resubmitted {
		// Resubmitted remainders must not wait for the caller's next Submit.
		if err := e.submit(); err != nil {
			return 0, err
		}
	}
	return e.deliver(fn), nil
}

// deliver runs fn over the ready completions. Completions that callbacks
// cause (a Write waiting for room) land in the other buffer.
func (e *Engine) deliver(fn func(token uint64, err error)) int {
	batch := e.ready
	if len(batch) == 0 {
		return 0
	}
	e.ready = e.spare[:0]
	e.reaping = true
	defer func() {
		e.reaping = false
		clear(batch)
		e.spare = batch[:0]
	}()
	for _, c := range batch {
		fn(c.token, c.err)
	}
	return len(batch)
}

// Close waits until every operation in the kernel has settled (queued ones
// are submitted first; none is abandoned half-written), then unregisters
// and closes the eventfd and closes the ring. Completions not yet reported
// are dropped. It returns ErrClosed when called twice.
func (e *Engine) Close() error {
	if e.closed {
		return ErrClosed
	}
	if e.reaping {
		panic("uring: Close called from a Reap callback")
	}
	var err error
	for e.active > 0 && err == nil {
		err = e.wait()
	}
	e.closed = true
	e.ready, e.spare = nil, nil
	if err != nil {
		// The kernel may still read our buffers: keep them reachable for
		// the life of the process rather than risk writing freed memory.
		leaked.Lock()
		leaked.ops = append(leaked.ops, e.ops)
		leaked.Unlock()
		e.ops = nil
		err = fmt.Errorf("uring: close with %d operations unsettled: %w", e.active, err)
	}
	if uerr := e.ring.UnregisterEventfd(); uerr != nil && err == nil {
		err = uerr
	}
	if cerr := e.ring.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if cerr := unix.Close(e.wakeFd); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// leaked keeps the op tables of engines whose Close could not drain the
// kernel. Guarded by its mutex; only ever appended to.
var leaked struct {
	sync.Mutex
	ops [][]op
}
