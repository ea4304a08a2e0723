package segment

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/corestream/corestream/segment/vfs"
)

// TruncateTo removes every batch at or after end, so that afterwards
// LogEndOffset() == end (consensus log divergence). end must be a batch's
// base offset or the log end offset (ErrNotBatchBoundary otherwise) and in
// [LogStartOffset, LogEndOffset] (ErrOffsetOutOfRange). It waits for the
// log's writes, deletes later segments (newest first), cuts the segment
// holding end and syncs it, so the removed batches cannot reappear after a
// crash. Spans already handed out over the removed range must not be used
// past this call; raft never truncates below its commit index, so
// committed reads are unaffected.
func (l *Log) TruncateTo(end int64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if end < l.logStart || end > l.leo {
		return fmt.Errorf("%w: truncate to %d, log is [%d, %d]", ErrOffsetOutOfRange, end, l.logStart, l.leo)
	}
	if end == l.leo {
		return nil
	}
	l.dropCleaner()
	if end < l.cleanedTo {
		// The checkpoint must not claim what is written after the
		// truncation: lowered before anything is.
		l.cleanedTo = end
		if err := l.persistCleaned(); err != nil {
			return err
		}
	}
	if err := l.drainAll(); err != nil {
		return err
	}
	if end == l.leo { // a rewind already got there
		return nil
	}
	i := l.segFor(end)
	s := l.segs[i]
	if err := l.loadIndex(s); err != nil {
		return err
	}
	pos := int64(0)
	if end > s.base {
		p, base, err := l.positionOf(s, end)
		if err != nil {
			return err
		}
		if base != end {
			return fmt.Errorf("%w: %d is inside the batch at %d", ErrNotBatchBoundary, end, base)
		}
		pos = p
	}
	// Newest first: a crash part-way leaves a shorter log, never a gap.
	for j := len(l.segs) - 1; j > i; j-- {
		if err := l.dropSegment(l.segs[j]); err != nil {
			return err
		}
		l.segs = l.segs[:j]
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	if err := s.file.f.Truncate(pos); err != nil {
		l.poison(fmt.Errorf("truncate: %w", err))
		return l.failed
	}
	if err := s.file.f.Sync(); err != nil {
		l.poison(fmt.Errorf("truncate: %w", err))
		return l.failed
	}
	if s.sealed {
		s.sealed = false
		if err := l.removeIndexFiles(s.base); err != nil {
			return err
		}
	}
	l.cutActive(s, pos, end)
	s.rollAtMs = l.cfg.NowMs()
	if err := l.persistEpochs(); err != nil {
		return err
	}
	// After the cut, not before: a crash in between leaves a marker at or
	// past the end, which recovery drops; the other order could leave a
	// marked batch without its marker.
	return l.dropMarkersFrom(end)
}

// dropSegment removes a segment's files and the log's reference (spans
// keep the file open until released).
func (l *Log) dropSegment(s *segment) error {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := l.removeFileQuiet(segName(s.base, suf)); err != nil {
			return err
		}
	}
	s.file.release()
	return nil
}

func (l *Log) removeFileQuiet(name string) error {
	saved := len(l.report.RemovedFiles)
	err := l.removeFile(name)
	l.report.RemovedFiles = l.report.RemovedFiles[:saved]
	return err
}

// Reset drops the whole log and starts it empty at newStart: a follower
// whose leader has already deleted the offsets it needs (Kafka's
// truncateFullyAndStartAt). The new log start is persisted first, marked
// as a reset under way, so a crash part-way finishes the reset on the next
// open.
func (l *Log) Reset(newStart int64) error { return l.ResetWithEpoch(newStart, 0) }

// ResetWithEpoch is Reset that also records prevEpoch as the leader epoch
// of offset newStart-1 (EpochBeforeStart): consensus log matching asks for
// the term of the entry just before the first one the log holds.
func (l *Log) ResetWithEpoch(newStart int64, prevEpoch int32) error {
	return l.ResetWithMarker(newStart, prevEpoch, nil)
}

// ResetWithMarker is ResetWithEpoch that also records base as the marker
// in force at newStart-1 (nil: none), in the same checkpoint write that
// starts the reset, so that a crash part-way never leaves the new log
// start with the old base (see Marker).
func (l *Log) ResetWithMarker(newStart int64, prevEpoch int32, base []byte) error {
	return l.ResetAt(newStart, 0, prevEpoch, base)
}

// ResetAt is ResetWithMarker for a log whose start newStart (a raft
// offset) has consensusBase consensus entries below it: its user start is
// newStart - consensusBase (docs/design/offsets.md). A follower takes it
// from its leader's log.
func (l *Log) ResetAt(newStart, consensusBase int64, prevEpoch int32, base []byte) error {
	if consensusBase < 0 || consensusBase > newStart {
		return fmt.Errorf("%w: reset to %d with %d consensus entries below it", ErrOffsetOutOfRange, newStart, consensusBase)
	}
	if len(base) > MarkerBytesMax {
		return fmt.Errorf("%w: base marker of %d bytes, at most %d", ErrInvalidBatch, len(base), MarkerBytesMax)
	}
	if err := l.usable(); err != nil {
		return err
	}
	if newStart < 0 {
		return fmt.Errorf("%w: reset to %d", ErrOffsetOutOfRange, newStart)
	}
	l.dropCleaner()
	if l.cleanedTo > 0 {
		l.cleanedTo = 0
		if err := l.persistCleaned(); err != nil {
			return err
		}
	}
	// Wait out the writes in flight; a rewind is irrelevant here.
	_ = l.drainAll()
	if err := l.usable(); err != nil {
		return err
	}
	if l.cur != nil {
		l.io.pool.put(l.cur)
		l.cur = nil
	}
	if prevEpoch < 0 {
		prevEpoch = 0
	}
	l.startPrevEpoch = prevEpoch
	l.markerBase = nil
	if base != nil {
		l.markerBase = append([]byte{}, base...)
	}
	if err := l.writeLogStart(newStart, consensusBase, true, prevEpoch); err != nil {
		return err
	}
	for j := len(l.segs) - 1; j >= 0; j-- {
		if err := l.dropSegment(l.segs[j]); err != nil {
			return err
		}
		l.segs = l.segs[:j]
	}
	l.epochs = epochCache{}
	if err := l.persistEpochs(); err != nil {
		return err
	}
	l.markers = markerCache{}
	if err := l.persistMarkers(); err != nil {
		return err
	}
	s, err := l.createSegment(newStart, true)
	if err != nil {
		// The directory now has no segment; the next open creates it.
		l.poison(fmt.Errorf("reset: %w", err))
		return l.failed
	}
	l.segs = []*segment{s}
	l.logStart, l.leo = newStart, newStart
	l.tab.Reset(newStart, consensusBase)
	l.written, l.durable = newStart-1, newStart-1
	l.unsyncedRecords = 0
	if err := l.writeLogStart(newStart, consensusBase, false, prevEpoch); err != nil {
		// The next open would redo the reset: harmless, the log is empty.
		return err
	}
	return nil
}

// RetentionResult says what ApplyRetention deleted.
type RetentionResult struct {
	Segments int
	Bytes    int64
	// LogStartOffset after the deletion.
	LogStartOffset int64
}

// ApplyRetention deletes whole segments, oldest first, while the log is
// over Config.RetentionBytes or the segment's newest timestamp is older
// than Config.RetentionMs, never the active segment and never a segment
// holding an offset above limit (pass the commit index, or the minimum
// offset every consumer of interest still needs). The new log start offset
// is persisted before any file is deleted.
func (l *Log) ApplyRetention(limit int64) (RetentionResult, error) {
	return l.ApplyRetentionBelow(limit, -1)
}

// ApplyRetentionBelow is ApplyRetention that also deletes, whatever the
// bounds, every whole segment whose offsets all lie below below (a log
// whose state is checkpointed keeps only what its newest complete
// checkpoint needs). The active segment and the segment holding below
// are kept.
func (l *Log) ApplyRetentionBelow(limit, below int64) (RetentionResult, error) {
	res, err := l.applyRetention(limit, below)
	if prev := l.cleanupErr; prev != nil {
		l.cleanupErr = nil
		err = errors.Join(err, fmt.Errorf("removing segments an earlier retention dropped: %w", prev))
	}
	return res, err
}

func (l *Log) applyRetention(limit, below int64) (RetentionResult, error) {
	var res RetentionResult
	if err := l.usable(); err != nil {
		return res, err
	}
	total := l.Size()
	now := l.cfg.NowMs()
	n := 0
	for n < len(l.segs)-1 {
		s := l.segs[n]
		if s.last > limit {
			break
		}
		bySize := l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes
		byOffset := s.last < below
		byAge := false
		if l.cfg.RetentionMs >= 0 && !bySize && !byOffset {
			if err := l.loadIndex(s); err == nil && s.idx.maxTs != noTimestamp {
				byAge = now-s.idx.maxTs > l.cfg.RetentionMs
			}
		}
		if !bySize && !byAge && !byOffset {
			break
		}
		total -= s.size
		res.Bytes += s.size
		n++
	}
	res.LogStartOffset = l.logStart
	if n == 0 {
		return res, nil
	}
	newStart := l.segs[n].base
	prevEpoch, _ := l.epochs.termAt(newStart - 1)
	oldBase := l.markerBase
	if m, ok := l.MarkerAt(newStart - 1); ok {
		l.markerBase = m.Payload
	}
	newBase, err := l.tab.K(newStart)
	if err != nil {
		panic(fmt.Sprintf("segment: %s: retention to %d: %v", l.dir, newStart, err))
	}
	if err := l.writeLogStart(newStart, newBase, false, prevEpoch); err != nil {
		l.markerBase = oldBase
		return RetentionResult{LogStartOffset: l.logStart}, err
	}
	background := l.io.bg != nil && vfs.FdBacked(l.fs)
	if background {
		// Unlinking a gigabyte segment frees its blocks, which with the
		// discard mount option waits for the device (0.2 s per GiB
		// measured here): the files go on the IO's worker. The log start
		// is persisted, so a crash before they are gone leaves segments
		// below it, which the next open deletes.
		o := l.io.newOp()
		*o = op{log: l, cleanup: true}
		l.io.startBackground(o, l.removeSegmentsJob(l.segs[:n]))
		for _, s := range l.segs[:n] {
			s.file.release()
		}
	} else {
		for j := 0; j < n; j++ {
			if err := l.dropSegment(l.segs[j]); err != nil {
				// The log start is persisted: the next open finishes the job.
				l.segs = l.segs[j:]
				l.logStart = max(l.logStart, newStart)
				_ = l.tab.AdvanceStart(l.logStart)
				return res, err
			}
		}
	}
	l.segs = append(l.segs[:0], l.segs[n:]...)
	l.logStart = newStart
	if err := l.tab.AdvanceStart(newStart); err != nil {
		panic(fmt.Sprintf("segment: %s: retention to %d: %v", l.dir, newStart, err))
	}
	l.startPrevEpoch = prevEpoch
	l.dropMarkersBelow(newStart)
	l.written, l.durable = max(l.written, newStart-1), max(l.durable, newStart-1)
	if l.epochs.truncateFromStart(newStart) {
		if err := l.persistEpochs(); err != nil {
			return res, err
		}
	}
	res.Segments, res.LogStartOffset = n, newStart
	if background {
		return res, nil // the worker syncs the directory after the removals
	}
	return res, l.fs.SyncDir(l.dir)
}

// removeSegmentsJob returns the background removal of dropped segments'
// files, then a directory sync. It names the files now and touches only
// the file system.
func (l *Log) removeSegmentsJob(dropped []*segment) func() error {
	fsys, dir := l.fs, l.dir
	var names []string
	for _, s := range dropped {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			names = append(names, l.path(segName(s.base, suf)))
		}
	}
	return func() error {
		for _, name := range names {
			if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return fsys.SyncDir(dir)
	}
}
