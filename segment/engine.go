package segment

import "github.com/corestream/corestream/segment/vfs"

// Engine issues a log's file writes and data syncs. It is owned by one
// goroutine (the shard that owns the log) and is not safe for concurrent use.
//
// Operations are asynchronous: Write and Sync only queue; Submit hands the
// queue to the kernel; Reap reports completions, in any order. A Log keeps
// its written and durable watermarks from completions alone, so an engine
// that completes operations out of order is correct by construction.
//
// Two implementations exist: the io_uring engine (netio/uring), which links
// each write to its fdatasync and keeps several such chains in flight, and the
// pwrite engine (this package), which performs each operation synchronously
// inside Submit. This package does not import netio/uring (it stands below
// it): whoever builds a shard's IO chooses the engine (uring.ForFS, with
// pwrite as the fallback). OpenLog without a shared IO uses pwrite.
type Engine interface {
	// Name is a short identifier: "io_uring" or "pwrite".
	Name() string
	// Write queues a write of buf at off in f. When sync is true an
	// fdatasync of f follows the write and the operation completes only
	// after both; a failed or short write fails the whole operation.
	// REQUIRES: buf is not modified or freed until the operation completes.
	Write(f vfs.File, buf []byte, off int64, sync bool, token uint64) error
	// Sync queues an fdatasync of f. It covers every write to f that had
	// completed before Submit handed the sync to the kernel.
	Sync(f vfs.File, token uint64) error
	// Submit hands every queued operation to the kernel.
	Submit() error
	// Reap calls fn once for each completed operation with its token and
	// error (nil, or a short write reported as io.ErrShortWrite; a failed
	// fdatasync is wrapped in *vfs.SyncError so the log never mistakes it
	// for a retryable ENOSPC of the write). When wait
	// is true and operations are in flight it blocks until at least one
	// completes. It returns the number of completions reported.
	Reap(wait bool, fn func(token uint64, err error)) (int, error)
	// InFlight is the number of operations queued or submitted but not yet
	// reaped.
	InFlight() int
	// WakeFd is a descriptor that becomes readable when completions are
	// waiting to be reaped (an eventfd), or -1 when the engine completes
	// everything inside Submit. A shard blocks on it together with its inbox.
	WakeFd() int
	// Close waits for in-flight operations and releases the engine.
	Close() error
}
