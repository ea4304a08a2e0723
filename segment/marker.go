package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/checkpoint"
)

// A marker is a small payload the log keeps in memory for a chosen batch,
// so that a question about the batch never reads the segment files: the
// consensus layer marks its configuration entries (raftlite.ConfLog asks
// which configuration is in force at an offset, on every restart and
// every truncation). The log does not interpret payloads.
//
// The markers live in their own checkpoint file, written through: every
// change is durable before the call that made it returns, and a marker is
// durable before its batch is appended. After a crash the file may
// therefore name a batch the log lost (its offset is at or past the log
// end, and recovery drops it), but never miss a marked batch the log kept.
// The marker of offset LogStartOffset-1 (the base: the one in force when
// the log starts, after retention or a Reset removed its batch) is kept in
// the log-start checkpoint, written in the same step that moves the start.
//
// Writing a checkpoint per marked batch costs a create, an fsync, a rename
// and a directory sync on the shard's thread: markers are for rare batches
// (a membership change), never for data.

// Marker is one marked batch: Offset is the batch's last offset (or
// LogStartOffset-1 for the base), Payload the caller's bytes.
type Marker struct {
	Offset  int64
	Payload []byte
}

// MarkerBytesMax bounds one marker's payload.
const MarkerBytesMax = 255

// MarkersMax bounds the markers above the log start (AppendLeaderMarked
// refuses more; retention frees them), so that the checkpoint stays far
// below the checkpoint format's 16 MiB and a decoder refuses more before
// it allocates. A partition group that changed members 16,384 times
// within its retained log is not a case to serve.
const MarkersMax = 1 << 14

// The markers checkpoint: payload version 1 is
// count uint32, then count × { offset int64, len uint8, payload }, offsets
// strictly increasing.
var markersKind = checkpoint.Kind{'M', 'R', 'K', 'R'}

const (
	markersFile    = "markers.checkpoint"
	markersVersion = 1
)

// MarkerControlKey is the record key of a marker batch built by
// MarkerBatch: Kafka's control-record key (version 0, type -2; -1 is the
// consensus no-op, 0 and 1 Kafka's transaction markers). Consumers skip
// control batches.
var MarkerControlKey = batch.ConsensusKeyConf

// MarkerBatch builds the one-record control batch that carries payload as
// its record's value: the on-disk and on-wire form of a marked batch (a
// consensus configuration entry). REQUIRES: len(payload) <= MarkerBytesMax.
func MarkerBatch(payload []byte, nowMs int64) []byte {
	return batch.BuildConsensus(MarkerControlKey, payload, nowMs, true)
}

// MarkerBatchWide is MarkerBatch taking one user offset (not zero-width):
// the form of the node's internal logs, whose readers work in raft
// offsets (docs/design/offsets.md).
func MarkerBatchWide(payload []byte, nowMs int64) []byte {
	return batch.BuildConsensus(MarkerControlKey, payload, nowMs, false)
}

// markerShaped reports whether h may be a marked batch: a one-record
// control batch, zero-width or of one offset.
func markerShaped(h *batch.Header) bool {
	return h.IsControl() && h.RecordCount == 1 && (h.LastOffsetDelta == -1 || h.LastOffsetDelta == 0)
}

// MarkerPayload returns the payload of a batch built by MarkerBatch, or
// false when b is not one (not a one-record control batch with
// MarkerControlKey). It validates b.
func MarkerPayload(b []byte) ([]byte, bool) {
	var it batch.Records
	if err := it.Reset(b); err != nil {
		return nil, false
	}
	h := it.Header()
	if !markerShaped(&h) || !it.Next() {
		return nil, false
	}
	r := it.Record()
	if string(r.Key) != string(MarkerControlKey) || len(r.Value) > MarkerBytesMax {
		return nil, false
	}
	return append([]byte(nil), r.Value...), true
}

// markerCache is the log's markers above the log start.
// Invariant: offsets strictly increase and lie in [logStart, leo) once
// recovery is done, except for markers written ahead of their batch (at
// leo) and markers a rewind left at or past leo, which the next append
// over them drops (dropMarkersFrom).
type markerCache struct {
	entries []Marker
}

// AppendLeaderMarked is AppendLeader for a batch that carries a marker
// with payload: the marker is made durable first (see Marker), then the
// batch is appended. Errors are AppendLeader's, ErrInvalidBatch for a
// batch of more than one offset, a payload over MarkerBytesMax or a log
// holding MarkersMax markers, or a file-system error from persisting the
// marker, with nothing appended. It costs a checkpoint write (measured
// about 1.5 ms on the development machine's disk, against 12 µs for a plain append:
// BenchmarkAppendLeaderMarked).
func (l *Log) AppendLeaderMarked(b []byte, epoch int32, payload []byte) (base, last int64, err error) {
	if err := l.appendable(); err != nil {
		return 0, 0, err
	}
	if len(payload) > MarkerBytesMax {
		return 0, 0, fmt.Errorf("%w: marker of %d bytes, at most %d", ErrInvalidBatch, len(payload), MarkerBytesMax)
	}
	h, err := l.validate(b)
	if err != nil {
		return 0, 0, err
	}
	if !markerShaped(&h) {
		return 0, 0, fmt.Errorf("%w: a marked batch is a one-record control batch of at most one offset, this one holds %d", ErrInvalidBatch, h.LastOffsetDelta+1)
	}
	if err := l.dropMarkersFrom(l.leo); err != nil {
		return 0, 0, err
	}
	if len(l.markers.entries) >= MarkersMax {
		return 0, 0, fmt.Errorf("%w: the log holds %d marked batches above its start, at most %d", ErrInvalidBatch, len(l.markers.entries), MarkersMax)
	}
	// A roll inside AppendLeader does not move leo; a rewind would fail
	// the append (ErrNoSpace) and leave this marker at leo for the next
	// append to drop.
	at := l.leo
	l.markers.entries = append(l.markers.entries, Marker{Offset: at, Payload: append([]byte(nil), payload...)})
	if err := l.persistMarkers(); err != nil {
		l.markers.entries = l.markers.entries[:len(l.markers.entries)-1]
		return 0, 0, err
	}
	base, last, err = l.appendLeader(b, epoch)
	if err == nil && base != at {
		return base, last, fmt.Errorf("%w: marked batch appended at %d, marker at %d", ErrCorrupt, base, at)
	}
	return base, last, err
}

// MarkerAt returns the marker in force at offset: the last one at or
// below it, or the base (at LogStartOffset-1) when none is, for offset in
// [LogStartOffset-1, LogEndOffset). ok is false when there is none.
func (l *Log) MarkerAt(offset int64) (Marker, bool) {
	es := l.markers.entries
	i := sort.Search(len(es), func(i int) bool { return es[i].Offset > offset })
	for i > 0 && es[i-1].Offset >= l.leo {
		i-- // written ahead of a batch a rewind took back
	}
	if i > 0 && es[i-1].Offset >= l.logStart {
		return es[i-1], true
	}
	if l.markerBase != nil && offset >= l.logStart-1 {
		return Marker{Offset: l.logStart - 1, Payload: l.markerBase}, true
	}
	return Marker{}, false
}

// MarkerOf returns the marker of the batch ending at offset last, if it
// has one.
func (l *Log) MarkerOf(last int64) (Marker, bool) {
	m, ok := l.MarkerAt(last)
	if !ok || m.Offset != last || last < l.logStart {
		return Marker{}, false
	}
	return m, true
}

// Markers returns a copy of the markers above the log start, in order.
func (l *Log) Markers() []Marker { return append([]Marker(nil), l.markers.entries...) }

// dropMarkersFrom drops, durably, the markers at or past off (their
// batches are gone: a truncation, a rewind). Nothing to do is the common
// case and costs a comparison.
func (l *Log) dropMarkersFrom(off int64) error {
	es := l.markers.entries
	if len(es) == 0 || es[len(es)-1].Offset < off {
		return nil
	}
	i := sort.Search(len(es), func(i int) bool { return es[i].Offset >= off })
	if i == len(es) {
		return nil
	}
	l.markers.entries = es[:i]
	return l.persistMarkers()
}

// dropMarkersBelow forgets the markers below start (retention moved the
// log start past them; the base now carries the one in force). Not
// persisted: recovery drops markers below the log start.
func (l *Log) dropMarkersBelow(start int64) {
	es := l.markers.entries
	i := sort.Search(len(es), func(i int) bool { return es[i].Offset >= start })
	if i > 0 {
		l.markers.entries = append(es[:0:0], es[i:]...)
	}
}

func (l *Log) persistMarkers() error {
	return checkpoint.Write(l.fs, l.path(markersFile), markersKind, markersVersion, encodeMarkers(l.markers.entries))
}

// recoverMarkers loads the markers checkpoint and drops what lies outside
// [logStart, leo): below, retention or a reset moved past it; at or past
// the end, the batch never reached the disk or a truncation removed it
// before the file said so. REQUIRES: logStart and leo recovered.
func (l *Log) recoverMarkers() error {
	v, p, err := checkpoint.Read(l.fs, l.path(markersFile), markersKind)
	if errors.Is(err, fs.ErrNotExist) {
		l.markers = markerCache{}
		return nil // a log that never held a marker
	}
	var es []Marker
	if err == nil {
		es, err = decodeMarkers(v, p)
	}
	if err != nil {
		// Damaged: the batches themselves say which are marked.
		l.report.MarkersRebuilt = true
		if err := l.rebuildMarkers(); err != nil {
			return err
		}
		return l.persistMarkers()
	}
	n := len(es)
	i := sort.Search(len(es), func(i int) bool { return es[i].Offset >= l.logStart })
	j := sort.Search(len(es), func(i int) bool { return es[i].Offset >= l.leo })
	l.markers = markerCache{entries: es[i:j]}
	if j-i != n {
		return l.persistMarkers()
	}
	return nil
}

// rebuildMarkers walks every batch header of the log and reads the
// one-record control batches back (MarkerPayload): the fallback when the
// checkpoint is damaged. Bounded by the log's batches.
func (l *Log) rebuildMarkers() error {
	l.markers = markerCache{}
	var buf []byte
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
			if markerShaped(&h) && at >= l.logStart && h.Size() <= batch.HeaderSize+64+MarkerBytesMax {
				buf = append(buf[:0], make([]byte, h.Size())...)
				if _, err := s.file.f.ReadAt(buf, pos); err != nil {
					return fmt.Errorf("%w: batch at %d: %w", ErrCorrupt, pos, err)
				}
				if p, ok := MarkerPayload(buf); ok {
					l.markers.entries = append(l.markers.entries, Marker{Offset: at, Payload: p})
				}
			}
			pos += int64(h.Size())
			at, unext = at+rwidth(&h), h.LastOffset()+1
		}
	}
	return nil
}

func encodeMarkers(es []Marker) []byte {
	n := 4
	for _, m := range es {
		n += 8 + 1 + len(m.Payload)
	}
	b := make([]byte, 4, n)
	binary.BigEndian.PutUint32(b, uint32(len(es)))
	for _, m := range es {
		b = binary.BigEndian.AppendUint64(b, uint64(m.Offset))
		b = append(b, byte(len(m.Payload)))
		b = append(b, m.Payload...)
	}
	return b
}

func decodeMarkers(version uint16, b []byte) ([]Marker, error) {
	if version != markersVersion || len(b) < 4 {
		return nil, fmt.Errorf("%w: markers checkpoint version %d, %d bytes", ErrCorrupt, version, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if n > MarkersMax || int(n)*9 > len(b)-4 {
		return nil, fmt.Errorf("%w: markers checkpoint count %d in %d bytes", ErrCorrupt, n, len(b))
	}
	out := make([]Marker, n)
	p := 4
	for i := range out {
		if p+9 > len(b) {
			return nil, fmt.Errorf("%w: markers checkpoint entry %d cut short", ErrCorrupt, i)
		}
		off, size := int64(binary.BigEndian.Uint64(b[p:])), int(b[p+8])
		p += 9
		if p+size > len(b) || off < 0 || (i > 0 && off <= out[i-1].Offset) {
			return nil, fmt.Errorf("%w: markers checkpoint entry %d bad", ErrCorrupt, i)
		}
		out[i] = Marker{Offset: off, Payload: append([]byte(nil), b[p:p+size]...)}
		p += size
	}
	if p != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the markers", ErrCorrupt, len(b)-p)
	}
	return out, nil
}
