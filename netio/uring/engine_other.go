//go:build !linux

package uring

import (
	"errors"

	"github.com/corestream/corestream/segment/vfs"
)

// On systems other than Linux io_uring does not exist: Available and
// NewEngine report ErrUnavailable and the log falls back to pwrite. The
// Engine type exists so that callers compile everywhere.

// Engine limits (see the Linux build for their meaning).
const (
	QueueDepthDefault = 256
	QueueDepthMax     = 4096
)

// ErrBadOffset is returned by Engine.Write for a negative offset.
var ErrBadOffset = errors.New("uring: negative write offset")

var errNotLinux = &UnavailableError{Reason: "io_uring exists only on Linux"}

// Options configures NewEngine.
type Options struct {
	QueueDepth   int
	SingleIssuer bool
	WorkerCPUs   []int
	WorkersMax   int
}

// Available always reports ErrUnavailable off Linux.
func Available() error { return errNotLinux }

// NewEngine always fails with ErrUnavailable off Linux.
func NewEngine(Options) (*Engine, error) { return nil, errNotLinux }

// Engine is never constructed off Linux; its methods report ErrUnavailable.
type Engine struct{}

// Name returns "io_uring".
func (e *Engine) Name() string { return "io_uring" }

// Write reports ErrUnavailable.
func (e *Engine) Write(vfs.File, []byte, int64, bool, uint64) error { return errNotLinux }

// Sync reports ErrUnavailable.
func (e *Engine) Sync(vfs.File, uint64) error { return errNotLinux }

// Submit reports ErrUnavailable.
func (e *Engine) Submit() error { return errNotLinux }

// Reap reports ErrUnavailable.
func (e *Engine) Reap(bool, func(uint64, error)) (int, error) { return 0, errNotLinux }

// InFlight is always 0.
func (e *Engine) InFlight() int { return 0 }

// RingStats are all 0: there is no ring.
func (e *Engine) RingStats() RingStats { return RingStats{} }

// WakeFd is always -1.
func (e *Engine) WakeFd() int { return -1 }

// Close reports ErrUnavailable.
func (e *Engine) Close() error { return errNotLinux }
