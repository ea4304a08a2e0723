package segment

import (
	"fmt"
	"time"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/offsets"
	"github.com/corestream/corestream/segment/vfs"
)

// Log is one partition's durable log: a directory of segments, each a
// <base offset>.log of whole batches with a sparse .index and .timeindex.
//
// A Log is owned by one goroutine (the shard that owns the partition), the
// same that owns its IO: appends, reads, truncation, retention and Close
// all run there. Only the Spans a Read returns travel to other goroutines.
//
// Watermarks (offsets):
//
//	LogStartOffset  first offset present (inclusive)
//	WrittenOffset   last offset the kernel has accepted (inclusive); reads stop here
//	DurableOffset   last offset on stable storage (inclusive); FsyncAlways acknowledges against it
//	LogEndOffset    next offset to assign (exclusive)
//
// LogStartOffset-1 <= DurableOffset <= WrittenOffset < LogEndOffset.
// Completions may arrive out of order; the written and durable watermarks
// only advance over a contiguous prefix of completed writes.
//
// Two offset spaces (docs/design/offsets.md): every offset above, the
// segment names, the indexes, the epochs and the markers are raft
// offsets, in which a zero-width consensus batch (batch.Header.IsZeroWidth)
// takes one offset; the base offsets inside the batches are user offsets,
// in which it takes none, so that clients see their records dense from 0.
// The log stamps user offsets on append and keeps the translation
// (UserStartOffset, UserEndOffset, UserOffset, RaftOffset).
type Log struct {
	fs    vfs.FS
	dir   string
	cfg   Config
	io    *IO
	ownIO bool

	// segs is ordered by base. Invariants: len(segs) >= 1; bases strictly
	// increase; every segment but the last is sealed and its last offset
	// is the next one's base - 1; the last is active.
	segs []*segment
	// Invariant: segs[0].base <= logStart <= leo.
	logStart int64
	// startPrevEpoch is the leader epoch of offset logStart-1 once the log
	// start has moved (retention, Reset); 0 for a log that never moved.
	// Persisted with the log start.
	startPrevEpoch int32
	// leo == active().last + 1.
	leo int64
	// Invariant: logStart-1 <= durable <= written < leo.
	written int64
	durable int64
	epochs  epochCache
	// tab translates raft and user offsets for [logStart, leo); its
	// base (the consensus entries below the log start) is persisted
	// with the log start.
	tab offsets.Table
	// markers are the marked batches above the log start and markerBase
	// the payload of the marker in force at logStart-1 (nil: none),
	// persisted with the log start (see Marker).
	markers    markerCache
	markerBase []byte

	// The write path. cur holds appended batches not yet handed to the
	// engine: file position curPos, offsets curFirst..leo-1.
	cur      *wbuf
	curPos   int64
	curFirst int64
	bufClass int
	// chains are this log's writes in flight, in submission order.
	chains        []*op
	syncsInFlight int
	// unsyncedBytes counts bytes submitted without a sync since the last
	// background writeback sync (writeback).
	unsyncedBytes int64
	// zerosInFlight counts zero-fill writes in flight (preallocation).
	zerosInFlight int
	// unsyncedRecords and lastSyncMs drive FsyncMessages and FsyncInterval.
	unsyncedRecords int64
	lastSyncMs      int64

	// stall is set when a write found no space: the log rewinds once its
	// in-flight writes are done. failed is set (wrapping ErrLogFailed) when
	// a write or sync failed otherwise; it is permanent.
	stall       *stall
	failed      error
	lastFailure error
	// cleanupErr is a background removal's failure, reported by the next
	// ApplyRetention.
	cleanupErr error
	// The log cleaner (clean.go): cleanedTo is the raft offset below
	// which a pass has cleaned, kept in the cleaner's checkpoint
	// (clean_checkpoint.go) so that a reopened log is dirty only above
	// it; cleaner is the pass under way, nil between passes.
	cleanedTo int64
	cleaner   *cleanPass
	closed    bool
	report    RecoveryReport
	// scanEpochs holds the epoch changes the recovery scan saw (open only).
	scanEpochs []EpochEntry
	// epochsDirty says the leader-epoch checkpoint lags the cache by
	// epochs that start in the active segment (see noteEpoch).
	epochsDirty bool

	// Membership flags of the IO's lists.
	inDirty, inLagging, inNotify bool
	// hdr is scratch space for header reads.
	hdr [batch.HeaderSize]byte
}

// stall records the first write that found no space.
type stall struct {
	first int64
	pos   int64
	cause error
}

// op is one engine operation: a write of one buffer (with its sync when
// sync is set), or a standalone sync.
type op struct {
	log  *Log
	file *segFile // referenced while in flight
	seg  *segment
	buf  *wbuf
	pos  int64
	// first..last are the offsets the write carries.
	first, last int64
	sync        bool
	// coversAll: when submitted, every earlier write of the log had been
	// reaped, so this op's sync covers them all.
	coversAll  bool
	standalone bool
	// dropFrom..dropTo: once this standalone sync succeeds, drop the
	// range from the page cache (writeback on an IO without a worker).
	dropFrom, dropTo int64
	// zero marks a zero-fill write of data (preallocation), not in chains.
	zero bool
	data []byte
	// covers is a standalone sync's reach: the written offset when queued.
	covers int64
	// seal marks the standalone sync of a segment being sealed under a
	// policy other than always: its index files are written when it
	// completes.
	seal bool
	// indexed: the background job that ran the seal wrote the index
	// files too.
	indexed bool
	// cleanup marks a background removal of segments retention dropped.
	cleanup bool
	done    bool
	err     error
	// syncStart is when the IO queued this op's sync (zero: no sync, or
	// the background worker runs it); SyncStats times it.
	syncStart time.Time
}

// OpenLog opens (creating when needed) the log in dir and recovers it:
// stray temporary files are removed, segments below the persisted log start
// are deleted, and unless the log was closed cleanly the active segment is
// scanned, a torn or garbage tail truncated and its index rebuilt.
// Recovery() reports what was found and dropped.
//
// d is the dispatcher to share; nil gives the log a private one on the
// pwrite engine (closed with the log). A node shares one dispatcher per
// shard, on the io_uring engine when the kernel allows it.
func OpenLog(fsys vfs.FS, dir string, cfg Config, d *IO) (*Log, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{fs: fsys, dir: dir, cfg: c, io: d}
	if d == nil {
		l.io, l.ownIO = NewIO(NewPwriteEngine()), true
	}
	l.bufClass = classFor(64 << 10)
	if err := l.recover(); err != nil {
		l.releaseAll()
		if l.ownIO {
			_ = l.io.Close()
		}
		return nil, fmt.Errorf("segment: open %s: %w", dir, err)
	}
	l.lastSyncMs = l.cfg.NowMs()
	return l, nil
}

// LastFailure is the cause of the last rewind (a write that found no
// space: wraps ErrNoSpace), nil when there was none; appends fail with
// it while the rewind is pending.
func (l *Log) LastFailure() error { return l.lastFailure }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// IO is the dispatcher the log submits through.
func (l *Log) IO() *IO { return l.io }

// Recovery reports what OpenLog found.
func (l *Log) Recovery() RecoveryReport { return l.report }

// LogStartOffset is the first offset in the log (inclusive).
func (l *Log) LogStartOffset() int64 { return l.logStart }

// EpochBeforeStart is the leader epoch of offset LogStartOffset-1: the
// batch there is gone (or never existed: 0), but consensus log matching
// still needs its term.
func (l *Log) EpochBeforeStart() int32 {
	if e, ok := l.epochs.termAt(l.logStart - 1); ok {
		return e
	}
	return l.startPrevEpoch
}

// UserStartOffset is the log start in user offsets.
func (l *Log) UserStartOffset() int64 { return l.tab.StartUser() }

// UserEndOffset is the log end in user offsets: the offset the next data
// record is given.
func (l *Log) UserEndOffset() int64 { return l.tab.EndUser() }

// ConsensusBase is the number of consensus entries below the log start.
func (l *Log) ConsensusBase() int64 { return l.tab.Base() }

// ConsensusBelow is the number of consensus entries at raft offsets below
// r, for r in [LogStartOffset, LogEndOffset] (ErrOffsetOutOfRange
// otherwise).
func (l *Log) ConsensusBelow(r int64) (int64, error) {
	k, err := l.tab.K(r)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrOffsetOutOfRange, err)
	}
	return k, nil
}

// UserOffset returns the user offset of raft offset r, clamped to the log
// ([LogStartOffset, LogEndOffset]): the record's own for a data record,
// the next data record's for a consensus entry.
func (l *Log) UserOffset(r int64) int64 {
	u, _ := l.tab.ToUser(min(max(r, l.tab.StartRaft()), l.tab.EndRaft()))
	return u
}

// RaftOffset returns the raft offset of the data record with user offset
// u, clamped to [UserStartOffset, UserEndOffset] (UserEndOffset gives
// LogEndOffset).
func (l *Log) RaftOffset(u int64) int64 {
	r, _ := l.tab.ToRaft(min(max(u, l.tab.StartUser()), l.tab.EndUser()))
	return r
}

// ConsensusAt appends to dst the user positions of the zero-width
// batches whose position lies in [lo, hi) (user offsets).
func (l *Log) ConsensusAt(lo, hi int64, dst []int64) []int64 { return l.tab.ConsensusAt(lo, hi, dst) }

// LogEndOffset is the next offset to assign (exclusive; Kafka's LEO). It
// counts appends not yet written.
func (l *Log) LogEndOffset() int64 { return l.leo }

// WrittenOffset is the last offset the kernel has accepted (inclusive),
// LogStartOffset()-1 when none. Read never returns anything above it.
func (l *Log) WrittenOffset() int64 { return l.written }

// DurableOffset is the last offset on stable storage (inclusive),
// LogStartOffset()-1 when none (-1 for a new log). Under FsyncAlways,
// acknowledge producers up to it.
func (l *Log) DurableOffset() int64 { return l.durable }

// Err is the error that failed the log (wrapping ErrLogFailed), or nil.
func (l *Log) Err() error { return l.failed }

// SetRetention changes the retention bounds (Config.RetentionBytes and
// RetentionMs; -1: none) of a running log, as a topic config change asks;
// the next ApplyRetention uses them.
func (l *Log) SetRetention(bytes, ms int64) {
	l.cfg.RetentionBytes, l.cfg.RetentionMs = bytes, ms
}

// SetSegmentRoll changes when the active segment rolls (Config.SegmentBytes
// and SegmentMs) in a running log, as a topic config change asks; the
// next append checks them, so an active segment already past a lowered
// bound rolls before its next batch. Out-of-range values are ErrConfig,
// and nothing changes.
func (l *Log) SetSegmentRoll(bytes, ms int64) error {
	if bytes < 1024 || bytes > SegmentBytesMax || ms < -1 {
		return fmt.Errorf("%w: segment roll of %d bytes, %d ms", ErrConfig, bytes, ms)
	}
	l.cfg.SegmentBytes, l.cfg.SegmentMs = bytes, ms
	return nil
}

// SegmentRoll is the log's segment roll bounds: bytes and ms.
func (l *Log) SegmentRoll() (bytes, ms int64) { return l.cfg.SegmentBytes, l.cfg.SegmentMs }

// Retention is the log's retention bounds: bytes and ms.
func (l *Log) Retention() (bytes, ms int64) { return l.cfg.RetentionBytes, l.cfg.RetentionMs }

// Size is the bytes of all segments, appended data included.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// SegmentCount is the number of segments.
func (l *Log) SegmentCount() int { return len(l.segs) }

// LastEpoch is the leader epoch of the last batch appended, -1 when none.
func (l *Log) LastEpoch() int32 { return l.epochs.last() }

// Epochs returns a copy of the leader-epoch cache.
func (l *Log) Epochs() []EpochEntry { return append([]EpochEntry(nil), l.epochs.entries...) }

// TermAt returns the leader epoch of the batch holding offset.
// ErrOffsetOutOfRange when offset is outside [LogStartOffset, LogEndOffset).
func (l *Log) TermAt(offset int64) (int32, error) {
	if offset < l.logStart || offset >= l.leo {
		return 0, fmt.Errorf("%w: %d not in [%d, %d)", ErrOffsetOutOfRange, offset, l.logStart, l.leo)
	}
	e, ok := l.epochs.termAt(offset)
	if !ok {
		return 0, fmt.Errorf("%w: no epoch recorded for offset %d", ErrCorrupt, offset)
	}
	return e, nil
}

// EndOffsetForEpoch answers Kafka's OffsetsForLeaderEpoch: it returns the
// largest epoch <= epoch the log holds and the offset where the next higher
// epoch starts (LogEndOffset when epoch is the last epoch). A follower
// truncates to that offset. (-1, -1) when epoch is above the last epoch or
// negative; (epoch, first start offset) when it is below every epoch.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return l.epochs.endOffsetFor(epoch, l.leo)
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

func (l *Log) usable() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return l.failed
	}
	return nil
}

// poison fails the log for good (until reopened).
func (l *Log) poison(cause error) {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %w", ErrLogFailed, cause)
		l.lastFailure = l.failed
	}
	l.io.queueNotify(l)
}

// releaseAll drops the log's references to its segment files.
func (l *Log) releaseAll() {
	for _, s := range l.segs {
		s.file.release()
	}
	l.segs = nil
}

// Close makes everything appended durable, writes the active segment's
// index files and a clean-shutdown record (so the next OpenLog need not
// scan), and releases the log's files (spans still out keep theirs open).
// A failed log is closed without any of that; reopening recovers it.
func (l *Log) Close() error { return l.close(nil) }

// CloseInto closes the log for a stop of the whole node: like Close, but
// it writes out what it holds without syncing it and leaves the rest (the
// trim, the index files, the epochs, and its clean-shutdown record) to
// stop.Commit, which does it for every log at once. The next OpenLog
// scans the log unless that Commit returned.
func (l *Log) CloseInto(stop *StopRecord) error { return l.close(stop) }

func (l *Log) close(stop *StopRecord) error {
	if l.closed {
		return ErrClosed
	}
	var err error
	if l.failed == nil {
		if stop == nil {
			err = l.Sync()
		} else {
			err = l.drainAll()
		}
	}
	if derr := l.drain(); err == nil && derr != nil {
		err = derr
	}
	switch {
	case l.failed != nil || err != nil:
	case stop != nil:
		c, job := l.stopJob()
		stop.add(l.dir, c, job)
	default:
		if l.epochsDirty && l.leo > l.logStart {
			// A clean start trusts the checkpoint without scanning. An
			// empty log keeps none: recovery drops every epoch from its
			// end on.
			err = l.persistEpochs()
		}
		if err == nil {
			err = l.writeClean()
		}
	}
	return l.finishClose(err)
}

// Discard closes the log for good, without making anything durable or
// writing any file: for a log whose directory is about to be removed (a
// deleted partition), where a clean close's syncs and files are wasted
// work on the shard's thread. It waits for the log's operations in flight
// and releases its files.
func (l *Log) Discard() error {
	if l.closed {
		return ErrClosed
	}
	return l.finishClose(l.drain())
}

// finishClose gives back the write buffer and the files and closes an
// IO the log owns; it returns err, or the IO's failure to close.
func (l *Log) finishClose(err error) error {
	l.dropCleaner()
	if l.cur != nil {
		l.io.pool.put(l.cur)
		l.cur = nil
	}
	l.releaseAll()
	l.closed = true
	if l.ownIO {
		if cerr := l.io.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
