package uring

import (
	"errors"

	"github.com/corestream/corestream/segment/vfs"
)

// ForFS returns an io_uring engine for the files of fsys, or why there is
// none: fsys hands out no descriptors (the in-memory file system), or the
// kernel refuses io_uring (off Linux, disabled, blocked by seccomp). The
// caller falls back to the segment package's pwrite engine and may log the
// reason; the segment package does not import this one, so the choice is
// made where the two meet (the node, tests).
func ForFS(fsys vfs.FS) (*Engine, error) {
	if !vfs.FdBacked(fsys) {
		return nil, errors.New("uring: the file system has no descriptors; using pwrite")
	}
	return NewEngine(Options{})
}
