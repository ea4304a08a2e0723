//go:build linux

package uring

import (
	"io"
	"runtime"
	"syscall"

	"github.com/corestream/corestream/segment/vfs"
)

// Limits on one operation's submissions.
const (
	// pieceBytesMax is the largest write one SQE carries. The kernel caps a
	// single write at MAX_RW_COUNT (2 GiB - 4 KiB) and the SQE length field
	// is 32 bits; larger buffers are written as consecutive pieces.
	pieceBytesMax = 1 << 30
	// shortWritesMax bounds how many short completions one operation may
	// see before it fails with io.ErrShortWrite. Each resubmission must make
	// progress; a zero-byte result fails at once.
	shortWritesMax = 16
)

// SQE roles, the low two bits of user_data.
const (
	roleWrite = 1
	roleSync  = 2
)

// op is one Engine operation (a Write, possibly with its fdatasync, or a lone
// Sync) in its slot of the Engine's table. Its methods are the pure part of
// the engine: they turn CQE results into "submit this piece next" or "done
// with this error", and are table-tested without a kernel.
type op struct {
	token uint64
	// file keeps the vfs.File (and any finalizer-bearing *os.File behind
	// it) reachable while the kernel holds its descriptor.
	file vfs.File
	fd   int
	// buf is the caller's buffer; referenced (and pinned) until settled.
	buf    []byte
	pinner runtime.Pinner
	off    int64 // file offset of buf[0]
	write  bool  // false: a lone fdatasync
	sync   bool  // an fdatasync follows the last byte written
	gen    uint32
	limit  int // piece size limit in bytes (pieceBytesMax unless testing)

	// Progress. Invariant: 0 <= done <= len(buf); pending <= 2.
	done      int   // bytes of buf written by completed pieces
	pieceLen  int   // bytes the in-flight write piece carries
	pieceSync bool  // the in-flight submission has a linked fdatasync
	pending   int   // CQEs of the in-flight submission not yet seen
	writeRes  int32 // result of the in-flight write piece
	syncRes   int32 // result of the in-flight fdatasync
	shorts    int   // short write completions so far
}

// piece describes the next submission of o: a write of buf[done:done+n]
// at off+done (when o.write), followed by a linked fdatasync when sync.
func (o *op) nextPiece() (n int, sync bool) {
	if !o.write {
		return 0, true
	}
	n = len(o.buf) - o.done
	if n > o.limit {
		n = o.limit
	}
	return n, o.sync && o.done+n == len(o.buf)
}

// start records that the next piece was prepared for submission.
func (o *op) start(n int, sync bool) {
	o.pieceLen, o.pieceSync = n, sync
	o.writeRes, o.syncRes = 0, 0
	o.pending = 0
	if o.write {
		o.pending++
	}
	if sync {
		o.pending++
	}
}

// record notes one CQE of the in-flight submission and reports whether it
// was the last one.
// REQUIRES: o.pending > 0 and role matches an SQE of the submission.
func (o *op) record(role int, res int32) bool {
	if role == roleWrite {
		o.writeRes = res
	} else {
		o.syncRes = res
	}
	o.pending--
	return o.pending == 0
}

// settle decides, after every CQE of a submission arrived, whether o is done
// (and with which error) or needs another submission (a short write's
// remainder, or the next piece of a large buffer).
//
// A failed fdatasync is reported as a *vfs.SyncError wrapping an *OpError.
// A linked fdatasync whose write was short or failed was cancelled by the
// kernel (-ECANCELED) and did not run: it is ignored, never counted as a
// sync, and the resubmitted remainder carries a new one.
func (o *op) settle() (done bool, err error) {
	if o.write {
		res := o.writeRes
		if res < 0 {
			return true, o.opError("write", syscall.Errno(-res))
		}
		o.done += int(res)
		if int(res) < o.pieceLen {
			o.shorts++
			if res == 0 || o.shorts > shortWritesMax {
				return true, o.opError("write", io.ErrShortWrite)
			}
			return false, nil
		}
		if o.done < len(o.buf) {
			return false, nil // next piece of a large buffer
		}
	}
	if o.pieceSync && o.syncRes < 0 {
		// Wrapped so the log never mistakes a failed sync (even one that
		// says ENOSPC) for a write that can be retried: vfs.SyncError.
		return true, &vfs.SyncError{Err: o.opError("fdatasync", syscall.Errno(-o.syncRes))}
	}
	return true, nil
}

// opError builds the error reported for o.
func (o *op) opError(what string, cause error) error {
	e := &OpError{Op: what, Err: cause}
	if o.file != nil {
		e.Path = o.file.Name()
	}
	if what == "write" {
		e.Off = o.off + int64(o.done)
	}
	return e
}

// reset drops every reference o holds so the slot can be reused and the
// buffer and file can be collected.
func (o *op) reset() {
	o.pinner.Unpin()
	*o = op{gen: o.gen, pinner: o.pinner} // keep the Pinner's storage for reuse
}
