// Package uring is corestream's own small io_uring binding (on
// golang.org/x/sys/unix only) and the io_uring write Engine of the partition
// log. It implements segment.Engine structurally: it imports segment/vfs but
// not segment, because segment imports this package to choose an engine.
//
// # The ring
//
// NewRing calls io_uring_setup and maps the submission queue (SQ) ring, the
// completion queue (CQ) ring and the SQE array; with IORING_FEAT_SINGLE_MMAP
// (Linux 5.4+) one mapping covers both rings, otherwise each gets its own.
// The SQ index array is filled with the identity once, so slot i always
// names SQE i:
//
//	         owner goroutine                       kernel
//	GetSQE ─► sqes[sqTail & mask]  (prepared, private until Submit)
//	Submit ─► atomic store *sqKTail ──────────────► consumes up to *sqKTail,
//	          io_uring_enter(to_submit)              advances *sqHead
//	ReapCQEs ◄─ cqes[*cqHead & mask] ◄────────────── posts CQEs, advances *cqTail,
//	          atomic store *cqHead                   signals the registered eventfd
//
// Every index shared with the kernel is read and written with sync/atomic
// (whose sequentially consistent operations are at least the acquire/release
// the ABI needs). The SQ tail is also kept privately: entries between the
// published tail and it are prepared but invisible to the kernel, which is
// how a write and its linked fdatasync are published together.
//
// A Ring (and an Engine) is owned by one goroutine at a time and is not safe
// for concurrent use. IORING_SETUP_SINGLE_ISSUER is an option, off by
// default: with it the kernel rejects (EEXIST) any submission from an OS
// thread other than the creator's, and Go moves goroutines between threads
// unless they hold runtime.LockOSThread. The log's own tests and benchmarks
// do not lock threads; a shard, which does, may turn it on.
//
// Writes that cannot complete inline (on ext4 here, most buffered writes)
// and every fsync run on the kernel's io-wq worker threads. For a small
// write without an fdatasync that hand-off (a worker wake-up, then a
// completion wake-up for the shard) costs far more than the copy into the
// page cache, so the Engine makes writes of at most Options.InlineWriteMax
// bytes (default 128 KiB) that carry no sync with pwrite(2) on the calling
// thread; their completions wait in the Engine for the next Reap, as if
// the kernel had posted them. On the 2-vCPU test machine this took the
// one-message produce round trip under fsync never from a p50 of 122-127
// µs to 87-94 µs. io-wq workers inherit
// the submitting thread's CPU affinity: a shard pinned to one CPU would
// have its disk work compete for that CPU. Options.WorkerCPUs
// (IORING_REGISTER_IOWQ_AFF, applied to the calling thread's workers) moves
// them elsewhere, and Options.WorkersMax (IORING_REGISTER_IOWQ_MAX_WORKERS)
// bounds how many there are.
//
// Queue sizes are bounded (RingEntriesMax, QueueDepthMax). io_uring_enter's
// EINTR (Go preempts with signals) is retried; EAGAIN and EBUSY are handed
// to the Engine, which reaps and retries a bounded number of times.
//
// Available probes once per process whether io_uring may be used: setup can
// be refused by seccomp (Docker's default profile) or the
// kernel.io_uring_disabled sysctl (EPERM), or not exist (ENOSYS), and the
// Engine also needs IORING_FEAT_NODROP and IORING_OP_WRITE (Linux 5.6+).
// Every such refusal matches ErrUnavailable, and the log then falls back to
// its pwrite engine. Off Linux, Available always refuses.
//
// # The Engine
//
// Write(f, buf, off, sync, token) prepares IORING_OP_WRITE and, when sync is
// requested, an IORING_OP_FSYNC with IORING_FSYNC_DATASYNC linked behind it
// (IOSQE_IO_LINK), so the fdatasync starts only after the write succeeded;
// the token is reported once, after both CQEs. Sync(f, token) is a lone
// fdatasync. Submit hands everything prepared to the kernel in one
// io_uring_enter; many operations (chains) are in flight at once and they
// complete in any order: the log keeps its watermarks from completions.
//
// Each operation owns a slot in a fixed table of Options.QueueDepth slots;
// its CQEs carry (generation, slot, role) in user_data, and a CQE that
// matches no slot in flight is an invariant violation (panic). Because an
// operation has at most two SQEs outstanding, sizing the SQ at 2×QueueDepth
// and the CQ at 4×QueueDepth means the SQ always has room for an allocated
// slot and the CQ cannot overflow; ReapCQEs still flushes the kernel's
// overflow list (IORING_SQ_CQ_OVERFLOW, IORING_FEAT_NODROP) should it ever
// be used. When every slot is busy, Write submits and blocks until a
// completion frees one; that completion is kept for the next Reap.
//
// Short writes are resubmitted, not reported: a write CQE with
// 0 < res < len makes the kernel cancel the linked fdatasync (-ECANCELED);
// that sync did not run and is not counted. Once both CQEs are in, the
// remainder is resubmitted at off+written with a new linked fdatasync. A
// write that makes no progress, or is short more than shortWritesMax times,
// fails with io.ErrShortWrite; a negative res fails with its errno (an
// *OpError wrapping syscall.Errno, so errors.Is(err, syscall.ENOSPC)
// works); a failed fdatasync is wrapped once more in *vfs.SyncError, which
// the log reads as "durable contents unknown, never retry". Buffers larger than pieceBytesMax (1 GiB; the kernel caps one
// write below 2 GiB) are written as consecutive pieces the same way, with
// the fdatasync linked to the last piece only.
//
// The kernel reads the caller's buffer after Submit returns, so until the
// operation's last CQE is reaped the Engine keeps the buffer referenced from
// its slot and pins it with runtime.Pinner (Go's collector does not move heap
// objects today; the pin makes the guarantee explicit and costs ~100 ns),
// and keeps the vfs.File referenced too, so that no finalizer on an object
// behind it can close the descriptor while the kernel writes through it.
// Files without a descriptor (vfs.InvalidFd, the in-memory file system) are
// refused with ErrNoFd.
//
// WakeFd is an eventfd registered with IORING_REGISTER_EVENTFD: the kernel
// signals it on every CQE, so a shard can block on it beside its inbox.
// Every Reap drains it before harvesting CQEs (a CQE posted after the drain
// signals again, so no wake-up is lost; a signal that trails a CQE already
// harvested costs one spurious wake, cleared by the next Reap). Close
// submits anything queued, waits until every operation settled (their
// completions are dropped), then closes the eventfd and the ring.
package uring
