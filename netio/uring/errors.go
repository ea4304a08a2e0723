package uring

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrUnavailable is matched (errors.Is) by every error that means the
	// kernel refuses io_uring here: not built in or too old (ENOSYS, a
	// missing opcode or feature), forbidden by seccomp or by the
	// kernel.io_uring_disabled sysctl (EPERM, EACCES), or not on Linux.
	// Callers react by falling back to the pwrite engine.
	ErrUnavailable = errors.New("uring: io_uring unavailable")

	// ErrClosed is returned by every Ring and Engine method called after
	// Close, and by a second Close.
	ErrClosed = errors.New("uring: closed")

	// ErrNoFd is returned by Engine.Write and Engine.Sync for a file without
	// an operating-system descriptor (vfs.InvalidFd, e.g. an in-memory file)
	// or with one that does not fit the kernel's 32-bit fd field.
	ErrNoFd = errors.New("uring: file has no OS descriptor")

	// ErrCQOverflow is returned when the kernel reports dropped completions
	// (a kernel without IORING_FEAT_NODROP whose CQ overflowed). The ring's
	// bookkeeping can no longer be trusted; close it.
	ErrCQOverflow = errors.New("uring: completion queue overflowed and dropped completions")
)

// UnavailableError says why io_uring cannot be used. It matches
// ErrUnavailable with errors.Is; Err is the underlying cause (an errno, or
// nil when the reason is a missing feature).
type UnavailableError struct {
	// Reason is a short human explanation ("io_uring_setup: operation not
	// permitted", "IORING_OP_WRITE not supported").
	Reason string
	// Err is the cause, if any (a syscall.Errno for a refused syscall).
	Err error
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return "uring: io_uring unavailable: " + e.Reason
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// OpError is the error an Engine reports for a failed operation. It wraps
// the kernel's errno (a syscall.Errno, so errors.Is(err, syscall.ENOSPC) and
// errors.Is(err, fs.ErrPermission) work) or io.ErrShortWrite. A failed
// fdatasync's OpError is itself wrapped in a *vfs.SyncError, the log's sign
// that durable contents are unknown and nothing may be retried.
type OpError struct {
	// Op is "write" or "fdatasync".
	Op string
	// Path is the file's name (vfs.File.Name).
	Path string
	// Off is the file offset of the failed write (the remainder's offset
	// after a short write); 0 for fdatasync.
	Off int64
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *OpError) Error() string {
	if e.Op == "write" {
		return "uring: write " + e.Path + " at " + strconv.FormatInt(e.Off, 10) + ": " + e.Err.Error()
	}
	return fmt.Sprintf("uring: %s %s: %v", e.Op, e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }
