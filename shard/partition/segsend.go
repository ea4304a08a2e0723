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
// follower: up to segWindowChunks chunks in flight, so the copy is not one
// round trip per chunk; the follower answers each with the bytes it holds,
// and the primary goes back to that position when an answer does not
// move it (a chunk lost with the link, or the follower restarted).
type segTransfer struct {
	seg      segment.SealedSegment
	lastTerm int32
	// acked is what the follower holds, next the position of the next
	// chunk to send; ticks counts the ticks without progress while
	// chunks are in flight (a resend from acked after segResendTicks).
	acked, next int64
	ticks       int32
	// rewound: next went back to acked since the last progress.
	rewound bool
}

// segWindowChunks bounds the chunks in flight to one follower.
const segWindowChunks = 4

// segResendTicks is how long chunks may go unanswered before they are
// sent again from the follower's position (a chunk or its answer was
// lost with the link).
const segResendTicks = 20

// nextChunk returns the position and length of a chunk to send now, or ok
// false while the window is full or everything was sent.
func (t *segTransfer) nextChunk(chunkMax int64) (pos, n int64, ok bool) {
	if t.next >= t.seg.Bytes || t.next >= t.acked+segWindowChunks*chunkMax {
		return 0, 0, false
	}
	return t.next, min(chunkMax, t.seg.Bytes-t.next), true
}

// sent records that the chunk from nextChunk went.
func (t *segTransfer) sent(n int64) {
	if t.next == t.acked {
		t.ticks = 0
	}
	t.next += n
}

// tick counts a tick; after segResendTicks without progress the chunks
// from the follower's position are sent again.
func (t *segTransfer) tick() {
	if t.next > t.acked {
		if t.ticks++; t.ticks >= segResendTicks {
			t.next, t.ticks, t.rewound = t.acked, 0, true
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
	switch held := min(max(a.Held, 0), t.seg.Bytes); {
	case held > t.acked:
		t.acked, t.ticks, t.rewound = held, 0, false
		t.next = max(t.next, held)
	case held < t.acked: // the follower restarted: from the start
		t.acked, t.next, t.rewound = held, held, true
	case t.next > held && !t.rewound:
		// No progress: the follower missed a chunk. Go back once; the
		// answers to the chunks that followed it say the same.
		t.next, t.rewound = held, true
	}
	return false
}
