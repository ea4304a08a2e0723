package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/segment/offsets"
)

// RecoveryReport says what OpenLog found and what it dropped.
type RecoveryReport struct {
	// Clean is true when the log had been closed cleanly and nothing was
	// scanned.
	Clean bool
	// Segments is the number of segments after recovery.
	Segments int
	// ScannedBytes is the bytes of .log validated batch by batch.
	ScannedBytes int64
	// TruncatedBytes were cut off the active segment's tail: a torn or
	// garbage tail (TruncatedReason says what stopped the scan) or unused
	// preallocated space (ZeroTail).
	TruncatedBytes  int64
	TruncatedReason error
	ZeroTail        bool
	// RemovedFiles lists files deleted: temporary files, segments below
	// the log start, index files without a segment or out of date.
	RemovedFiles []string
	// IndexesRebuilt counts segments whose index was rebuilt by a scan.
	IndexesRebuilt int
	// MarkersRebuilt is true when the markers checkpoint was damaged and
	// the markers were read back from the batches.
	MarkersRebuilt bool
	// CleanedTo is the raft offset below which the cleaner's checkpoint
	// says the log was cleaned (0: none).
	CleanedTo int64
	// TableRebuilt is true when the epochs and markers did not account
	// for the log's user offsets and every header was walked.
	TableRebuilt bool
	// EpochsRebuilt is true when the leader-epoch checkpoint was missing or
	// damaged and was rebuilt from batch headers; EpochsRepaired when it was
	// valid but had to be corrected against the log.
	EpochsRebuilt  bool
	EpochsRepaired bool
	// LogStartOffset and LogEndOffset after recovery.
	LogStartOffset, LogEndOffset int64
}

// DataDropped reports whether recovery cut off bytes that were not unused
// space (a torn or corrupt tail).
func (r RecoveryReport) DataDropped() bool { return r.TruncatedBytes > 0 && !r.ZeroTail }

// String summarizes the report in one line.
func (r RecoveryReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "offsets [%d, %d) in %d segments", r.LogStartOffset, r.LogEndOffset, r.Segments)
	if r.Clean {
		b.WriteString(", clean")
	} else {
		fmt.Fprintf(&b, ", scanned %d bytes", r.ScannedBytes)
	}
	if r.TruncatedBytes > 0 {
		what := "torn tail"
		if r.ZeroTail {
			what = "unused space"
		}
		fmt.Fprintf(&b, ", truncated %d bytes of %s (%v)", r.TruncatedBytes, what, r.TruncatedReason)
	}
	if len(r.RemovedFiles) > 0 {
		fmt.Fprintf(&b, ", removed %v", r.RemovedFiles)
	}
	if r.IndexesRebuilt > 0 {
		fmt.Fprintf(&b, ", rebuilt %d indexes", r.IndexesRebuilt)
	}
	if r.TableRebuilt {
		b.WriteString(", rebuilt the offset translation")
	}
	if r.MarkersRebuilt {
		b.WriteString(", rebuilt the markers")
	}
	if r.EpochsRebuilt {
		b.WriteString(", rebuilt the epoch cache")
	} else if r.EpochsRepaired {
		b.WriteString(", repaired the epoch cache")
	}
	return b.String()
}

// Checkpoint files of a log directory.
const (
	logStartFile = "log-start-offset.checkpoint"
	cleanFile    = "clean-shutdown.checkpoint"
)

var (
	// Payload version 1: logStartOffset int64, flags uint8 (bit 0: a Reset
	// to logStartOffset is under way). Version 2 appends prevEpoch int32,
	// the leader epoch of offset logStartOffset-1 (consensus log matching
	// needs it once the batch itself is gone). Version 3 appends the base
	// marker (see Marker): len uint8, payload; written only when the log
	// has one. Version 4 (user offsets on disk, docs/design/offsets.md)
	// is version 2, then consensusBase int64 (the consensus entries below
	// the log start), then with flags bit 1 the base marker as in
	// version 3. Versions 1 to 3 are read with a base of 0.
	logStartKind = checkpoint.Kind{'L', 'S', 'O', '1'}
	// Payload version 1: activeBase int64, activeBytes int64, logEnd int64.
	cleanKind = checkpoint.Kind{'C', 'L', 'S', 'D'}
)

type cleanRecord struct{ activeBase, activeBytes, leo int64 }

const (
	logStartResetting = 1
	logStartHasMarker = 2
)

// logStartRecord is the log-start checkpoint's content.
type logStartRecord struct {
	start     int64
	resetting bool
	prevEpoch int32
	// base is the number of consensus entries below start.
	base   int64
	marker []byte
}

// writeLogStart persists the log start, with l.markerBase as the base
// marker (see Marker) and base consensus entries below it.
func (l *Log) writeLogStart(start, base int64, resetting bool, prevEpoch int32) error {
	b := make([]byte, 21, 22+len(l.markerBase))
	binary.BigEndian.PutUint64(b, uint64(start))
	if resetting {
		b[8] |= logStartResetting
	}
	binary.BigEndian.PutUint32(b[9:], uint32(prevEpoch))
	binary.BigEndian.PutUint64(b[13:], uint64(base))
	if l.markerBase != nil {
		b[8] |= logStartHasMarker
		b = append(append(b, byte(len(l.markerBase))), l.markerBase...)
	}
	return checkpoint.Write(l.fs, l.path(logStartFile), logStartKind, 4, b)
}

// readLogStart reads the log-start checkpoint; ok is false when there is
// none or it does not decode.
func (l *Log) readLogStart() (r logStartRecord, ok bool) {
	v, p, err := checkpoint.Read(l.fs, l.path(logStartFile), logStartKind)
	if err != nil {
		return r, false
	}
	be := binary.BigEndian
	switch {
	case v == 1 && len(p) == 9, v == 2 && len(p) == 13, v == 3 && len(p) >= 14 && len(p) == 14+int(p[13]):
		if v >= 2 {
			r.prevEpoch = int32(be.Uint32(p[9:]))
		}
		if v == 3 {
			r.marker = append([]byte{}, p[14:]...)
		}
	case v == 4 && len(p) >= 21:
		r.prevEpoch, r.base = int32(be.Uint32(p[9:])), int64(be.Uint64(p[13:]))
		if p[8]&logStartHasMarker != 0 {
			if len(p) < 22 || len(p) != 22+int(p[21]) {
				return logStartRecord{}, false
			}
			r.marker = append([]byte{}, p[22:]...)
		} else if len(p) != 21 {
			return logStartRecord{}, false
		}
	default:
		return logStartRecord{}, false
	}
	r.start, r.resetting = int64(be.Uint64(p)), p[8]&logStartResetting != 0
	if r.start < 0 || r.base < 0 || r.base > r.start {
		return logStartRecord{}, false
	}
	return r, true
}

func (l *Log) readClean() (cleanRecord, bool) {
	v, p, err := checkpoint.Read(l.fs, l.path(cleanFile), cleanKind)
	if err != nil || v != 1 || len(p) != 24 {
		return cleanRecord{}, false
	}
	be := binary.BigEndian
	return cleanRecord{int64(be.Uint64(p)), int64(be.Uint64(p[8:])), int64(be.Uint64(p[16:]))}, true
}

// writeClean trims the active segment, syncs it, writes its index files and
// the clean-shutdown record. REQUIRES: nothing in flight, nothing buffered.
func (l *Log) writeClean() error {
	s := l.active()
	if err := s.file.f.Truncate(s.size); err != nil {
		return err
	}
	if err := s.file.f.Sync(); err != nil {
		l.poison(err)
		return l.failed
	}
	if needsIndexFiles(s) {
		if err := l.writeIndexFiles(s); err != nil {
			return err
		}
	}
	var b [24]byte
	be := binary.BigEndian
	be.PutUint64(b[:], uint64(s.base))
	be.PutUint64(b[8:], uint64(s.size))
	be.PutUint64(b[16:], uint64(l.leo))
	// checkpoint.Write syncs the directory, which also makes the index
	// files' entries durable.
	return checkpoint.Write(l.fs, l.path(cleanFile), cleanKind, 1, b[:])
}

// stopJob is what closing into a StopRecord leaves to do, touching only
// the file system: trim the active segment and write its index files and,
// when they changed, the epochs, all unsynced; and the clean record that
// is true once they are durable. REQUIRES: nothing in flight, nothing
// buffered.
func (l *Log) stopJob() (cleanRecord, func() error) {
	s := l.active()
	c := cleanRecord{activeBase: s.base, activeBytes: s.size, leo: l.leo}
	f, size, fsys := s.file, s.size, l.fs
	f.acquire()
	var files []namedBytes
	if needsIndexFiles(s) {
		files = l.indexFiles(s)
	}
	if l.epochsDirty && l.leo > l.logStart {
		// Rewritten in place, not replaced: on this kind of file system
		// (ext4 mounted with discard) freeing the replaced file's block
		// waited on the disk for about a millisecond, one log at a time.
		// A crash before the commit may tear it; Read then refuses it and
		// the unclean start rebuilds the epochs from the log.
		b, err := checkpoint.Encode(epochKind, epochVersion, l.epochs.encode())
		if err != nil {
			return c, func() error { f.release(); return err }
		}
		files = append(files, namedBytes{l.path(epochFile), b})
		l.epochsDirty = false
	}
	return c, func() error {
		defer f.release()
		if err := f.f.Truncate(size); err != nil {
			return err
		}
		return writeFiles(fsys, files, false)
	}
}

func (l *Log) removeFile(name string) error {
	if err := l.fs.Remove(l.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	l.report.RemovedFiles = append(l.report.RemovedFiles, name)
	return nil
}

// recover opens the directory (see OpenLog).
func (l *Log) recover() error {
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return err
	}
	var bases []int64
	indexes := map[int64][]string{}
	for _, n := range names {
		if b, ok := parseSegName(n, logSuffix); ok {
			bases = append(bases, b)
		} else if b, ok := parseSegName(n, indexSuffix); ok {
			indexes[b] = append(indexes[b], n)
		} else if b, ok := parseSegName(n, timeIndexSuffix); ok {
			indexes[b] = append(indexes[b], n)
		} else if checkpoint.IsTemp(n) {
			if err := l.removeFile(n); err != nil {
				return err
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })

	ls, hasStart := l.readLogStart()
	start, resetting := ls.start, ls.resetting
	if hasStart {
		l.startPrevEpoch, l.markerBase = ls.prevEpoch, ls.marker
	}
	clean, hasClean := l.readClean()
	dirChanged := false
	if hasClean {
		// From here on the directory no longer describes a clean shutdown.
		if err := l.removeFile(cleanFile); err != nil {
			return err
		}
		l.report.RemovedFiles = l.report.RemovedFiles[:len(l.report.RemovedFiles)-1]
		dirChanged = true
	}
	if c, ok := l.cfg.Stopped.take(l.dir); ok {
		// The node's record of its last stop. A log's own record beside
		// it cannot describe the same stop: trust neither, scan.
		clean = c
		hasClean = !hasClean
	}

	// Segments wholly below the log start are leftovers of retention that
	// a crash interrupted; a Reset under way is finished.
	if hasStart && len(bases) > 0 {
		if resetting || bases[len(bases)-1] < start {
			for _, b := range bases {
				if err := l.removeSegmentFiles(b); err != nil {
					return err
				}
			}
			bases, dirChanged = nil, true
		} else {
			i := 0
			for i+1 < len(bases) && bases[i+1] <= start {
				if err := l.removeSegmentFiles(bases[i]); err != nil {
					return err
				}
				i, dirChanged = i+1, true
			}
			bases = bases[i:]
		}
	}
	for b, files := range indexes {
		if i := sort.Search(len(bases), func(i int) bool { return bases[i] >= b }); i == len(bases) || bases[i] != b {
			for _, n := range files {
				if err := l.removeFile(n); err != nil {
					return err
				}
			}
			dirChanged = true
		}
	}
	if len(bases) == 0 {
		if !hasStart {
			start = 0
		}
		s, err := l.createSegment(start, true)
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
		l.logStart, l.leo = start, start
		l.written, l.durable = start-1, start-1
		l.tab = *offsets.New(start, ls.base)
		l.epochs = epochCache{}
		if err := l.persistEpochs(); err != nil {
			return err
		}
		if resetting {
			if err := l.writeLogStart(start, ls.base, false, l.startPrevEpoch); err != nil {
				return err
			}
		}
		if err := l.recoverMarkers(); err != nil {
			return err
		}
		l.finishReport()
		return nil
	}
	if err := l.openSegments(bases, clean, hasClean); err != nil {
		return err
	}
	l.logStart = l.segs[0].base
	if hasStart && start > l.logStart {
		l.logStart = start
	}
	if err := l.recoverEpochs(); err != nil {
		return err
	}
	if err := l.recoverMarkers(); err != nil {
		return err
	}
	if err := l.recoverTable(ls.base); err != nil {
		return err
	}
	l.recoverCleaned()
	if dirChanged {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	l.finishReport()
	return nil
}

func (l *Log) finishReport() {
	l.report.Segments = len(l.segs)
	l.report.LogStartOffset, l.report.LogEndOffset = l.logStart, l.leo
}

func (l *Log) removeSegmentFiles(base int64) error {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := l.fs.Remove(l.path(segName(base, suf))); err == nil {
			l.report.RemovedFiles = append(l.report.RemovedFiles, segName(base, suf))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// openSegments opens every segment; sealed ones are taken at their size,
// the active one is trusted on a clean shutdown and scanned otherwise.
func (l *Log) openSegments(bases []int64, clean cleanRecord, hasClean bool) error {
	for i, b := range bases {
		f, err := l.fs.OpenReadWrite(l.path(segName(b, logSuffix)))
		if err != nil {
			return err
		}
		s := &segment{base: b, file: newSegFile(f), rollAtMs: l.cfg.NowMs()}
		l.segs = append(l.segs, s)
		if s.size, err = f.Size(); err != nil {
			return err
		}
		s.writtenSize, s.preallocEnd = s.size, s.size
		if i+1 < len(bases) {
			s.sealed, s.last = true, bases[i+1]-1
			if i+2 < len(bases) || hasClean {
				continue
			}
			// The last sealed segment after an unclean stop: under a policy
			// other than always its seal (fdatasync, then the index files)
			// may not have finished. Without valid index files it is
			// scanned; a torn tail ends the log there.
			torn, err := l.checkLastSealed(s)
			if err != nil {
				return err
			}
			if !torn {
				continue
			}
			if err := l.removeSegmentFiles(bases[i+1]); err != nil {
				return err
			}
			s.sealed = false
			l.leo = s.last + 1
			l.written, l.durable = s.last, s.last
			return nil
		}
		if hasClean && clean.activeBase == b && clean.activeBytes == s.size && clean.leo >= b {
			s.last = clean.leo - 1
			l.report.Clean = true
			if err := l.loadIndex(s); err != nil {
				// The record was clean but the segment does not match it:
				// fall back to a scan.
				s.damaged = nil
				l.report.Clean = false
			}
		}
		if !l.report.Clean {
			if err := l.scanActive(s); err != nil {
				return err
			}
		}
		l.leo = s.last + 1
		l.written, l.durable = s.last, s.last
	}
	return nil
}

// checkLastSealed validates a sealed segment whose seal may not have
// finished. It reports whether the segment was torn, in which case it has
// been truncated to its last whole batch and made durable, and its index
// rebuilt (s.idx, s.last).
func (l *Log) checkLastSealed(s *segment) (bool, error) {
	if err := l.loadIndex(s); err == nil {
		return false, nil // index files valid: the seal finished
	}
	s.damaged, s.idx = nil, nil
	r := scanSegment(s.file.f, s.base, s.size, 0, l.cfg.IndexIntervalBytes)
	l.report.ScannedBytes += r.end
	if r.last == s.last && (r.end == s.size || r.zeroTail) {
		// Whole: finish the seal so the next unclean start need not scan.
		// Only zeros after the last batch is the preallocated tail that
		// the seal trims (in the background: a crash can come first).
		if r.end < s.size {
			if err := s.file.f.Truncate(r.end); err != nil {
				return false, err
			}
			s.size, s.writtenSize, s.preallocEnd = r.end, r.end, r.end
		}
		s.idx = r.idx
		l.report.IndexesRebuilt++
		if err := s.file.f.Sync(); err != nil {
			return false, err
		}
		return false, l.writeIndexFiles(s)
	}
	s.idx, s.last = r.idx, r.last
	l.scanEpochs = r.epochs
	l.report.TruncatedBytes += s.size - r.end
	l.report.TruncatedReason = r.stop
	if err := s.file.f.Truncate(r.end); err != nil {
		return false, err
	}
	s.size, s.writtenSize, s.preallocEnd = r.end, r.end, r.end
	if err := s.file.f.Sync(); err != nil {
		return false, err
	}
	return true, l.removeIndexFiles(s.base)
}

// scanActive validates the active segment, truncates what does not check
// out, makes the result durable and drops its stale index files.
func (l *Log) scanActive(s *segment) error {
	r := scanSegment(s.file.f, s.base, s.size, 0, l.cfg.IndexIntervalBytes)
	l.report.ScannedBytes += r.end
	s.idx, s.last = r.idx, r.last
	l.scanEpochs = r.epochs
	if r.end < s.size {
		l.report.TruncatedBytes = s.size - r.end
		l.report.TruncatedReason = r.stop
		l.report.ZeroTail = r.zeroTail
		if err := s.file.f.Truncate(r.end); err != nil {
			return err
		}
		s.size, s.writtenSize, s.preallocEnd = r.end, r.end, r.end
	}
	if err := s.file.f.Sync(); err != nil {
		return err
	}
	return l.removeIndexFiles(s.base)
}

// recoverEpochs loads the leader-epoch checkpoint and reconciles it with
// the log, or rebuilds it from batch headers.
func (l *Log) recoverEpochs() error {
	v, p, err := checkpoint.Read(l.fs, l.path(epochFile), epochKind)
	var entries []EpochEntry
	if err == nil {
		entries, err = decodeEpochs(v, p)
	}
	if errors.Is(err, fs.ErrNotExist) && l.leo == l.logStart {
		// A new log: nothing to describe yet. The first roll or the
		// clean close writes the file.
		l.epochs = epochCache{}
		l.epochsDirty = true
		return nil
	}
	if err != nil {
		return l.rebuildAndPersistEpochs()
	}
	orig := slices.Clone(entries)
	l.epochs = epochCache{entries: entries}
	l.epochs.truncateFromStart(l.logStart)
	l.epochs.truncateFromEnd(l.leo)
	if !l.report.Clean {
		// The scan is the truth for the active segment: an epoch persisted
		// ahead of a batch that never reached the disk is dropped here.
		l.epochs.truncateFromEnd(l.active().base)
		for _, e := range l.scanEpochs {
			if e.Epoch < l.epochs.last() {
				// Older segments disagree with the active one.
				return l.rebuildAndPersistEpochs()
			}
			l.epochs.assign(e.Epoch, max(e.StartOffset, l.logStart))
		}
	}
	l.scanEpochs = nil
	if len(l.epochs.entries) == 0 && l.leo > l.logStart {
		return l.rebuildAndPersistEpochs()
	}
	if !slices.Equal(orig, l.epochs.entries) {
		l.report.EpochsRepaired = true
		return l.persistEpochs()
	}
	return nil
}

func (l *Log) rebuildAndPersistEpochs() error {
	l.report.EpochsRebuilt = true
	if err := l.rebuildEpochs(); err != nil {
		return err
	}
	return l.persistEpochs()
}

// rebuildEpochs walks every batch header of the log.
func (l *Log) rebuildEpochs() error {
	l.epochs = epochCache{}
	for _, s := range l.segs {
		pos, at, unext := int64(0), s.base, int64(-1)
		for pos < s.writtenSize {
			h, err := readHeader(s.file.f, pos, &l.hdr)
			if err != nil {
				return err
			}
			if unext >= 0 && h.BaseOffset != unext {
				return fmt.Errorf("%w: segment %d: base offset %d at %d, want %d", ErrCorrupt, s.base, h.BaseOffset, pos, unext)
			}
			if h.PartitionLeaderEpoch > l.epochs.last() {
				l.epochs.assign(h.PartitionLeaderEpoch, max(at, l.logStart))
			}
			pos += int64(h.Size())
			at, unext = at+rwidth(&h), h.LastOffset()+1
		}
	}
	l.scanEpochs = nil
	return nil
}

func (l *Log) persistEpochs() error {
	if err := checkpoint.Write(l.fs, l.path(epochFile), epochKind, epochVersion, l.epochs.encode()); err != nil {
		return err
	}
	l.epochsDirty = false
	return nil
}

// createSegment creates an empty segment file at base and, when syncDir,
// makes its entry durable (else the caller arranges a directory sync).
func (l *Log) createSegment(base int64, syncDir bool) (*segment, error) {
	if err := l.removeIndexFiles(base); err != nil {
		return nil, err
	}
	name := l.path(segName(base, logSuffix))
	f, err := l.fs.Create(name)
	if err != nil {
		return nil, err
	}
	if !syncDir {
		return &segment{base: base, file: newSegFile(f), last: base - 1, idx: newSegIndex(), rollAtMs: l.cfg.NowMs()}, nil
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		_ = f.Close()
		_ = l.fs.Remove(name)
		return nil, err
	}
	return &segment{base: base, file: newSegFile(f), last: base - 1, idx: newSegIndex(), rollAtMs: l.cfg.NowMs()}, nil
}
