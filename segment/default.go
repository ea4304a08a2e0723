package segment

import (
	"errors"

	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/segment/vfs"
)

// DefaultEngine chooses the engine for files of fsys: io_uring when the
// kernel allows it and fsys hands out real descriptors, else the pwrite
// engine. fallback is nil when io_uring was chosen, else why not (for the
// operator's log).
func DefaultEngine(fsys vfs.FS) (e Engine, fallback error) {
	if !vfs.FdBacked(fsys) {
		return NewPwriteEngine(), errors.New("segment: the file system has no descriptors; using pwrite")
	}
	u, err := uring.NewEngine(uring.Options{})
	if err != nil {
		return NewPwriteEngine(), err
	}
	return u, nil
}
