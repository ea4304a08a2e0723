package partition

import (
	"fmt"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
)

// segReceiver is a follower's side of catch-up by whole segments: it
// writes the chunks of one segment, in order, into the log's temporary
// name for it and, after the last one, has the log adopt the file
// (segment.Log.AdoptSegment: synced, validated, renamed). A crash leaves
// the temporary file, which the next OpenLog removes: the transfer then
// starts again from the log's end.
type segReceiver struct {
	fs  vfs.FS
	cur *segReceive
}

// segFileBytesMax bounds the file a primary may announce: positions in a
// segment are 32-bit.
const segFileBytesMax = 1<<31 - 1

// segReceive is the segment being received.
type segReceive struct {
	base, last int64
	lastTerm   int32
	fileBytes  int64
	f          vfs.File
	// held is how many bytes of the file are written.
	held int64
}

// receive takes one chunk for log l and returns how many bytes of the
// segment the follower holds and the status to answer with. An error
// comes with SegmentRefused and says why (the primary falls back to
// appends); a chunk that is not the next one is answered with the
// position the follower wants, so the primary resends from there.
func (rc *segReceiver) receive(l *segment.Log, c *SegmentChunk) (held int64, status byte, err error) {
	if cur := rc.cur; cur != nil && (cur.base != c.Base || cur.last != c.Last || cur.fileBytes != c.FileBytes || cur.lastTerm != c.LastTerm) {
		rc.abort(l) // a new transfer replaces one the primary gave up
	}
	if rc.cur == nil {
		if c.Pos != 0 {
			return 0, SegmentMore, nil
		}
		if end := l.LogEndOffset(); end != c.Base {
			return 0, SegmentRefused, fmt.Errorf("%w: the log ends at %d, the segment starts at %d", segment.ErrAdopt, end, c.Base)
		}
		if c.FileBytes <= 0 || c.FileBytes > segFileBytesMax {
			return 0, SegmentRefused, fmt.Errorf("%w: a segment file of %d bytes (at most %d)", segment.ErrAdopt, c.FileBytes, int64(segFileBytesMax))
		}
		f, err := rc.fs.Create(l.AdoptTempPath(c.Base))
		if err != nil {
			return 0, SegmentRefused, fmt.Errorf("creating the file for segment %d: %w", c.Base, err)
		}
		rc.cur = &segReceive{base: c.Base, last: c.Last, lastTerm: c.LastTerm, fileBytes: c.FileBytes, f: f}
	}
	cur := rc.cur
	if c.Pos != cur.held || c.Pos+int64(len(c.Data)) > cur.fileBytes {
		return cur.held, SegmentMore, nil
	}
	if _, err := cur.f.WriteAt(c.Data, c.Pos); err != nil {
		rc.abort(l)
		return 0, SegmentRefused, fmt.Errorf("writing segment %d: %w", c.Base, err)
	}
	cur.held += int64(len(c.Data))
	if cur.held < cur.fileBytes {
		return cur.held, SegmentMore, nil
	}
	rc.cur = nil
	if err := cur.f.Close(); err != nil {
		_ = rc.fs.Remove(l.AdoptTempPath(cur.base))
		return 0, SegmentRefused, fmt.Errorf("closing segment %d: %w", cur.base, err)
	}
	if err := l.AdoptSegment(cur.base, cur.last, cur.lastTerm); err != nil {
		return 0, SegmentRefused, err
	}
	return cur.fileBytes, SegmentAdopted, nil
}

// abort drops the segment being received and its file.
func (rc *segReceiver) abort(l *segment.Log) {
	if cur := rc.cur; cur != nil {
		rc.cur = nil
		_ = cur.f.Close()
		_ = rc.fs.Remove(l.AdoptTempPath(cur.base))
	}
}
