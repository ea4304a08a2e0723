package partition

import (
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
)

// SegmentChunkBytesMax bounds one chunk of a segment sent whole, so a
// large segment never holds the peer link for long (the peer protocol's
// bound is the same).
const SegmentChunkBytesMax = 1 << 20

// SegmentPlan decides whether the primary sends a follower the sealed
// segment starting at match+1 whole instead of appends
// (docs/design/moves.md, "Catch-up by whole segments"). match is the
// offset the primary knows the follower's log matches its own at;
// commit the commit offset; sealed the primary's whole sealed segments
// in order (segment.Log.SealedSegments), activeBytes the size of its
// active segment and segmentBytes the configured segment size.
//
// A segment goes whole only when it starts right after match (segments
// never repair a divergent log, and boundaries line up from there), it
// is wholly committed (no replica can truncate it), and the follower is
// more than one segment behind (for a few batches, appends are cheaper
// than a file, a sync and a rename).
func SegmentPlan(match, commit int64, sealed []segment.SealedSegment, activeBytes, segmentBytes int64) (segment.SealedSegment, bool) {
	for i, s := range sealed {
		if s.Base != match+1 {
			continue
		}
		if s.Last > commit {
			return segment.SealedSegment{}, false
		}
		behind := activeBytes
		for _, t := range sealed[i:] {
			behind += t.Bytes
		}
		return s, behind > segmentBytes
	}
	return segment.SealedSegment{}, false
}

// SegmentChunk is one chunk of a sealed segment on its way to a follower,
// the fields of the peer protocol's Segment frame.
type SegmentChunk struct {
	From, To  raftlite.NodeID
	Term      int32
	Base      int64
	Last      int64
	LastTerm  int32
	FileBytes int64
	Pos       int64
	// Data is the chunk (receiver side); the sender sends Span instead.
	Data []byte
	// Span is the chunk in the primary's segment file (sender side, to
	// send by sendfile; released by whoever sends it).
	Span segment.Span
}

// Segment transfer outcomes a follower reports (SegmentAnswer.Status).
const (
	// SegmentMore: the follower holds Held bytes and wants the rest.
	SegmentMore byte = 0
	// SegmentAdopted: the segment is part of the follower's log.
	SegmentAdopted byte = 1
	// SegmentRefused: the follower could not take it (its log does not
	// end at the segment's base, or the file did not check out); the
	// primary falls back to appends for it.
	SegmentRefused byte = 2
)

// SegmentAnswer is a follower's answer to a chunk.
type SegmentAnswer struct {
	From   raftlite.NodeID
	Term   int32
	Base   int64
	Held   int64
	Status byte
}

// segTransfer is the primary's state of one segment on its way to one
// follower: at most one chunk in flight, the next chunk from where the
// follower says it stands.
type segTransfer struct {
	seg      segment.SealedSegment
	lastTerm int32
	// next is the position of the next chunk to send; inFlight says one
	// was sent and not answered (ticks counts the ticks since, for a
	// resend after a lost chunk or answer).
	next     int64
	inFlight bool
	ticks    int32
}

// segResendTicks is how long a chunk may go unanswered before it is sent
// again (a chunk or its answer was lost with the link).
const segResendTicks = 20

// nextChunk returns the position and length of the chunk to send now, or
// ok false while one is in flight or everything was sent.
func (t *segTransfer) nextChunk(chunkMax int64) (pos, n int64, ok bool) {
	if t.inFlight || t.next >= t.seg.Bytes {
		return 0, 0, false
	}
	return t.next, min(chunkMax, t.seg.Bytes-t.next), true
}

// sent records that the chunk from nextChunk went.
func (t *segTransfer) sent() { t.inFlight, t.ticks = true, 0 }

// tick counts a tick; after segResendTicks without an answer the chunk
// is sent again.
func (t *segTransfer) tick() {
	if t.inFlight {
		if t.ticks++; t.ticks >= segResendTicks {
			t.inFlight = false
		}
	}
}

// answered applies the follower's answer; done says the transfer is over
// (adopted or refused).
func (t *segTransfer) answered(a SegmentAnswer) (done bool) {
	if a.Base != t.seg.Base {
		return false // an answer to an earlier transfer
	}
	switch a.Status {
	case SegmentAdopted, SegmentRefused:
		return true
	}
	t.inFlight = false
	t.next = min(max(a.Held, 0), t.seg.Bytes)
	return false
}
