package vfs

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// OS returns the operating-system file system. Its files are raw
// descriptors opened with unix.Open, not *os.File: no finalizer can close a
// descriptor that an asynchronous engine is still writing through, and Fd
// never switches the descriptor to blocking mode.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return openOS(name, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC, "create")
}

func (osFS) OpenReadWrite(name string) (File, error) {
	return openOS(name, unix.O_RDWR, "open")
}

func (osFS) Open(name string) (File, error) {
	return openOS(name, unix.O_RDONLY, "open")
}

func openOS(name string, flags int, op string) (File, error) {
	for {
		fd, err := unix.Open(name, flags|unix.O_CLOEXEC, 0o644)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: op, Path: name, Err: err}
		}
		return &osFile{fd: fd, name: name}, nil
	}
}

func (osFS) Remove(name string) error                 { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error     { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, p os.FileMode) error { return os.MkdirAll(dir, p) }
func (osFS) Stat(name string) (os.FileInfo, error)    { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	fd, err := unix.Open(filepath.Clean(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

// SyncFS calls syncfs(2) once for each file system among dirs (a stat
// each, and an open only for a file system not synced yet: a node passes
// every partition's directory).
func (osFS) SyncFS(dirs ...string) error {
	synced := map[uint64]bool{}
	for _, dir := range dirs {
		dir = filepath.Clean(dir)
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return &os.PathError{Op: "stat", Path: dir, Err: err}
		}
		if synced[st.Dev] {
			continue
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: dir, Err: err}
		}
		err = unix.Syncfs(fd)
		unix.Close(fd)
		if err != nil {
			return &os.PathError{Op: "syncfs", Path: dir, Err: err}
		}
		synced[st.Dev] = true
	}
	return nil
}

// osFile is a raw descriptor. ReadAt may run concurrently with anything;
// every other method is used by one goroutine at a time (vfs.File).
type osFile struct {
	fd     int
	name   string
	closed atomic.Bool
}

func (f *osFile) pathErr(op string, err error) error {
	return &os.PathError{Op: op, Path: f.name, Err: err}
}

// ReadAt reads len(p) bytes at off, looping over short reads; io.EOF when
// the file ends first.
func (f *osFile) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pread(f.fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, f.pathErr("pread", err)
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// WriteAt writes all of p at off, looping over short writes. A write that
// stops early returns the bytes written and the error (ENOSPC typically).
func (f *osFile) WriteAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pwrite(f.fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, f.pathErr("pwrite", err)
		}
		if m == 0 {
			return n, f.pathErr("pwrite", io.ErrShortWrite)
		}
		n += m
	}
	return n, nil
}

func (f *osFile) Sync() error {
	for {
		err := unix.Fdatasync(f.fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return f.pathErr("fdatasync", err)
		}
		return nil
	}
}

func (f *osFile) Truncate(size int64) error {
	if err := unix.Ftruncate(f.fd, size); err != nil {
		return f.pathErr("ftruncate", err)
	}
	return nil
}

func (f *osFile) Preallocate(off, length int64, keepSize bool) error {
	mode := uint32(0)
	if keepSize {
		mode = unix.FALLOC_FL_KEEP_SIZE
	}
	for {
		err := unix.Fallocate(f.fd, mode, off, length)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return f.pathErr("fallocate", err)
		}
		return nil
	}
}

func (f *osFile) Size() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return 0, f.pathErr("fstat", err)
	}
	return st.Size, nil
}

func (f *osFile) Fd() uintptr  { return uintptr(f.fd) }
func (f *osFile) Name() string { return f.name }

// Close closes the descriptor once; a second Close returns os.ErrClosed.
func (f *osFile) Close() error {
	if f.closed.Swap(true) {
		return f.pathErr("close", os.ErrClosed)
	}
	if err := unix.Close(f.fd); err != nil {
		return f.pathErr("close", err)
	}
	return nil
}

// FdBacked reports that every file of the OS file system has a real
// descriptor (see FdBacked).
func (osFS) FdBacked() bool { return true }

// FdBacked reports whether fsys hands out files with operating-system
// descriptors (so io_uring and sendfile can use them): true for OS(), and
// for any FS with a method FdBacked() bool that returns true.
func FdBacked(fsys FS) bool {
	fb, ok := fsys.(interface{ FdBacked() bool })
	return ok && fb.FdBacked()
}
