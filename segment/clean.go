package segment

import (
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/corestream/corestream/segment/batch"
)

// The log cleaner (docs/design/compaction.md): for a compacted topic it
// keeps, of every key, only the latest record, in sealed segments wholly
// below a limit (the high watermark). It removes records and never
// renumbers one: every batch stays at its raft and user offsets with its
// header (a batch whose records were all superseded stays as an empty
// batch), so the epochs, the markers, the offset translation and every
// reader's position keep their meaning. Consensus (zero-width and control)
// batches are kept whole.
//
// A pass runs in bounded steps (Log.Clean), on the log's goroutine:
//
//  1. map: read the dirty segments (from the first one not cleaned since
//     the log opened) and note, for every key's 128-bit fingerprint
//     (keyPrint: two xxhash digests, as wide as the MD5 Kafka's cleaner
//     keeps, so that two keys never share a slot in practice), the raft
//     offset of its latest record, at most CleanConfig.KeysMax keys and
//     BytesMax bytes; the map covers raft offsets [.., mapEnd).
//  2. rewrite, segment by segment from the log start up to mapEnd (a
//     segment over as many steps as its bytes need): drop
//     every record of a key the map holds at a higher offset, and
//     tombstones the map says are the latest once DeleteRetentionMs has
//     passed since their segment's largest timestamp. A segment is written
//     to <base>.log.clean.tmp, checked, synced, renamed over <base>.log and
//     the directory synced; a crash leaves the old segment or the new,
//     never a mix (the temporary file is removed at open). Its index files
//     are then rewritten (until they are, the old ones no longer match the
//     .log's size and are rebuilt by a scan).
//
// Records without a key and transactional batches are kept as they are.

// cleanTempSuffix ends the name a cleaned segment is written under: a
// checkpoint temporary suffix, so OpenLog removes one a crash left.
const cleanTempSuffix = ".log.clean.tmp"

// CleanKeysMaxDefault bounds the key map of one pass (entries of about 48
// bytes in a Go map: some 48 MiB).
const CleanKeysMaxDefault = 1 << 20

// CleanConfig is one cleaner step's bounds and the topic's settings.
type CleanConfig struct {
	// Limit: only sealed segments whose every offset is below Limit (raft,
	// exclusive: pass the commit index + 1) are cleaned.
	Limit int64
	// DeleteRetentionMs keeps a tombstone this long past its segment's
	// largest timestamp.
	DeleteRetentionMs int64
	// MinCompactionLagMs: a segment whose largest timestamp is younger
	// is not cleaned (nor any after it).
	MinCompactionLagMs int64
	// MinDirtyRatio: a pass starts only when the bytes not cleaned since
	// the log opened are at least this share of the cleanable bytes, or
	// (MaxCompactionLagMs > 0) when the first batch of the oldest dirty
	// segment has a timestamp at least MaxCompactionLagMs old.
	MinDirtyRatio      float64
	MaxCompactionLagMs int64
	// KeysMax bounds the key map (0: CleanKeysMaxDefault).
	KeysMax int
	// BytesMax bounds the bytes one step reads (the map) or rewrites (at
	// least one batch a step; a segment over several steps); 0: no bound.
	BytesMax int64
}

// CleanResult says what one Clean step did.
type CleanResult struct {
	// BytesRead by the map or the rewrite; BytesBefore and BytesAfter are
	// the sizes of the segments rewritten.
	BytesRead, BytesBefore, BytesAfter int64
	Segments                           int
	RecordsRemoved                     int64
	// DirtyRatio is the share of the cleanable bytes not cleaned yet,
	// when the step looked (a pass about to start).
	DirtyRatio float64
	// PassDone: this step finished a pass; Idle: there was nothing to do.
	PassDone, Idle bool
}

// cleanPass is a cleaning pass under way.
// Invariant: every offset in keys is below mapEnd; next <= mapEnd.
type cleanPass struct {
	keys map[keyPrint]int64
	// d is the seeded digest of the fingerprints' second half.
	d      xxhash.Digest
	mapEnd int64
	// next is the raft offset the next segment to rewrite starts at or
	// after.
	next int64
	// cur is the segment being rewritten (nil: none), over several steps.
	cur *segRewrite
	// limit is the CleanConfig.Limit the map was built under.
	limit int64
}

// Clean runs one bounded step of the log cleaner and says what it did.
// A pass under way survives between steps (a truncation, a reset, a close
// or a lower Limit ends it).
// Call it again (on the next tick) until Idle; the log is usable between
// steps. It never touches the active segment, a segment with an offset at
// or above c.Limit, or one not yet durable.
func (l *Log) Clean(c CleanConfig) (CleanResult, error) {
	var res CleanResult
	if err := l.usable(); err != nil {
		return res, err
	}
	if c.KeysMax <= 0 {
		c.KeysMax = CleanKeysMaxDefault
	}
	n := l.cleanable(c)
	if n == 0 {
		res.Idle = true
		return res, nil
	}
	if l.cleaner != nil && c.Limit < l.cleaner.limit {
		// The map may rest on records above the new limit (a replica's
		// limit never goes down; a caller's might): start again.
		l.dropCleaner()
	}
	if l.cleaner == nil {
		return l.startPass(c, n)
	}
	p := l.cleaner
	for {
		if p.cur == nil {
			s := l.nextToRewrite(p, n)
			if s == nil {
				l.cleanedTo = max(l.cleanedTo, p.mapEnd)
				l.cleaner = nil
				res.PassDone = true
				return res, l.persistCleaned()
			}
			if c.BytesMax > 0 && res.BytesRead >= c.BytesMax {
				return res, nil
			}
			w, err := l.startRewrite(s, c)
			if err != nil {
				l.dropCleaner()
				return res, err
			}
			p.cur = w
		}
		w := p.cur
		if !l.holds(w.s) { // retention removed it (compact,delete)
			w.discard(l.fs)
			p.cur, p.next = nil, w.s.last+1
			continue
		}
		budget := int64(0)
		if c.BytesMax > 0 {
			if budget = c.BytesMax - res.BytesRead; budget <= 0 {
				return res, nil
			}
		}
		done, err := l.stepRewrite(w, p, budget, &res)
		if err == nil && done {
			err = l.finishRewrite(w, &res)
			p.cur, p.next = nil, w.s.last+1
		}
		if err != nil {
			p.cur = nil
			l.dropCleaner()
			return res, err
		}
		if !done {
			return res, nil
		}
	}
}

// nextToRewrite is the first of the n cleanable segments the pass has not
// rewritten yet, nil when the pass is done.
func (l *Log) nextToRewrite(p *cleanPass, n int) *segment {
	for _, s := range l.segs[:n] {
		if s.base < p.next || s.base < l.logStart {
			continue
		}
		if s.base >= p.mapEnd {
			return nil
		}
		return s
	}
	return nil
}

// holds reports whether s is still one of the log's segments.
func (l *Log) holds(s *segment) bool {
	i := l.segFor(s.base)
	return i >= 0 && l.segs[i] == s
}

// dropCleaner ends the pass under way, if any, removing the temporary
// file of a segment being rewritten (a truncation, a reset, a close, a
// failed step).
func (l *Log) dropCleaner() {
	if l.cleaner != nil && l.cleaner.cur != nil {
		l.cleaner.cur.discard(l.fs)
	}
	l.cleaner = nil
}

// cleanable is how many of the first segments may be cleaned now: sealed
// (and no seal in flight), durable, wholly below c.Limit, old enough for
// c.MinCompactionLagMs.
func (l *Log) cleanable(c CleanConfig) int {
	now := l.cfg.NowMs()
	n := 0
	for n < len(l.segs)-1 {
		s := l.segs[n]
		if !s.sealed || s.sealing || s.last >= c.Limit || s.last > l.durable || s.writtenSize != s.size || s.damaged != nil {
			break
		}
		if c.MinCompactionLagMs > 0 {
			if err := l.loadIndex(s); err != nil || s.idx.maxTs != noTimestamp && now-s.idx.maxTs < c.MinCompactionLagMs {
				break
			}
		}
		n++
	}
	return n
}

// DirtyRatio is the share of the log's sealed bytes that no cleaning pass
// since the log opened has covered.
func (l *Log) DirtyRatio() float64 {
	var total, dirty int64
	for _, s := range l.segs[:len(l.segs)-1] {
		total += s.size
		if s.last >= l.cleanedTo {
			dirty += s.size
		}
	}
	if total == 0 {
		return 0
	}
	return float64(dirty) / float64(total)
}

// startPass maps the dirty part of the first n segments, when it is a
// large enough share of them.
func (l *Log) startPass(c CleanConfig, n int) (CleanResult, error) {
	var res CleanResult
	var total, dirty int64
	first := -1
	for i, s := range l.segs[:n] {
		total += s.size
		if s.last >= l.cleanedTo {
			dirty += s.size
			if first < 0 {
				first = i
			}
		}
	}
	if total > 0 {
		res.DirtyRatio = float64(dirty) / float64(total)
	}
	if first < 0 || res.DirtyRatio < c.MinDirtyRatio && !l.overdue(l.segs[first], c) {
		res.Idle = true
		return res, nil
	}
	p := &cleanPass{keys: make(map[keyPrint]int64), next: l.logStart, limit: c.Limit}
	p.mapEnd = l.segs[first].base
	full := false
	for _, s := range l.segs[first:n] {
		err := l.eachBatch(s, func(b []byte, h *batch.Header, rbase int64) (bool, error) {
			if c.BytesMax > 0 && res.BytesRead > 0 && res.BytesRead+int64(len(b)) > c.BytesMax ||
				len(p.keys) > 0 && len(p.keys)+int(h.RecordCount) > c.KeysMax {
				full = true
				return false, nil
			}
			res.BytesRead += int64(len(b))
			if cleanedBatch(h) {
				var it batch.Records
				if err := it.Reset(b); err != nil {
					return false, err
				}
				for it.Next() {
					if r := it.Record(); r.Key != nil {
						p.keys[keyPrintOf(&p.d, r.Key)] = rbase + (r.Offset - h.BaseOffset)
					}
				}
				if err := it.Err(); err != nil {
					return false, fmt.Errorf("%w: batch at raft offset %d: %w", ErrCorrupt, rbase, err)
				}
			}
			p.mapEnd = rbase + rwidth(h)
			return true, nil
		})
		if err != nil {
			return res, err
		}
		if full {
			break
		}
	}
	if p.mapEnd > l.segs[first].base {
		l.cleaner = p
	} else {
		res.Idle = true
	}
	return res, nil
}

// overdue says whether dirty segment s holds a record that has waited
// c.MaxCompactionLagMs or more: its first batch's timestamp (Kafka's
// rule, KIP-354) is that old.
func (l *Log) overdue(s *segment, c CleanConfig) bool {
	if c.MaxCompactionLagMs <= 0 || l.loadIndex(s) != nil || len(s.idx.time) == 0 {
		return false
	}
	return l.cfg.NowMs()-s.idx.time[0].ts >= c.MaxCompactionLagMs
}

// keyPrint is a key's fingerprint in the cleaner's map: 128 bits, so
// that two keys of one pass share one with a chance of about n²/2¹²⁹ (for
// a million keys, 10⁻²⁷), where a collision would clean away the
// latest record of one of them. A key's bytes are not kept: a map of
// KeysMax fingerprints is bounded, one of keys is not.
type keyPrint [2]uint64

// keyPrintSeed seeds the second half of a fingerprint.
const keyPrintSeed = 0x9e3779b97f4a7c15

// keyPrintOf is the fingerprint of key, d the pass's digest (the
// tests give a weaker one, to make keys collide on purpose).
var keyPrintOf = func(d *xxhash.Digest, key []byte) keyPrint {
	d.ResetWithSeed(keyPrintSeed)
	_, _ = d.Write(key)
	return keyPrint{xxhash.Sum64(key), d.Sum64()}
}

// cleanedBatch says whether the cleaner looks into a batch's records:
// data batches, not control (consensus, transaction markers) nor
// transactional ones, which stay whole.
func cleanedBatch(h *batch.Header) bool {
	return !h.IsControl() && !h.IsTransactional() && h.RecordCount > 0
}

// eachBatch calls fn with every batch of sealed segment s (its bytes,
// valid during the call, its header and raft base) until fn returns false.
func (l *Log) eachBatch(s *segment, fn func(b []byte, h *batch.Header, rbase int64) (bool, error)) error {
	var hdr [batch.HeaderSize]byte
	var buf []byte
	rbase := s.base
	for pos := int64(0); pos < s.size; {
		h, err := readHeader(s.file.f, pos, &hdr)
		if err != nil {
			return err
		}
		if pos+int64(h.Size()) > s.size {
			return fmt.Errorf("%w: segment %d: batch at %d runs past its end %d", ErrCorrupt, s.base, pos, s.size)
		}
		if cap(buf) < h.Size() {
			buf = make([]byte, h.Size())
		}
		buf = buf[:h.Size()]
		if _, err := s.file.f.ReadAt(buf, pos); err != nil {
			return fmt.Errorf("%w: segment %d: batch at %d: %w", ErrCorrupt, s.base, pos, err)
		}
		more, err := fn(buf, &h, rbase)
		if err != nil || !more {
			return err
		}
		pos += int64(h.Size())
		rbase += rwidth(&h)
	}
	return nil
}
