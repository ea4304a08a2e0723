package segment

import (
	"fmt"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// segRewrite is a sealed segment being rewritten by the cleaner into its
// temporary file, over as many steps as the byte budget needs.
// Invariant: the temporary file holds [0, size) = the cleaned batches of
// the segment's bytes [0, pos), whose raft offsets end at rbase.
type segRewrite struct {
	s    *segment
	f    vfs.File
	tmp  string
	pos  int64
	size int64
	// rbase is the raft offset of the batch at pos.
	rbase          int64
	removed        int64
	dropTombstones bool
	// idx indexes the batches written so far, each checked as it was
	// written (so the swap needs no scan of the new file).
	idx      *segIndex
	interval int64
	out      []byte
	hdr      [batch.HeaderSize]byte
	buf      []byte
}

// cleanWriteBytes is the size of the writes of a segment being cleaned.
const cleanWriteBytes = 1 << 20

// startRewrite creates s's temporary file.
func (l *Log) startRewrite(s *segment, c CleanConfig) (*segRewrite, error) {
	if err := l.loadIndex(s); err != nil {
		return nil, err
	}
	w := &segRewrite{s: s, tmp: l.path(segName(s.base, cleanTempSuffix)), rbase: s.base,
		idx: newSegIndex(), interval: l.cfg.IndexIntervalBytes}
	w.dropTombstones = s.idx.maxTs != noTimestamp && l.cfg.NowMs()-s.idx.maxTs > c.DeleteRetentionMs
	f, err := l.fs.Create(w.tmp)
	if err != nil {
		return nil, err
	}
	w.f = f
	return w, nil
}

// discard closes and removes the temporary file.
func (w *segRewrite) discard(fsys vfs.FS) {
	if w.f != nil {
		_ = w.f.Close()
		_ = fsys.Remove(w.tmp)
		w.f = nil
	}
}

// flush writes what out holds to the temporary file.
func (w *segRewrite) flush() error {
	if len(w.out) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.out, w.size); err != nil {
		return err
	}
	w.size += int64(len(w.out))
	w.out = w.out[:0]
	return nil
}

// stepRewrite rewrites the next batches of w's segment, at least one and
// at most budget bytes of them (0: all), and says whether it reached the
// segment's end.
func (l *Log) stepRewrite(w *segRewrite, p *cleanPass, budget int64, res *CleanResult) (bool, error) {
	s := w.s
	var read int64
	for w.pos < s.size && (budget == 0 || read == 0 || read < budget) {
		h, err := readHeader(s.file.f, w.pos, &w.hdr)
		if err != nil {
			return false, err
		}
		if w.pos+int64(h.Size()) > s.size {
			return false, fmt.Errorf("%w: segment %d: batch at %d runs past its end %d", ErrCorrupt, s.base, w.pos, s.size)
		}
		if cap(w.buf) < h.Size() {
			w.buf = make([]byte, h.Size())
		}
		w.buf = w.buf[:h.Size()]
		if _, err := s.file.f.ReadAt(w.buf, w.pos); err != nil {
			return false, fmt.Errorf("%w: segment %d: batch at %d: %w", ErrCorrupt, s.base, w.pos, err)
		}
		if err := w.filter(&h, p); err != nil {
			return false, err
		}
		read += int64(h.Size())
		w.pos += int64(h.Size())
		w.rbase += rwidth(&h)
		if len(w.out) >= cleanWriteBytes {
			if err := w.flush(); err != nil {
				return false, err
			}
		}
	}
	res.BytesRead += read
	if err := w.flush(); err != nil {
		return false, err
	}
	// Each step syncs what it wrote, so the swap's sync is short.
	if err := w.f.Sync(); err != nil {
		return false, err
	}
	return w.pos >= s.size, nil
}

// filter appends the batch in w.buf, with header h, to w.out without the
// records p's map supersedes and the tombstones past their retention.
func (w *segRewrite) filter(h *batch.Header, p *cleanPass) error {
	at := len(w.out)
	if !cleanedBatch(h) {
		w.out = append(w.out, w.buf...)
		return w.check(h, at)
	}
	rbase := w.rbase
	var kept int
	var err error
	w.out, kept, err = batch.Filter(w.out, w.buf, func(r *batch.Record) bool {
		if r.Key == nil {
			return true
		}
		ro := rbase + (r.Offset - h.BaseOffset)
		latest, ok := p.keys[keyPrintOf(&p.d, r.Key)]
		switch {
		case ok && latest > ro:
			return false // superseded
		case r.Value == nil && w.dropTombstones && ok && latest == ro:
			return false // a tombstone past delete.retention.ms
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: segment %d: batch at raft offset %d: %w", ErrCorrupt, w.s.base, rbase, err)
	}
	w.removed += int64(h.RecordCount) - int64(kept)
	return w.check(h, at)
}

// check asserts, before the batch written at out[at:] goes to the file,
// what must hold of it against the original's header h: a valid batch at
// the same user and raft offsets with the same epoch and max timestamp,
// and indexes it.
func (w *segRewrite) check(h *batch.Header, at int) error {
	b := w.out[at:]
	nh, err := batch.Validate(b)
	if err == nil && (nh.BaseOffset != h.BaseOffset || nh.RaftWidth() != h.RaftWidth() ||
		nh.PartitionLeaderEpoch != h.PartitionLeaderEpoch || nh.MaxTimestamp != h.MaxTimestamp) {
		err = fmt.Errorf("%w: header %+v for %+v", ErrCorrupt, nh, *h)
	}
	if err != nil {
		return fmt.Errorf("segment: cleaning segment %d: the batch rewritten at raft offset %d: %w", w.s.base, w.rbase, err)
	}
	w.idx.add(uint32(w.rbase-w.s.base), w.size+int64(at), len(b), nh.MaxTimestamp, w.interval)
	return nil
}

// finishRewrite swaps the rewritten segment in, crash-safely, or drops
// the temporary file when the segment lost nothing.
func (l *Log) finishRewrite(w *segRewrite, res *CleanResult) error {
	s, f, size := w.s, w.f, w.size
	if w.removed == 0 {
		w.discard(l.fs)
		return nil
	}
	// Every batch was checked as it was written (check) and every step
	// synced what it wrote; the file must end where the segment does.
	if w.rbase != s.last+1 {
		w.discard(l.fs)
		return fmt.Errorf("%w: cleaning segment %d of %s ended at raft offset %d, want %d", ErrCorrupt, s.base, l.dir, w.rbase, s.last+1)
	}
	if err := l.fs.Rename(w.tmp, l.path(segName(s.base, logSuffix))); err != nil {
		w.discard(l.fs)
		return err
	}
	w.f = nil // the segment's file from here
	// From here <base>.log is the cleaned segment on the file system (or,
	// until the directory sync, either one): both hold the same offsets.
	old := s.file
	res.BytesBefore += s.size
	res.BytesAfter += size
	res.Segments++
	res.RecordsRemoved += w.removed
	s.file = newSegFile(f)
	s.size, s.writtenSize, s.preallocEnd, s.zeroedEnd, s.zeroingEnd, s.droppedEnd = size, size, size, size, size, 0
	w.idx.markTime()
	s.idx = w.idx
	old.release() // spans still out keep the old file open
	if err := l.fs.SyncDir(l.dir); err != nil {
		l.poison(err)
		return l.failed
	}
	if err := l.writeIndexFiles(s); err != nil {
		// Only the index files are missing: the next open rebuilds them.
		l.lastFailure = fmt.Errorf("writing the index files of cleaned segment %d: %w", s.base, err)
	}
	return nil
}
