package vfs

import (
	"errors"
	"io"
	"syscall"
)

// SyncError wraps the failure of an fdatasync. Engines report a failed sync
// of a write→sync operation wrapped in *SyncError, so that the log can tell
// "the write found no space" (nothing was accepted: rewind and retry later)
// from "the sync failed" (the page cache may have dropped data it had
// accepted: never retry, poison the log).
type SyncError struct {
	// Err is the error the sync returned.
	Err error
}

// Error says that the sync failed, and why.
func (e *SyncError) Error() string { return "sync: " + e.Err.Error() }

// Unwrap returns the sync's error, so errors.Is(err, syscall.EIO) works.
func (e *SyncError) Unwrap() error { return e.Err }

// ErrCrashed is returned by every operation on a file handle that was open
// when its MemFS crashed, and by operations an Injector refuses after a
// simulated process death.
var ErrCrashed = errors.New("vfs: file system crashed")

// IsNoSpace reports whether err means the device (or a quota) is full, or
// that a write was cut short, and is not a sync failure: the write did not
// take and can be retried once space returns.
func IsNoSpace(err error) bool {
	if err == nil {
		return false
	}
	var se *SyncError
	if errors.As(err, &se) {
		return false
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, io.ErrShortWrite)
}
