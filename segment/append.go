package segment

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// AppendLeader appends one batch as the partition's leader: it validates b
// (batch.Validate), stamps the base offset (the log end offset) and epoch
// into the log's copy (b itself is not modified), and returns the offsets
// assigned. The batch is copied into the log's write buffer; it reaches
// the file on the next Flush of the IO (or sooner, when the buffer fills),
// and is durable when DurableOffset reaches last.
//
// Errors: ErrInvalidBatch, ErrBatchTooLarge, ErrStaleEpoch (epoch below the
// last epoch, or negative), ErrNoSpace while a rewind is pending,
// ErrLogFailed, ErrClosed, or a file-system error from rolling a segment or
// persisting a new epoch. On error nothing is appended.
func (l *Log) AppendLeader(b []byte, epoch int32) (base, last int64, err error) {
	if err := l.appendable(); err != nil {
		return 0, 0, err
	}
	if err := l.dropMarkersFrom(l.leo); err != nil {
		return 0, 0, err
	}
	return l.appendLeader(b, epoch)
}

// AppendLeaderChecked is AppendLeader for a batch the caller has just
// validated with batch.Validate or batch.ValidateRecords and not changed
// since: it checks everything AppendLeader does but the CRC-32C, which the
// produce path would otherwise compute twice per batch. A batch from
// anywhere else (a replica's network, a file) goes through AppendLeader.
func (l *Log) AppendLeaderChecked(b []byte, epoch int32) (base, last int64, err error) {
	h, err := l.checkedLeaderBatch(b)
	if err != nil {
		return 0, 0, err
	}
	return l.appendValidated(b, h, epoch, nil)
}

// checkedLeaderBatch is the part of AppendLeaderChecked before the batch
// is placed: the log must take appends, markers above its end go, and b
// must be a whole batch (its CRC already checked by the caller).
func (l *Log) checkedLeaderBatch(b []byte) (batch.Header, error) {
	if err := l.appendable(); err != nil {
		return batch.Header{}, err
	}
	if err := l.dropMarkersFrom(l.leo); err != nil {
		return batch.Header{}, err
	}
	return l.validateChecked(b)
}

// appendLeader is AppendLeader after the marker check.
func (l *Log) appendLeader(b []byte, epoch int32) (base, last int64, err error) {
	h, err := l.validate(b)
	if err != nil {
		return 0, 0, err
	}
	return l.appendValidated(b, h, epoch, nil)
}

// appendValidated is appendLeader after the batch's validation. With lend
// set the batch may be written from b itself (writeInPlace); otherwise,
// or when that declines, it is copied into the write buffer.
func (l *Log) appendValidated(b []byte, h batch.Header, epoch int32, lend Lend) (base, last int64, err error) {
	if epoch < 0 || epoch < l.epochs.last() {
		return 0, 0, fmt.Errorf("%w: epoch %d after %d", ErrStaleEpoch, epoch, l.epochs.last())
	}
	if err := l.maybeRoll(len(b), rwidth(&h)-1); err != nil {
		return 0, 0, err
	}
	base = l.leo
	if err := l.noteEpoch(epoch, base); err != nil {
		return 0, 0, err
	}
	lent := false
	if lend != nil {
		lent, err = l.writeInPlace(b, &h, base, epoch, lend)
	}
	if err == nil && !lent {
		err = l.copyIn(b, &h, base, epoch, true)
	}
	if err != nil {
		if l.leo < base {
			// A rewind in a wait moved the end back below base, past
			// the epoch noted for this batch: the epochs end with it.
			l.epochs.truncateFromEnd(l.leo)
		}
		return 0, 0, err
	}
	return base, rlast(&h, base), nil
}

// AppendFollower appends batches replicated from the leader, unchanged. b
// holds one or more whole batches; each must validate, the first must start
// at the log end offset and each the next offset after the previous one
// (ErrNotContiguous), and epochs must never decrease (ErrStaleEpoch). All of
// b is checked before anything is appended. If rolling a segment or
// persisting an epoch then fails, the batches before the failing one stay
// appended and LogEndOffset says where to resume.
func (l *Log) AppendFollower(b []byte) error {
	if err := l.appendable(); err != nil {
		return err
	}
	if err := l.dropMarkersFrom(l.leo); err != nil {
		return err
	}
	next, epoch := l.tab.EndUser(), l.epochs.last()
	for rest := b; len(rest) > 0; {
		h, err := batch.ReadHeader(rest)
		if err != nil || h.Size() > len(rest) {
			if err == nil {
				err = batch.ErrShort
			}
			return fmt.Errorf("%w: at byte %d: %w", ErrInvalidBatch, len(b)-len(rest), err)
		}
		if _, err := l.validate(rest[:h.Size()]); err != nil {
			return err
		}
		if h.BaseOffset != next {
			return fmt.Errorf("%w: base offset %d, want %d", ErrNotContiguous, h.BaseOffset, next)
		}
		if h.PartitionLeaderEpoch < 0 || h.PartitionLeaderEpoch < epoch {
			return fmt.Errorf("%w: epoch %d after %d", ErrStaleEpoch, h.PartitionLeaderEpoch, epoch)
		}
		next, epoch = h.LastOffset()+1, h.PartitionLeaderEpoch // user offsets
		rest = rest[h.Size():]
	}
	for len(b) > 0 {
		h, _ := batch.ReadHeader(b)
		n := h.Size()
		if err := l.maybeRoll(n, rwidth(&h)-1); err != nil {
			return err
		}
		if h.BaseOffset != l.tab.EndUser() {
			// A rewind during the roll moved the end.
			return fmt.Errorf("%w: base offset %d, want %d", ErrNotContiguous, h.BaseOffset, l.tab.EndUser())
		}
		if err := l.noteEpoch(h.PartitionLeaderEpoch, l.leo); err != nil {
			return err
		}
		if err := l.copyIn(b[:n], &h, l.leo, h.PartitionLeaderEpoch, false); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (l *Log) appendable() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.stall != nil {
		return l.stall.cause
	}
	return nil
}

func (l *Log) validate(b []byte) (batch.Header, error) { return l.validateWith(b, batch.Validate) }

// validateChecked is validate without the CRC (AppendLeaderChecked).
func (l *Log) validateChecked(b []byte) (batch.Header, error) {
	return l.validateWith(b, batch.ValidateChecked)
}

func (l *Log) validateWith(b []byte, check func([]byte) (batch.Header, error)) (batch.Header, error) {
	if len(b) > l.cfg.BatchBytesMax {
		return batch.Header{}, fmt.Errorf("%w: %d bytes, at most %d", ErrBatchTooLarge, len(b), l.cfg.BatchBytesMax)
	}
	h, err := check(b)
	if err != nil {
		return h, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	return h, nil
}

// noteEpoch records a new epoch starting at the batch that carries it.
// The checkpoint is written later, when the active segment rolls or the
// log closes: until then the epoch starts in the active segment, whose
// batch headers an unclean start scans anyway, and the scan recovers it.
// (Written here, with its create, fsync, rename and directory sync, it
// was most of the CPU of a node electing primaries for thousands of new
// partitions: one write per partition per new primary.)
func (l *Log) noteEpoch(epoch int32, start int64) error {
	if epoch == l.epochs.last() {
		return nil
	}
	l.epochs.assign(epoch, start)
	l.epochsDirty = true
	return nil
}

// copyIn appends one validated batch to the write buffer and the active
// segment's bookkeeping. REQUIRES: the active segment has room (maybeRoll).
func (l *Log) copyIn(b []byte, h *batch.Header, base int64, epoch int32, stamp bool) error {
	n := len(b)
	if l.cur != nil && l.cur.free() < n {
		l.bufClass = min(l.bufClass+1, classFor(l.cfg.WriteBufferBytes))
		l.submitCur(false)
		if err := l.appendable(); err != nil {
			// The wait for a free write slot met a failure.
			return err
		}
		if l.leo != base {
			// The wait went through a rewind (a write found no space,
			// and the log end moved back): base is no longer the end,
			// and the rewind's cause is the answer.
			return l.lastFailure
		}
	}
	s := l.active()
	if l.cur == nil {
		if err := l.newBuffer(n); err != nil {
			return err
		}
	}
	dst := l.cur.mem[l.cur.n : l.cur.n+n]
	copy(dst, b)
	if stamp {
		batch.SetBaseOffset(dst, l.tab.EndUser())
		batch.SetPartitionLeaderEpoch(dst, epoch)
	}
	l.cur.n += n
	l.account(s, h, base, n)
	l.io.markDirty(l)
	if l.cur.free() == 0 || l.cur.n >= l.cfg.WriteBufferBytes {
		// Full before the iteration ended: the next buffer may be larger,
		// and this one goes to the kernel now rather than at Flush.
		l.bufClass = min(l.bufClass+1, classFor(l.cfg.WriteBufferBytes))
		l.submitCur(false)
		if err := l.io.submit(); err != nil {
			l.poison(err)
		}
	}
	return nil
}

// account enters one batch of n bytes at base, appended at the active
// segment s's end, in the segment's and the log's bookkeeping.
func (l *Log) account(s *segment, h *batch.Header, base int64, n int) {
	if s.empty() {
		s.rollAtMs = l.cfg.NowMs()
	}
	s.idx.add(uint32(base-s.base), s.size, n, h.MaxTimestamp, l.cfg.IndexIntervalBytes)
	s.size += int64(n)
	s.last = rlast(h, base)
	l.leo = s.last + 1
	l.tabAppend(h, base)
	l.unsyncedRecords += int64(h.RecordCount)
	l.preallocate(s)
	if l.cfg.Fsync == FsyncInterval {
		l.io.markLagging(l)
	}
}

// newBuffer starts a buffer for appends at the active segment's end.
func (l *Log) newBuffer(need int) error {
	class := max(l.bufClass, classFor(need))
	b, err := l.io.pool.get(class)
	if err != nil {
		return fmt.Errorf("segment: map a %d-byte write buffer: %w", classBytes(class), err)
	}
	s := l.active()
	l.cur, l.curPos, l.curFirst = b, s.size, l.leo
	return nil
}

// maybeRoll rolls the active segment when a batch of size bytes and
// lastDelta would not fit, or the segment is old enough.
func (l *Log) maybeRoll(size int, lastDelta int64) error {
	s := l.active()
	if s.empty() {
		return nil
	}
	full := s.size+int64(size) > l.cfg.SegmentBytes || l.leo+lastDelta-s.base > maxRel
	old := l.cfg.SegmentMs > 0 && l.cfg.NowMs()-s.rollAtMs >= l.cfg.SegmentMs
	if !full && !old {
		return nil
	}
	return l.roll()
}

// roll seals the active segment and starts a new one at the log end.
// Sealing waits for the log's writes, trims the preallocated space, syncs
// the file (under every policy: a sealed segment is always durable) and
// writes its index files; the new segment's creation syncs the directory.
//
// Under the policies other than always, with an IO whose engine signals
// completions, everything of the seal that waits on the disk runs on the
// IO's background worker (see background): the trim, the fdatasync, the
// index files and, under never, the directory sync that makes the new
// segment's name durable. The shard's thread only creates the new file.
func (l *Log) roll() error {
	if err := l.drainAll(); err != nil {
		return err
	}
	s := l.active()
	async := l.cfg.Fsync != FsyncAlways && l.io.bg != nil && vfs.FdBacked(l.fs)
	if !async {
		if err := s.file.f.Truncate(s.size); err != nil {
			return err
		}
	}
	s.preallocEnd = s.size
	if l.cfg.Fsync == FsyncAlways {
		// Every write already carried its fdatasync: this one is cheap.
		if err := s.file.f.Sync(); err != nil {
			l.poison(err)
			return l.failed
		}
		l.durable = l.written
		if err := l.writeIndexFiles(s); err != nil {
			return err
		}
	}
	if l.epochsDirty {
		// Epochs that start in the segment being sealed: the next unclean
		// start scans only the new active segment.
		if err := l.persistEpochs(); err != nil {
			return err
		}
	}
	// Under never the seal's worker job syncs the directory after the
	// new file exists; the other policies promise durability by time or
	// count, so their new segment's name is made durable here.
	ns, err := l.createSegment(l.leo, !async || l.cfg.Fsync != FsyncNever)
	if err != nil {
		return err
	}
	if l.cfg.Fsync != FsyncAlways {
		// Under the other policies the segment may hold a gigabyte of
		// dirty page cache: syncing it here would stall every partition
		// of the shard. The sync goes to the engine (or the worker)
		// instead, and the index files — the mark that a sealed segment
		// is whole on disk (recovery scans the last sealed segment
		// without them) — are written when it completes. drainAll above
		// waited for the previous seal, so at most one is in flight.
		o := l.io.newOp()
		*o = op{log: l, file: s.file, seg: s, standalone: true, covers: l.written, seal: true}
		s.sealing = true
		s.file.acquire()
		l.syncsInFlight++
		if async {
			o.indexed = true
			l.io.startBackground(o, l.sealJob(s, l.cfg.Fsync == FsyncNever))
		} else {
			l.io.start(o)
		}
	}
	s.sealed = true
	l.segs = append(l.segs, ns)
	return nil
}

// sealJob returns the background part of sealing s: trim the preallocated
// tail, fdatasync, sync the directory when syncDir, then write the index
// files. It touches only the file system and what it captured now, never
// the log.
func (l *Log) sealJob(s *segment, syncDir bool) func() error {
	f, size, fsys, dir, stats := s.file.f, s.size, l.fs, l.dir, &l.io.bgSyncs
	files := l.indexFiles(s)
	return func() error {
		if err := f.Truncate(size); err != nil {
			return &sealError{err: fmt.Errorf("trimming the sealed segment: %w", err)}
		}
		if err := timedSync(stats, f); err != nil {
			return &sealError{err: &vfs.SyncError{Err: err}}
		}
		if syncDir {
			if err := fsys.SyncDir(dir); err != nil {
				return &sealError{err: fmt.Errorf("syncing the directory: %w", err)}
			}
		}
		return writeFiles(fsys, files, true)
	}
}

// sealError is a background seal's failure before its index files: the
// segment's contents on disk are not known, so the log is poisoned. Any
// other error of the job is the index files' (recovery then scans).
type sealError struct{ err error }

func (e *sealError) Error() string { return e.err.Error() }
func (e *sealError) Unwrap() error { return e.err }

// drainAll submits the buffer and waits for every operation of the log.
// It returns the log's failure, or the cause of a rewind it went through.
func (l *Log) drainAll() error {
	before := l.lastFailure
	if l.cur != nil {
		l.submitCur(false)
	}
	if err := l.drain(); err != nil {
		return err
	}
	if err := l.usable(); err != nil {
		return err
	}
	if l.lastFailure != before {
		return l.lastFailure
	}
	return nil
}

// drain waits for every operation of the log in flight.
func (l *Log) drain() error {
	return l.io.waitFor(func() bool {
		return len(l.chains) == 0 && l.syncsInFlight == 0 && l.zerosInFlight == 0
	})
}

// syncDue says whether the next write must carry an fdatasync.
func (l *Log) syncDue() bool {
	switch l.cfg.Fsync {
	case FsyncAlways:
		return true
	case FsyncInterval:
		return l.cfg.NowMs()-l.lastSyncMs >= l.cfg.FsyncIntervalMs
	case FsyncMessages:
		return l.unsyncedRecords >= l.cfg.FsyncMessages
	}
	return false
}

// submitCur hands the buffer to the engine as one write, with its sync when
// forced or due. When the log has ChainsInFlight writes in flight it first
// waits for one to complete; a failure seen while waiting drops the submit
// (the failure handling owns the buffer's fate).
func (l *Log) submitCur(forceSync bool) {
	if len(l.chains) >= l.cfg.ChainsInFlight {
		_ = l.io.waitFor(func() bool { return len(l.chains) < l.cfg.ChainsInFlight })
	}
	if l.cur == nil || l.failed != nil || l.stall != nil {
		return
	}
	s := l.active()
	l.awaitZeros(s, l.curPos, l.curPos+int64(l.cur.n))
	if l.cur == nil || l.failed != nil || l.stall != nil {
		return
	}
	buf := l.cur
	l.cur = nil
	l.startWrite(s, buf, l.curPos, l.curFirst, l.leo-1, forceSync)
}

// startWrite hands the engine one write of buf at pos in the active
// segment s, carrying offsets first..last, with its sync when forced or
// due, and queues it on the log's chains. The write owns buf from here:
// its completion puts it back (complete).
func (l *Log) startWrite(s *segment, buf *wbuf, pos, first, last int64, forceSync bool) {
	o := l.io.newOp()
	*o = op{log: l, file: s.file, seg: s, buf: buf, pos: pos,
		first: first, last: last, coversAll: len(l.chains) == 0}
	o.sync = forceSync || l.syncDue()
	if o.sync {
		l.unsyncedRecords, l.lastSyncMs = 0, l.cfg.NowMs()
	}
	s.file.acquire()
	n := int64(buf.n)
	l.chains = append(l.chains, o)
	l.io.start(o)
	if !o.sync {
		l.writeback(n)
	}
}

// writeback counts n bytes submitted without a sync and, when
// Config.WritebackBytes is set, starts a background fdatasync every that
// many bytes (nothing waits for it). It bounds the dirty page cache a
// partition written at disk speed accumulates, at the price of page-cache
// speed: without it the kernel's writeback throttling can stall the shard's
// writes for hundreds of milliseconds once gigabytes are dirty (measured),
// with it appends run at disk speed. It does not count as a sync of the
// interval or messages policies (it covers only completed writes).
func (l *Log) writeback(n int64) {
	if l.cfg.WritebackBytes <= 0 {
		return
	}
	l.unsyncedBytes += n
	if l.unsyncedBytes < l.cfg.WritebackBytes || l.syncsInFlight > 0 || l.written < 0 {
		return
	}
	l.unsyncedBytes = 0
	o := l.io.newOp()
	s := l.active()
	*o = op{log: l, file: s.file, seg: s, standalone: true, covers: l.written}
	s.file.acquire()
	l.syncsInFlight++
	// [0, writtenSize) is written, so this sync covers it: what lies more
	// than CacheTailBytes behind can leave the page cache once synced.
	// (On an IO without a worker the engine's sync completes inside
	// Submit, and complete drops the range.)
	// The end is page-aligned: the kernel keeps a page the range only
	// partly covers, and the next range starts at this end.
	from, to := s.droppedEnd, (s.writtenSize-l.cfg.CacheTailBytes)&^int64(pageBytes-1)
	switch {
	case l.cfg.CacheTailBytes < 0 || to <= from || s.file.f.Fd() == vfs.InvalidFd:
		l.io.start(o)
	case l.io.bg == nil:
		s.droppedEnd, o.dropFrom, o.dropTo = to, from, to
		l.io.start(o)
	default:
		s.droppedEnd = to
		stats := &l.io.bgSyncs
		l.io.startBackground(o, func() error {
			if err := timedSync(stats, o.file.f); err != nil {
				return err
			}
			dropCached(o.file.f, from, to)
			return nil
		})
	}
}

// pageBytes is the page-cache page size.
var pageBytes = unix.Getpagesize()

// dropCached drops f's [from, to) from the page cache. It is advice: the
// kernel may keep a page (one being read, say), which costs memory, never
// data, so its error is not the log's.
func dropCached(f vfs.File, from, to int64) {
	_ = unix.Fadvise(int(f.Fd()), from, to-from, unix.FADV_DONTNEED)
}

// submitSync queues a standalone fdatasync of the active segment covering
// what is written now.
func (l *Log) submitSync() {
	o := l.io.newOp()
	s := l.active()
	*o = op{log: l, file: s.file, seg: s, standalone: true, covers: l.written}
	l.unsyncedRecords, l.lastSyncMs = 0, l.cfg.NowMs()
	s.file.acquire()
	l.syncsInFlight++
	l.io.start(o)
}

// flush is the log's part of IO.Flush: submit the buffer.
func (l *Log) flush() {
	if l.closed || l.failed != nil || l.stall != nil || l.cur == nil {
		return
	}
	if l.cur.n*4 < len(l.cur.mem) {
		l.bufClass = max(l.bufClass-1, 0)
	}
	l.submitCur(false)
}

// flushLagging is the log's part of IO.Flush under FsyncInterval: sync what
// is written once the interval has passed. It reports whether the log still
// has data that is not durable.
func (l *Log) flushLagging() bool {
	if l.closed || l.failed != nil {
		return false
	}
	if l.durable >= l.leo-1 {
		return false
	}
	if l.stall == nil && l.syncsInFlight == 0 && l.durable < l.written && l.syncDue() {
		l.submitSync()
	}
	return true
}

// Sync makes everything appended so far durable and waits for it, whatever
// the policy. It returns ErrNoSpace (after the rewind) or ErrLogFailed when
// that failed.
func (l *Log) Sync() error {
	if err := l.usable(); err != nil {
		return err
	}
	target := l.leo - 1
	before := l.lastFailure
	if l.cur != nil && l.stall == nil {
		l.submitCur(true)
	}
	if err := l.drain(); err != nil {
		return err
	}
	if l.failed == nil && l.durable < l.written {
		l.submitSync()
		if err := l.drain(); err != nil {
			return err
		}
	}
	if err := l.usable(); err != nil {
		return err
	}
	if l.lastFailure != before || l.durable < target {
		if l.lastFailure != nil {
			return l.lastFailure
		}
		return fmt.Errorf("%w: durable offset %d short of %d", ErrLogFailed, l.durable, target)
	}
	return nil
}

// complete handles one engine completion for this log.
func (l *Log) complete(o *op, err error) {
	pool := &l.io.pool
	if o.zero {
		l.zeroDone(o, err)
		return
	}
	if o.cleanup {
		if err != nil && !l.closed {
			// The log start is persisted, so the next open removes what
			// is left; the next ApplyRetention reports it.
			l.cleanupErr = err
		}
		l.io.freeOp(o)
		return
	}
	if o.standalone {
		l.syncsInFlight--
		if o.seal {
			o.seg.sealing = false
		}
		var indexErr error
		if o.indexed && err != nil && !errors.As(err, new(*sealError)) {
			indexErr, err = err, nil // the seal is durable; only its mark failed
		}
		switch {
		case errors.As(err, new(*sealError)):
			l.poison(fmt.Errorf("sealing segment %d: %w", o.seg.base, err))
		case err != nil:
			l.poison(fmt.Errorf("fdatasync: %w", err))
		case l.failed == nil && l.stall == nil && o.covers > l.durable:
			l.durable = o.covers
			l.io.queueNotify(l)
		}
		if err == nil && o.dropTo > o.dropFrom {
			dropCached(o.file.f, o.dropFrom, o.dropTo)
		}
		if indexErr != nil {
			// Only the mark is missing: recovery scans the segment.
			l.lastFailure = fmt.Errorf("writing the index files of sealed segment %d: %w", o.seg.base, indexErr)
		}
		if o.seal && !o.indexed && err == nil && !l.closed {
			if werr := l.writeIndexFiles(o.seg); werr != nil {
				// Only the mark is missing: recovery scans the segment.
				l.lastFailure = fmt.Errorf("writing the index files of sealed segment %d: %w", o.seg.base, werr)
			}
		}
		o.file.release()
		l.io.freeOp(o)
		return
	}
	o.done, o.err = true, err
	for len(l.chains) > 0 && l.chains[0].done {
		h := l.chains[0]
		copy(l.chains, l.chains[1:])
		l.chains[len(l.chains)-1] = nil
		l.chains = l.chains[:len(l.chains)-1]
		l.retire(h)
		pool.put(h.buf)
		h.file.release()
		l.io.freeOp(h)
	}
	if l.stall != nil && len(l.chains) == 0 {
		l.rewind()
	}
}

// retire applies one completed write, in submission order.
func (l *Log) retire(o *op) {
	if l.failed != nil || l.stall != nil || l.closed {
		return
	}
	if o.err != nil {
		if vfs.IsNoSpace(o.err) {
			l.stall = &stall{first: o.first, pos: o.pos, cause: fmt.Errorf("%w: %w", ErrNoSpace, o.err)}
			return
		}
		l.poison(o.err)
		return
	}
	prev := l.written
	l.written = o.last
	o.seg.writtenSize = max(o.seg.writtenSize, o.pos+int64(o.buf.n))
	if o.sync && (l.durable == prev || o.coversAll) {
		l.durable = o.last
		if l.durable == l.written {
			l.dropSynced(o.seg)
		}
	}
	l.io.queueNotify(l)
}

// dropSynced drops s's pages more than CacheTailBytes behind its written
// end from the page cache, on the background worker, once WritebackBytes
// of them have gathered. It serves FsyncAlways, where every write is
// synced and no writeback sync drops them (writeback).
// REQUIRES: everything s holds is written and synced.
func (l *Log) dropSynced(s *segment) {
	if l.cfg.CacheTailBytes < 0 || l.cfg.WritebackBytes <= 0 || l.io.bg == nil || s.file.f.Fd() == vfs.InvalidFd {
		return
	}
	from, to := s.droppedEnd, (s.writtenSize-l.cfg.CacheTailBytes)&^int64(pageBytes-1)
	if to-from < l.cfg.WritebackBytes {
		return
	}
	s.droppedEnd = to
	o := l.io.newOp()
	*o = op{log: l, file: s.file, seg: s, standalone: true, covers: l.durable}
	s.file.acquire()
	l.syncsInFlight++
	l.io.startBackground(o, func() error {
		dropCached(o.file.f, from, to)
		return nil
	})
}

// rewind undoes the appends from the first write that found no space on:
// the buffer is dropped, the file truncated back (and synced, so the
// dropped batches cannot reappear after a crash), the log end moved back.
// REQUIRES: no write of the log in flight.
func (l *Log) rewind() {
	st := l.stall
	l.stall = nil
	if l.cur != nil {
		l.io.pool.put(l.cur)
		l.cur = nil
	}
	s := l.active()
	if err := s.file.f.Truncate(st.pos); err != nil {
		l.poison(fmt.Errorf("rewind after %v: %w", st.cause, err))
		return
	}
	if err := s.file.f.Sync(); err != nil {
		l.poison(fmt.Errorf("rewind after %v: %w", st.cause, err))
		return
	}
	l.cutActive(s, st.pos, st.first)
	l.lastFailure = st.cause
	l.io.queueNotify(l)
}

// cutActive moves the active segment's bookkeeping back to pos / offset
// end (the file is already truncated).
func (l *Log) cutActive(s *segment, pos, end int64) {
	s.idx.truncate(uint32(end-s.base), pos)
	l.refreshMaxTs(s, pos)
	s.size, s.writtenSize = pos, min(s.writtenSize, pos)
	s.preallocEnd, s.zeroedEnd, s.zeroingEnd = min(s.preallocEnd, pos), min(s.zeroedEnd, pos), min(s.zeroingEnd, pos)
	s.last = end - 1
	l.leo = end
	l.written = min(l.written, end-1)
	l.durable = min(l.durable, end-1)
	l.unsyncedRecords = 0
	l.epochs.truncateFromEnd(end)
	if err := l.tab.TruncateTo(end); err != nil {
		panic(fmt.Sprintf("segment: %s: cut: %v", l.dir, err))
	}
}

// refreshMaxTs restores the segment's maximum timestamp after a cut: the
// time entries that remain cover every batch before the last offset entry,
// and the batches from there to pos are read.
func (l *Log) refreshMaxTs(s *segment, pos int64) {
	from, rel, ok := s.idx.floor(^uint32(0))
	base := s.base
	if ok {
		base += int64(rel)
	}
	for p := from; p < pos; {
		h, err := readHeader(s.file.f, p, &l.hdr)
		if err != nil {
			return
		}
		if h.MaxTimestamp > s.idx.maxTs {
			s.idx.maxTs, s.idx.maxTsRel = h.MaxTimestamp, uint32(base-s.base)
		}
		p += int64(h.Size())
		base += rwidth(&h)
	}
}
