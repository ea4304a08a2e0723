//go:build linux

package uring

import "unsafe"

// SQE is a submission queue entry (struct io_uring_sqe, 64 bytes). It lives
// in memory shared with the kernel; obtain one with Ring.GetSQE, fill it with
// one Prep method and optionally SetFlags/SetUserData, then Ring.Submit.
type SQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32 // rw_flags, fsync_flags, poll32_events, ...
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad2        uint64
}

// CQE is a completion queue entry (struct io_uring_cqe, 16 bytes).
type CQE struct {
	// UserData is the SQE's user data, returned unchanged.
	UserData uint64
	// Res is the operation's result: bytes for a write, 0 for fsync and
	// nop, the ready events for poll, or a negated errno.
	Res int32
	// Flags are IORING_CQE_F_* flags (unused by this package).
	Flags uint32
}

// PrepNop makes the entry a no-op that completes with Res 0.
func (s *SQE) PrepNop() {
	*s = SQE{opcode: opNop}
}

// PrepWrite makes the entry a write of buf at off in fd (pwrite semantics).
// REQUIRES: buf stays referenced, unmodified and unmoved (heap memory pinned
// with runtime.Pinner, or memory from mmap) until the entry's CQE is reaped.
// REQUIRES: len(buf) <= math.MaxUint32.
func (s *SQE) PrepWrite(fd int, buf []byte, off int64) {
	var addr uint64
	if len(buf) > 0 {
		addr = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	*s = SQE{opcode: opWrite, fd: int32(fd), off: uint64(off), addr: addr, len: uint32(len(buf))}
}

// PrepFsync makes the entry an fsync of fd; flags is 0 (fsync) or
// FsyncDatasync (fdatasync).
func (s *SQE) PrepFsync(fd int, flags uint32) {
	*s = SQE{opcode: opFsync, fd: int32(fd), opFlags: flags}
}

// PrepPollAdd makes the entry a one-shot poll of fd for events (POLLIN, ...);
// it completes with the ready events in Res. A shard can use it to have an
// eventfd (its inbox) complete into the same ring it waits on.
func (s *SQE) PrepPollAdd(fd int, events uint32) {
	if bigEndian {
		// poll32_events is stored word-reversed on big-endian machines.
		events = events<<16 | events>>16
	}
	*s = SQE{opcode: opPollAdd, fd: int32(fd), opFlags: events}
}

// bigEndian reports the machine's byte order, for poll32_events.
var bigEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 0
}()

// SetFlags sets IOSQE_* flags (SQEIOLink).
func (s *SQE) SetFlags(flags uint8) { s.flags = flags }

// SetUserData sets the value the entry's CQE carries back.
func (s *SQE) SetUserData(v uint64) { s.userData = v }
