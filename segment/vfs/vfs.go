// Package vfs is the file-system seam of the log: every file access the
// segment package makes goes through FS and File, so tests can substitute an
// in-memory file system that crashes (loses unsynced bytes, tears the last
// write) and injects errors (ENOSPC, EIO on write or sync).
//
// The interfaces in this file are a contract shared by the segment package
// and the write engines (the pwrite engine in segment, the io_uring engine in
// netio/uring). Change them only together with every implementation.
package vfs

import (
	"io"
	"os"
)

// InvalidFd is what File.Fd returns for a file that has no operating-system
// descriptor (an in-memory file). Engines that need a descriptor (io_uring,
// sendfile) must refuse such files and callers fall back to ReadAt/WriteAt.
const InvalidFd = ^uintptr(0)

// File is an open file. A File is used by one goroutine at a time except
// ReadAt, which may run concurrently with other ReadAt calls.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer

	// Sync makes the file's data and size durable (fdatasync semantics).
	// After Sync returns an error the file's durable contents are unknown:
	// callers must not retry and treat earlier writes as durable.
	Sync() error
	// Truncate sets the file size.
	Truncate(size int64) error
	// Preallocate reserves length bytes at off. When keepSize is false the
	// file size grows to cover the range (the new bytes read as zeros).
	Preallocate(off, length int64, keepSize bool) error
	// Size returns the current file size in bytes.
	Size() (int64, error)
	// Fd returns the operating-system descriptor, or InvalidFd.
	Fd() uintptr
	// Name returns the path the file was opened with.
	Name() string
}

// FS is a file system. Paths are slash-separated OS paths.
type FS interface {
	// Create creates or truncates name for reading and writing.
	Create(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of the entries in dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes dir's entries (creations, removals, renames) durable.
	SyncDir(dir string) error
	// SyncFS makes durable everything written so far on the file systems
	// that hold dirs: every file's data and size and every directory's
	// entries (syncfs(2) once per file system). One call replaces a sync
	// per file when many files were written together.
	SyncFS(dirs ...string) error
}
