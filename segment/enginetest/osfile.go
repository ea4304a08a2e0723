package enginetest

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/segment/vfs"
)

// osFile is the suite's own minimal vfs.File over a raw descriptor (opened
// with unix.Open, so no *os.File finalizer can close it under an engine).
// The suite keeps it private so that it tests engines against a file whose
// every call it controls, independent of segment/vfs's OS file system.
type osFile struct {
	fd   int
	name string
	// fdOverride, when >= 0, is what Fd returns instead of fd and what
	// WriteAt and Sync use: a descriptor the suite knows to be closed.
	fdOverride int
}

var _ vfs.File = (*osFile)(nil)

// openOS opens name with flags (unix.O_*) and mode 0644.
func openOS(name string, flags int) (*osFile, error) {
	for {
		fd, err := unix.Open(name, flags|unix.O_CLOEXEC, 0o644)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return &osFile{fd: fd, name: name, fdOverride: -1}, nil
	}
}

// ioFd is the descriptor I/O goes to.
func (f *osFile) ioFd() int {
	if f.fdOverride >= 0 {
		return f.fdOverride
	}
	return f.fd
}

// ReadAt reads len(p) bytes at off; io.EOF when the file ends first.
func (f *osFile) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pread(f.ioFd(), p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, &os.PathError{Op: "pread", Path: f.name, Err: err}
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// WriteAt writes all of p at off.
func (f *osFile) WriteAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pwrite(f.ioFd(), p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, &os.PathError{Op: "pwrite", Path: f.name, Err: err}
		}
		if m == 0 {
			return n, &os.PathError{Op: "pwrite", Path: f.name, Err: io.ErrShortWrite}
		}
		n += m
	}
	return n, nil
}

// Sync flushes the file (fsync: portable, and a superset of fdatasync).
func (f *osFile) Sync() error {
	if err := unix.Fsync(f.ioFd()); err != nil {
		return &os.PathError{Op: "fsync", Path: f.name, Err: err}
	}
	return nil
}

// Truncate sets the size.
func (f *osFile) Truncate(size int64) error {
	if err := unix.Ftruncate(f.ioFd(), size); err != nil {
		return &os.PathError{Op: "ftruncate", Path: f.name, Err: err}
	}
	return nil
}

// Preallocate is not needed by the suite.
func (f *osFile) Preallocate(off, length int64, keepSize bool) error {
	return errors.ErrUnsupported
}

// Size returns the file size.
func (f *osFile) Size() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.ioFd(), &st); err != nil {
		return 0, &os.PathError{Op: "fstat", Path: f.name, Err: err}
	}
	return st.Size, nil
}

// Fd returns the descriptor (or the override).
func (f *osFile) Fd() uintptr { return uintptr(f.ioFd()) }

// Name returns the path.
func (f *osFile) Name() string { return f.name }

// Close closes the real descriptor (never the override).
func (f *osFile) Close() error {
	if f.fd < 0 {
		return os.ErrClosed
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

// closedFd returns a descriptor number that is not open in this process:
// a high number (the kernel hands out the lowest free one, so it is not
// reused by unrelated opens) confirmed free with fcntl.
func closedFd() (int, error) {
	for fd := 4000; fd < 4100; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == unix.EBADF {
			return fd, nil
		}
	}
	return -1, errors.New("enginetest: no free descriptor number in 4000..4099")
}
