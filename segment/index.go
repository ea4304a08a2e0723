package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
)

// Index files. Both are written whole (when a segment is sealed, and for
// the active segment on a clean close), carry a version and a CRC-32C, and
// are rebuilt by scanning the .log when missing or inconsistent.
//
// <base>.index (big-endian; never changes):
//
//	 0  magic        [4]byte  "CSIX"
//	 4  version      uint16   = 1
//	 6  reserved     uint16   = 0
//	 8  baseOffset   int64    the segment's base offset
//	16  logBytes     int64    size of the .log this index describes
//	24  lastOffset   int64    last offset in the segment (base-1: empty)
//	32  count        uint32
//	36  entries      count × { relOffset uint32, position uint32 }
//	..  crc          uint32   CRC-32C of every byte before it
//
// An entry (r, p) says: the batch whose base offset is baseOffset+r starts
// at byte p of the .log. Entries strictly increase in both fields.
//
// <base>.timeindex (big-endian; never changes):
//
//	 0  magic        [4]byte  "CSTI"
//	 4  version      uint16   = 1
//	 6  reserved     uint16   = 0
//	 8  baseOffset   int64
//	16  logBytes     int64
//	24  maxTimestamp int64    largest batch maxTimestamp in the segment
//	32  maxTsRel     uint32   relative base offset of the batch holding it
//	36  count        uint32
//	40  entries      count × { timestamp int64, relOffset uint32 }
//	..  crc          uint32
//
// An entry (t, r) says: every batch before the one at baseOffset+r has a
// maxTimestamp <= t, and that batch's is t. Timestamps strictly increase.

const (
	indexMagic         = "CSIX"
	timeIndexMagic     = "CSTI"
	indexVersion       = 1
	indexHeaderSize    = 36
	indexEntrySize     = 8
	timeIndexHeader    = 40
	timeIndexEntrySize = 12
	// indexEntriesMax bounds the entries one index file may declare
	// (a 2 GiB segment indexed every 64 bytes).
	indexEntriesMax = SegmentBytesMax / 64
)

// noTimestamp is the maxTimestamp of a segment with no batch.
const noTimestamp = -1 << 63

type indexEntry struct{ rel, pos uint32 }

type timeEntry struct {
	ts  int64
	rel uint32
}

// segIndex is a segment's sparse offset and time index in memory.
// Invariants: off and time strictly increase in every field; maxTs is the
// largest maxTimestamp of the segment's batches (noTimestamp when none).
type segIndex struct {
	off      []indexEntry
	time     []timeEntry
	maxTs    int64
	maxTsRel uint32
	// sinceBytes counts log bytes appended since the last offset entry.
	sinceBytes int64
}

func newSegIndex() *segIndex { return &segIndex{maxTs: noTimestamp} }

// add records the batch at pos. REQUIRES: batches are added in log order.
func (x *segIndex) add(rel uint32, pos int64, size int, maxTs int64, intervalBytes int64) {
	if pos > 0 && x.sinceBytes >= intervalBytes {
		x.off = append(x.off, indexEntry{rel: rel, pos: uint32(pos)})
		x.sinceBytes = 0
		x.markTime()
	}
	x.sinceBytes += int64(size)
	if maxTs > x.maxTs {
		x.maxTs, x.maxTsRel = maxTs, rel
	}
}

// markTime records the running maximum timestamp if it grew.
func (x *segIndex) markTime() {
	if x.maxTs == noTimestamp {
		return
	}
	if n := len(x.time); n == 0 || x.maxTs > x.time[n-1].ts {
		x.time = append(x.time, timeEntry{ts: x.maxTs, rel: x.maxTsRel})
	}
}

// floor returns the position of the indexed batch with the largest
// relative offset <= rel (0 when none).
func (x *segIndex) floor(rel uint32) (pos int64, at uint32, ok bool) {
	i := sort.Search(len(x.off), func(i int) bool { return x.off[i].rel > rel })
	if i == 0 {
		return 0, 0, false
	}
	e := x.off[i-1]
	return int64(e.pos), e.rel, true
}

// truncate drops everything about batches at relative offsets >= rel and
// positions >= pos. maxTs is recomputed by the caller (truncateTimes).
func (x *segIndex) truncate(rel uint32, pos int64) {
	i := sort.Search(len(x.off), func(i int) bool { return int64(x.off[i].pos) >= pos || x.off[i].rel >= rel })
	x.off = x.off[:i]
	j := sort.Search(len(x.time), func(j int) bool { return x.time[j].rel >= rel })
	x.time = x.time[:j]
	x.maxTs, x.maxTsRel = noTimestamp, 0
	if j > 0 {
		x.maxTs, x.maxTsRel = x.time[j-1].ts, x.time[j-1].rel
	}
	x.sinceBytes = 0
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func encodeIndex(base, logBytes, last int64, x *segIndex) []byte {
	be := binary.BigEndian
	b := make([]byte, indexHeaderSize+len(x.off)*indexEntrySize+4)
	copy(b, indexMagic)
	be.PutUint16(b[4:], indexVersion)
	be.PutUint64(b[8:], uint64(base))
	be.PutUint64(b[16:], uint64(logBytes))
	be.PutUint64(b[24:], uint64(last))
	be.PutUint32(b[32:], uint32(len(x.off)))
	p := indexHeaderSize
	for _, e := range x.off {
		be.PutUint32(b[p:], e.rel)
		be.PutUint32(b[p+4:], e.pos)
		p += indexEntrySize
	}
	be.PutUint32(b[p:], crc32.Checksum(b[:p], crcTable))
	return b
}

func encodeTimeIndex(base, logBytes int64, x *segIndex) []byte {
	be := binary.BigEndian
	b := make([]byte, timeIndexHeader+len(x.time)*timeIndexEntrySize+4)
	copy(b, timeIndexMagic)
	be.PutUint16(b[4:], indexVersion)
	be.PutUint64(b[8:], uint64(base))
	be.PutUint64(b[16:], uint64(logBytes))
	be.PutUint64(b[24:], uint64(x.maxTs))
	be.PutUint32(b[32:], x.maxTsRel)
	be.PutUint32(b[36:], uint32(len(x.time)))
	p := timeIndexHeader
	for _, e := range x.time {
		be.PutUint64(b[p:], uint64(e.ts))
		be.PutUint32(b[p+8:], e.rel)
		p += timeIndexEntrySize
	}
	be.PutUint32(b[p:], crc32.Checksum(b[:p], crcTable))
	return b
}

// checkFile verifies magic, version, length and CRC of an index file with
// the given header size and entry size, returning the entry count.
func checkFile(b []byte, magic string, header, entry, countAt int) (int, error) {
	be := binary.BigEndian
	if len(b) < header+4 || string(b[:4]) != magic {
		return 0, fmt.Errorf("%w: %s file of %d bytes", ErrCorrupt, magic, len(b))
	}
	if v := be.Uint16(b[4:]); v != indexVersion {
		return 0, fmt.Errorf("%w: %s version %d", ErrCorrupt, magic, v)
	}
	n := be.Uint32(b[countAt:])
	if n > indexEntriesMax || header+int(n)*entry+4 != len(b) {
		return 0, fmt.Errorf("%w: %s count %d in %d bytes", ErrCorrupt, magic, n, len(b))
	}
	end := len(b) - 4
	if crc32.Checksum(b[:end], crcTable) != be.Uint32(b[end:]) {
		return 0, fmt.Errorf("%w: %s checksum", ErrCorrupt, magic)
	}
	return int(n), nil
}

// decodeIndex checks an .index file against the segment it should
// describe and fills x.off.
func decodeIndex(b []byte, base, logBytes, last int64, x *segIndex) error {
	n, err := checkFile(b, indexMagic, indexHeaderSize, indexEntrySize, 32)
	if err != nil {
		return err
	}
	be := binary.BigEndian
	if int64(be.Uint64(b[8:])) != base || int64(be.Uint64(b[16:])) != logBytes || int64(be.Uint64(b[24:])) != last {
		return fmt.Errorf("%w: index describes another log (base %d, %d bytes, last %d)", ErrCorrupt,
			int64(be.Uint64(b[8:])), int64(be.Uint64(b[16:])), int64(be.Uint64(b[24:])))
	}
	off := make([]indexEntry, n)
	p := indexHeaderSize
	for i := range off {
		off[i] = indexEntry{rel: be.Uint32(b[p:]), pos: be.Uint32(b[p+4:])}
		p += indexEntrySize
		if int64(off[i].pos) >= logBytes || int64(off[i].rel) > last-base ||
			(i > 0 && (off[i].rel <= off[i-1].rel || off[i].pos <= off[i-1].pos)) {
			return fmt.Errorf("%w: index entry %d (%d, %d) out of order or range", ErrCorrupt, i, off[i].rel, off[i].pos)
		}
	}
	x.off = off
	return nil
}

// decodeTimeIndex checks a .timeindex file and fills x.time and maxTs.
func decodeTimeIndex(b []byte, base, logBytes, last int64, x *segIndex) error {
	n, err := checkFile(b, timeIndexMagic, timeIndexHeader, timeIndexEntrySize, 36)
	if err != nil {
		return err
	}
	be := binary.BigEndian
	if int64(be.Uint64(b[8:])) != base || int64(be.Uint64(b[16:])) != logBytes {
		return fmt.Errorf("%w: time index describes another log", ErrCorrupt)
	}
	x.maxTs, x.maxTsRel = int64(be.Uint64(b[24:])), be.Uint32(b[32:])
	tm := make([]timeEntry, n)
	p := timeIndexHeader
	for i := range tm {
		tm[i] = timeEntry{ts: int64(be.Uint64(b[p:])), rel: be.Uint32(b[p+8:])}
		p += timeIndexEntrySize
		if int64(tm[i].rel) > last-base || tm[i].ts > x.maxTs || (i > 0 && tm[i].ts <= tm[i-1].ts) {
			return fmt.Errorf("%w: time index entry %d out of order or range", ErrCorrupt, i)
		}
	}
	x.time = tm
	return nil
}
