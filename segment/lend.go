package segment

import (
	"github.com/corestream/corestream/segment/batch"
)

// Lend lends the log the memory of the batch being appended, so that the
// log writes the batch from where it lies instead of copying it into its
// write buffer (AppendLeaderCheckedLent). The log calls it at most once,
// and only once it has decided to write the batch in place; it returns
// the function the log then calls exactly once, on the log's goroutine,
// when it no longer needs the memory: when the write's completion retires
// (succeeded or not), or when a rewind, a failure or a close drops it.
// Until then the memory must stay alive and unchanged. A nil release
// says the memory cannot be lent after all: the log copies the batch.
//
// Lend lets a caller lend only what it must: a batch the log copies
// (below InPlaceBytesMin, under FsyncAlways, or on an error) costs the
// caller nothing, and the caller owes no release for it.
type Lend func() (release func())

// InPlaceBytesMin is the smallest batch AppendLeaderCheckedLent writes in
// place: below it the write of its own costs more CPU than the copy it
// saves (BenchmarkAppendLent, io_uring, four batches per flush, process
// CPU per batch copied/lent: 16 KiB 5.2/7.0 us, 32 KiB 9.3/10.7 us,
// 48 KiB 19.3/17.8 us, 64 KiB 24-45/20-21 us on a loaded 2-core VM).
const InPlaceBytesMin = 48 << 10

// AppendLeaderCheckedLent is AppendLeaderChecked for a batch whose memory
// the caller can lend (lend): a batch of at least InPlaceBytesMin is
// written to the file straight from b, in a write of its own, and b is
// stamped with its base offset and epoch in place (those fields lie
// outside the CRC, so it stays valid). What the log had coalesced before
// is submitted first, so the file keeps the append order. Nothing else
// changes: the batch is written on the next Flush of the IO and is
// durable when DurableOffset reaches last.
//
// Under FsyncAlways the batch is copied: there every write carries its
// fdatasync, and one write per batch would cost a sync per batch where
// the copy path shares one among every batch of the loop's iteration.
//
// Errors are AppendLeaderChecked's. On error nothing is appended and lend
// has not been called, or its release has been.
func (l *Log) AppendLeaderCheckedLent(b []byte, epoch int32, lend Lend) (base, last int64, err error) {
	if lend == nil || len(b) < InPlaceBytesMin || l.cfg.Fsync == FsyncAlways {
		return l.AppendLeaderChecked(b, epoch)
	}
	if len(l.chains)+1 >= l.cfg.ChainsInFlight && !l.io.delivering {
		// io_uring makes a write of this size at once (its inline
		// writes) and reports it at the next reap: reaping without
		// waiting frees the slots of those already done, where the
		// batch would otherwise be copied. (As an append that waits for
		// a slot does, this may deliver notifications; it runs before
		// anything of this append is decided.)
		_, _ = l.io.Poll()
	}
	h, err := l.checkedLeaderBatch(b)
	if err != nil {
		return 0, 0, err
	}
	return l.appendValidated(b, h, epoch, lend)
}

// writeInPlace queues one write of b, at the active segment's end, after
// submitting the write buffer, and enters the batch in the bookkeeping.
// It reports false, having changed nothing but the submitted buffer, when
// lend gives no release or no write slot is free (ChainsInFlight): then
// the batch is copied. REQUIRES: the active segment has room (maybeRoll).
func (l *Log) writeInPlace(b []byte, h *batch.Header, base int64, epoch int32, lend Lend) (bool, error) {
	slots := l.cfg.ChainsInFlight - len(l.chains)
	if l.cur != nil {
		slots--
	}
	if slots < 1 {
		// No write slot for the buffer and this batch without waiting
		// for the disk: copying costs less than stalling the shard, and
		// it bounds what the log holds of its callers' memory.
		return false, nil
	}
	if l.cur != nil {
		// Order: the batches coalesced so far go to the file first.
		l.submitCur(false)
	}
	s := l.active()
	pos, n := s.size, len(b)
	l.awaitZeros(s, pos, pos+int64(n))
	if err := l.appendable(); err != nil {
		return false, err
	}
	if l.leo != base {
		// The wait went through a rewind (ENOSPC): base is no longer
		// the end, and the rewind's cause is the answer.
		return false, l.lastFailure
	}
	release := lend()
	if release == nil {
		return false, nil
	}
	batch.SetBaseOffset(b, l.tab.EndUser())
	batch.SetPartitionLeaderEpoch(b, epoch)
	// The bookkeeping first: it may start zero-fill writes ahead of the
	// segment's new end, never over [pos, pos+n).
	l.account(s, h, base, n)
	l.startWrite(s, &wbuf{mem: b, n: n, class: -1, release: release}, pos, base, l.leo-1, false)
	return true, nil
}
