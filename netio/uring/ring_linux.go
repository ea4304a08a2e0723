//go:build linux

package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring sizes. The kernel rounds SQ and CQ sizes up to powers of two.
const (
	// RingEntriesDefault is the SQ size NewRing uses when RingOptions.Entries
	// is 0.
	RingEntriesDefault = 128
	// RingEntriesMax bounds RingOptions.Entries (the kernel allows 32768;
	// a shard never needs more than this, and each entry pins 64 bytes of
	// SQE plus two 16-byte CQEs of kernel memory).
	RingEntriesMax = 8192
)

// RingOptions configures NewRing. The zero value is a usable default.
type RingOptions struct {
	// Entries is the submission queue size (SQEs); 0 means
	// RingEntriesDefault. The completion queue is twice as large.
	Entries uint32
	// SingleIssuer sets IORING_SETUP_SINGLE_ISSUER (Linux 6.0+): the kernel
	// skips some locking, but every submission must then come from the OS
	// thread that created the ring, or io_uring_enter fails with EEXIST.
	// Only a goroutine that holds runtime.LockOSThread for the ring's whole
	// life may set it. Default false.
	SingleIssuer bool

	// separateMmap maps the SQ and CQ rings separately even when the kernel
	// offers IORING_FEAT_SINGLE_MMAP (tests use it to cover the fallback).
	separateMmap bool
}

// Ring is one io_uring instance: a submission queue (SQ) of SQEs and a
// completion queue (CQ) of CQEs, both in memory shared with the kernel.
//
// A Ring is owned by one goroutine at a time (it is not safe for concurrent
// use). Indices shared with the kernel are read and written only with
// sync/atomic; everything else is private to the owner.
type Ring struct {
	fd       int
	features uint32
	flags    uint32 // setup flags we passed

	// SQ. Invariant: *sqHead <= sqTail (mod 2^32) and
	// sqTail - *sqHead <= sqEntries. Entries in [*sqKTail, sqTail) are
	// prepared but not yet published to the kernel.
	sqHead    *uint32 // kernel-written: next SQE the kernel consumes
	sqKTail   *uint32 // we write: end of the published SQEs
	sqFlags   *uint32 // kernel-written IORING_SQ_* flags
	sqMask    uint32
	sqEntries uint32
	sqTail    uint32 // local tail: end of the prepared SQEs
	sqes      []SQE

	// CQ. Invariant: *cqHead <= *cqTail (mod 2^32).
	cqHead     *uint32 // we write: next CQE to reap
	cqTail     *uint32 // kernel-written: end of posted CQEs
	cqOverflow *uint32 // kernel-written: dropped CQE count
	cqMask     uint32
	cqEntries  uint32
	cqes       []CQE

	sqRingMem []byte // SQ ring (and CQ ring when singleMmap)
	cqRingMem []byte // nil when the CQ ring shares sqRingMem
	sqeMem    []byte

	eventfd int // registered eventfd, or -1
	closed  bool

	// submitted counts the SQEs the kernel consumed (io_uring_enter's
	// answer) and reaped the CQEs copied out. The owner adds to them once
	// per io_uring_enter and once per reap, not per entry: an uncontended
	// atomic add beside a system call, no lock, no allocation. Any
	// goroutine may read them (Stats). Invariant: reaped <= submitted
	// as long as every SQE posts one CQE (no IOSQE_CQE_SKIP_SUCCESS).
	submitted, reaped atomic.Uint64
}

// Stats reads the ring's counters; safe from any goroutine, also after
// Close. Reaped is read first, so a reap racing the read never makes it
// pass Submitted.
func (r *Ring) Stats() RingStats {
	reaped := r.reaped.Load()
	return RingStats{Submitted: r.submitted.Load(), Reaped: reaped}
}

// NewRing creates a ring. Errors that mean io_uring is refused here match
// ErrUnavailable (see UnavailableError).
func NewRing(opts RingOptions) (*Ring, error) {
	entries := opts.Entries
	if entries == 0 {
		entries = RingEntriesDefault
	}
	if entries > RingEntriesMax {
		return nil, fmt.Errorf("uring: %d ring entries exceeds RingEntriesMax %d", entries, RingEntriesMax)
	}
	p := params{flags: setupCQSize | setupClamp, cqEntries: 2 * entries}
	if opts.SingleIssuer {
		p.flags |= setupSingleIssuer
	}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, setupError(errno, opts.SingleIssuer)
	}
	r := &Ring{fd: int(fd), features: p.features, flags: p.flags, eventfd: -1}
	if err := r.mmap(&p, opts.separateMmap); err != nil {
		r.unmap()
		unix.Close(r.fd)
		return nil, err
	}
	return r, nil
}

// setupError classifies an io_uring_setup failure.
func setupError(errno syscall.Errno, singleIssuer bool) error {
	switch errno {
	case unix.ENOSYS, unix.EPERM, unix.EACCES:
		return &UnavailableError{Reason: "io_uring_setup: " + errno.Error(), Err: errno}
	case unix.EINVAL:
		if singleIssuer {
			return fmt.Errorf("uring: io_uring_setup: IORING_SETUP_SINGLE_ISSUER needs Linux 6.0+: %w", errno)
		}
	}
	return fmt.Errorf("uring: io_uring_setup: %w", errno)
}

// mmap maps the rings and the SQE array and resolves the shared fields.
func (r *Ring) mmap(p *params, separate bool) error {
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const flags = unix.MAP_SHARED | unix.MAP_POPULATE
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(CQE{})))
	single := p.features&featSingleMmap != 0 && !separate
	if single && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	if r.sqRingMem, err = unix.Mmap(r.fd, offSQRing, sqSize, prot, flags); err != nil {
		return fmt.Errorf("uring: mmap SQ ring: %w", err)
	}
	cqMem := r.sqRingMem
	if !single {
		if r.cqRingMem, err = unix.Mmap(r.fd, offCQRing, cqSize, prot, flags); err != nil {
			return fmt.Errorf("uring: mmap CQ ring: %w", err)
		}
		cqMem = r.cqRingMem
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(SQE{}))
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, sqeSize, prot, flags); err != nil {
		return fmt.Errorf("uring: mmap SQEs: %w", err)
	}

	sq := r.sqRingMem
	r.sqHead = u32At(sq, p.sqOff.head)
	r.sqKTail = u32At(sq, p.sqOff.tail)
	r.sqFlags = u32At(sq, p.sqOff.flags)
	r.sqMask = *u32At(sq, p.sqOff.ringMask)
	r.sqEntries = *u32At(sq, p.sqOff.ringEntries)
	r.sqTail = atomic.LoadUint32(r.sqKTail)
	r.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	// Identity map the SQ index array once: slot i always names SQE i.
	array := unsafe.Slice(u32At(sq, p.sqOff.array), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}

	r.cqHead = u32At(cqMem, p.cqOff.head)
	r.cqTail = u32At(cqMem, p.cqOff.tail)
	r.cqOverflow = u32At(cqMem, p.cqOff.overflow)
	r.cqMask = *u32At(cqMem, p.cqOff.ringMask)
	r.cqEntries = *u32At(cqMem, p.cqOff.ringEntries)
	r.cqes = unsafe.Slice((*CQE)(unsafe.Pointer(&cqMem[p.cqOff.cqes])), p.cqEntries)
	return nil
}

// u32At is the shared word at off in mem.
func u32At(mem []byte, off uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&mem[off]))
}

// unmap releases whatever mmap mapped.
func (r *Ring) unmap() {
	for _, m := range [][]byte{r.sqeMem, r.cqRingMem, r.sqRingMem} {
		if m != nil {
			_ = unix.Munmap(m)
		}
	}
	r.sqeMem, r.cqRingMem, r.sqRingMem = nil, nil, nil
	r.sqes, r.cqes = nil, nil
}

// Close unregisters the eventfd (it does not close it: the caller owns it),
// unmaps the rings and closes the ring descriptor. Operations still in the
// kernel are cancelled by the kernel; the caller must keep their buffers
// alive until then (the Engine drains before closing, see Engine.Close).
func (r *Ring) Close() error {
	if r.closed {
		return ErrClosed
	}
	r.closed = true
	r.unmap()
	return unix.Close(r.fd)
}

// Fd returns the ring's descriptor.
func (r *Ring) Fd() int { return r.fd }

// SingleMmap reports whether both rings share one mapping.
func (r *Ring) SingleMmap() bool { return r.cqRingMem == nil }

// SQEntries and CQEntries are the queue sizes the kernel chose.
func (r *Ring) SQEntries() int { return int(r.sqEntries) }

// CQEntries is the completion queue size.
func (r *Ring) CQEntries() int { return int(r.cqEntries) }

// GetSQE returns the next free SQE, or nil when the SQ is full (Submit, then
// retry) or the ring is closed (Submit then says ErrClosed). The entry is
// not visible to the kernel until Submit.
func (r *Ring) GetSQE() *SQE {
	if r.closed || r.sqTail-atomic.LoadUint32(r.sqHead) >= r.sqEntries {
		return nil
	}
	sqe := &r.sqes[r.sqTail&r.sqMask]
	*sqe = SQE{}
	r.sqTail++
	return sqe
}

// SQSpace is the number of SQEs GetSQE can still return before a Submit.
func (r *Ring) SQSpace() int {
	if r.closed {
		return 0
	}
	return int(r.sqEntries - (r.sqTail - atomic.LoadUint32(r.sqHead)))
}

// SQPending is the number of prepared SQEs the kernel has not consumed yet.
func (r *Ring) SQPending() int {
	if r.closed {
		return 0
	}
	return int(r.sqTail - atomic.LoadUint32(r.sqHead))
}

// flush publishes the prepared SQEs and returns how many the kernel has not
// consumed. The atomic store orders the SQE contents before the tail.
func (r *Ring) flush() uint32 {
	atomic.StoreUint32(r.sqKTail, r.sqTail)
	return r.sqTail - atomic.LoadUint32(r.sqHead)
}

// Submit hands every prepared SQE to the kernel and returns how many it
// consumed. EINTR is retried. EAGAIN (kernel out of request memory) and
// EBUSY (completions are backed up in the kernel's overflow list) are
// returned as they are: reap CQEs, then submit again. A partial submission
// (fewer than SQPending) leaves the rest prepared for the next call.
func (r *Ring) Submit() (int, error) {
	return r.enter(true, 0, false)
}

// SubmitAndWait submits like Submit and then blocks until at least
// minComplete CQEs are ready. It may return earlier (a partial submission):
// callers reap and loop.
func (r *Ring) SubmitAndWait(minComplete uint32) (int, error) {
	return r.enter(true, minComplete, true)
}

// enter calls io_uring_enter, retrying EINTR (Go preempts goroutines with
// signals, so a blocking wait is interrupted often). When submit is false
// nothing prepared is handed over (the call only waits, or flushes the
// kernel's overflowed CQEs when minComplete is 0).
func (r *Ring) enter(submit bool, minComplete uint32, wait bool) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	var flags uintptr
	if wait {
		flags = enterGetEvents
	}
	for attempt := 0; ; attempt++ {
		var pending uint32
		if submit {
			pending = r.flush()
		}
		if pending == 0 && !wait {
			return 0, nil
		}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd),
			uintptr(pending), uintptr(minComplete), flags, 0, 0)
		if errno == unix.EINTR && attempt < enterRetriesMax {
			continue
		}
		if errno != 0 {
			return 0, fmt.Errorf("uring: io_uring_enter: %w", errno)
		}
		if submit && n > 0 {
			r.submitted.Add(uint64(n))
		}
		return int(n), nil
	}
}

// enterRetriesMax bounds EINTR retries of one io_uring_enter or
// io_uring_register call. A long wait can be interrupted many times; the
// bound only stops a pathological signal storm from spinning forever.
const enterRetriesMax = 1 << 20

// CQReady is the number of CQEs waiting to be reaped.
func (r *Ring) CQReady() int {
	if r.closed {
		return 0
	}
	return int(atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead))
}

// ReapCQEs copies up to len(dst) ready CQEs into dst, marks them consumed,
// and returns how many it copied; it never blocks. When the CQ is empty but
// the kernel holds overflowed completions (IORING_SQ_CQ_OVERFLOW, possible
// only when more CQEs are outstanding than the CQ holds) it asks the kernel
// to flush them first. It returns ErrCQOverflow if the kernel dropped any.
func (r *Ring) ReapCQEs(dst []CQE) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	n := r.copyCQEs(dst)
	if n < len(dst) && atomic.LoadUint32(r.sqFlags)&sqCQOverflow != 0 {
		if _, err := r.enter(false, 0, true); err != nil {
			return n, err
		}
		n += r.copyCQEs(dst[n:])
	}
	if atomic.LoadUint32(r.cqOverflow) != 0 {
		return n, ErrCQOverflow
	}
	return n, nil
}

// copyCQEs copies ready CQEs and publishes the new head.
func (r *Ring) copyCQEs(dst []CQE) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail && n < len(dst); n++ {
		dst[n] = r.cqes[head&r.cqMask]
		head++
	}
	atomic.StoreUint32(r.cqHead, head)
	if n > 0 {
		r.reaped.Add(uint64(n))
	}
	return n
}

// RegisterEventfd makes the kernel signal efd (an eventfd) whenever it posts
// a CQE, so the owner can block on efd beside its other descriptors. The
// caller keeps ownership of efd and closes it after the ring.
func (r *Ring) RegisterEventfd(efd int) error {
	if r.closed {
		return ErrClosed
	}
	fd32 := int32(efd)
	if err := r.register(registerEventfd, unsafe.Pointer(&fd32), 1); err != nil {
		return fmt.Errorf("uring: register eventfd: %w", err)
	}
	r.eventfd = efd
	return nil
}

// UnregisterEventfd undoes RegisterEventfd.
func (r *Ring) UnregisterEventfd() error {
	if r.closed {
		return ErrClosed
	}
	if err := r.register(unregisterEventfd, nil, 0); err != nil {
		return fmt.Errorf("uring: unregister eventfd: %w", err)
	}
	r.eventfd = -1
	return nil
}

// RegisterIOWQAffinity restricts the kernel's io-wq worker threads (which
// run the writes and fsyncs that cannot complete inline) to cpus. Workers
// otherwise inherit the submitting thread's affinity, so a shard pinned to
// one CPU would have its disk work compete for that same CPU. The kernel
// applies it to the io-wq of the calling OS thread only (one io-wq per
// thread, shared by all its rings), and only to workers started after the
// call: call it from the thread that will submit (a goroutine holding
// runtime.LockOSThread), before that thread's first submission.
func (r *Ring) RegisterIOWQAffinity(cpus *unix.CPUSet) error {
	if r.closed {
		return ErrClosed
	}
	if err := r.register(registerIOWQAff, unsafe.Pointer(cpus), unsafe.Sizeof(*cpus)); err != nil {
		return fmt.Errorf("uring: register io-wq affinity: %w", err)
	}
	return nil
}

// SetIOWQMaxWorkers bounds the kernel's io-wq worker threads for this ring:
// bounded workers run regular-file I/O, unbounded ones socket and pipe
// work; 0 leaves a limit as it is. It returns the previous limits. Unlike
// the affinity, the limits apply to every thread that submits to the ring.
func (r *Ring) SetIOWQMaxWorkers(bounded, unbounded uint32) (prevBounded, prevUnbounded uint32, err error) {
	if r.closed {
		return 0, 0, ErrClosed
	}
	vals := [2]uint32{bounded, unbounded}
	if err := r.register(registerIOWQMax, unsafe.Pointer(&vals), 2); err != nil {
		return 0, 0, fmt.Errorf("uring: register io-wq max workers: %w", err)
	}
	return vals[0], vals[1], nil
}

// register calls io_uring_register, retrying EINTR.
func (r *Ring) register(op uintptr, arg unsafe.Pointer, nargs uintptr) error {
	for attempt := 0; ; attempt++ {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), op, uintptr(arg), nargs, 0, 0)
		if errno == unix.EINTR && attempt < enterRetriesMax {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

// supports reports which of ops the kernel implements (IORING_REGISTER_PROBE,
// Linux 5.6+; an older kernel answers EINVAL, which means IORING_OP_WRITE is
// missing too).
func (r *Ring) supports(ops ...uint8) (missing []uint8, err error) {
	var pr probe
	if err := r.register(registerProbe, unsafe.Pointer(&pr), probeOpsMax); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return ops, nil
		}
		return nil, err
	}
	for _, op := range ops {
		if int(op) >= int(pr.opsLen) || pr.ops[op].flags&probeOpSupported == 0 {
			missing = append(missing, op)
		}
	}
	return missing, nil
}
