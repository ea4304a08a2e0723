//go:build linux

package uring

import "unsafe"

// The kernel ABI of io_uring (include/uapi/linux/io_uring.h), the subset this
// package uses. These values and layouts are fixed by the kernel and must
// never change here; the init function below checks the struct sizes.

// Opcodes (enum io_uring_op).
const (
	opNop     = 0  // IORING_OP_NOP (5.1)
	opFsync   = 3  // IORING_OP_FSYNC (5.1)
	opPollAdd = 6  // IORING_OP_POLL_ADD (5.1)
	opWrite   = 23 // IORING_OP_WRITE (5.6)
)

// SQE flags (IOSQE_*).
const (
	// SQEIOLink makes the next SQE of the same submission start only after
	// this one completes successfully (IOSQE_IO_LINK). A failed or short
	// result cancels the rest of the chain: their CQEs carry -ECANCELED.
	SQEIOLink = 1 << 2
)

// Setup flags (IORING_SETUP_*).
const (
	setupCQSize       = 1 << 3  // IORING_SETUP_CQSIZE: cq_entries is ours (5.5)
	setupClamp        = 1 << 4  // IORING_SETUP_CLAMP: clamp sizes instead of EINVAL (5.6)
	setupSingleIssuer = 1 << 12 // IORING_SETUP_SINGLE_ISSUER (6.0)
)

// Feature flags reported in params.features (IORING_FEAT_*).
const (
	featSingleMmap = 1 << 0 // one mmap covers both rings (5.4)
	featNoDrop     = 1 << 1 // CQEs are never dropped on CQ overflow (5.5)
)

// SQ ring flags (IORING_SQ_*), in the word at sqOff.flags.
const (
	sqCQOverflow = 1 << 1 // completions wait in the kernel's overflow list
)

// mmap offsets (IORING_OFF_*).
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// io_uring_enter flags.
const (
	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS
)

// io_uring_register opcodes.
const (
	registerEventfd   = 4  // IORING_REGISTER_EVENTFD
	unregisterEventfd = 5  // IORING_UNREGISTER_EVENTFD
	registerProbe     = 8  // IORING_REGISTER_PROBE (5.6)
	registerIOWQAff   = 17 // IORING_REGISTER_IOWQ_AFF (5.14)
	registerIOWQMax   = 19 // IORING_REGISTER_IOWQ_MAX_WORKERS (5.15)
)

// FsyncDatasync asks IORING_OP_FSYNC for fdatasync semantics
// (IORING_FSYNC_DATASYNC).
const FsyncDatasync = 1 << 0

// probeOpSupported marks a supported opcode in a probe (IO_URING_OP_SUPPORTED).
const probeOpSupported = 1 << 0

// sqringOffsets is struct io_sqring_offsets.
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets.
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params, filled in by io_uring_setup.
type params struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	sqOff        sqringOffsets
	cqOff        cqringOffsets
}

// probeOp is struct io_uring_probe_op.
type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16
	resv2 uint32
}

// probeOpsMax is the number of opcodes a probe asks about (the ABI's limit).
const probeOpsMax = 256

// probe is struct io_uring_probe with room for probeOpsMax entries.
type probe struct {
	lastOp uint8
	opsLen uint8
	resv   uint16
	resv2  [3]uint32
	ops    [probeOpsMax]probeOp
}

func init() {
	// Layout assertions: a mismatch here would corrupt kernel memory, so
	// fail loudly at start-up rather than at the first submission.
	if unsafe.Sizeof(SQE{}) != 64 || unsafe.Sizeof(CQE{}) != 16 ||
		unsafe.Sizeof(params{}) != 120 || unsafe.Sizeof(probeOp{}) != 8 ||
		unsafe.Offsetof(probe{}.ops) != 16 {
		panic("uring: kernel ABI struct layout mismatch")
	}
}
