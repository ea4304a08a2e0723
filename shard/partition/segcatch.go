package partition

import (
	"fmt"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
)

// segCatchUp is a replica's part in catch-up by whole segments
// (docs/design/moves.md): as primary, the segments on their way to
// learners; as follower, the one being received.
type segCatchUp struct {
	// out holds a transfer per learner receiving a segment; raftlite
	// sends such a learner no entries meanwhile (learnerBudget).
	out map[raftlite.NodeID]*segTransfer
	// off holds the term in which a learner refused a segment: it gets
	// appends for the rest of that term.
	off map[raftlite.NodeID]int32
	in  segReceiver
	// sentBytes counts the segment bytes sent (SegmentBytesSent).
	sentBytes int64
	// scratch is reused for the segment list.
	scratch []segment.SealedSegment
}

// SegmentBytesSent is how many bytes this replica sent as whole segments
// while it led (chunks handed to SendSegment).
func (r *Replica) SegmentBytesSent() int64 { return r.seg.sentBytes }

// startSegment begins sending learner to the sealed segment right after
// its match when SegmentPlan says so and nothing is in flight to it. It
// reports whether a transfer is under way for learner.
func (r *Replica) startSegment(to raftlite.NodeID) bool {
	if r.seg.out[to] != nil {
		return true
	}
	if r.cfg.SendSegment == nil || r.raft == nil || r.raft.Role() != raftlite.RoleLeader ||
		!r.raft.Membership().Learners.Has(to) {
		return false
	}
	if t, ok := r.seg.off[to]; ok && t == r.raft.Term() {
		return false
	}
	match, ok := r.raft.Match(to)
	if !ok {
		return false
	}
	if next, inflight, ok := r.raft.Sending(to); !ok || next != match+1 || inflight > 0 {
		return false
	}
	r.seg.scratch = r.log.SealedSegments(r.seg.scratch[:0])
	s, ok := SegmentPlan(match, r.commit, r.seg.scratch, r.log.ActiveBytes(), r.cfg.Log.SegmentBytes)
	if !ok {
		return false
	}
	lastTerm, err := r.log.TermAt(s.Last)
	if err != nil {
		return false
	}
	if r.seg.out == nil {
		r.seg.out = map[raftlite.NodeID]*segTransfer{}
	}
	t := &segTransfer{seg: s, lastTerm: lastTerm}
	r.seg.out[to] = t
	r.cfg.Sched.Defer(func() { r.sendChunk(to) })
	return true
}

// sendChunk sends learner the next chunks of its segment while its window
// and the throttle (the same bucket as the appends) allow.
func (r *Replica) sendChunk(to raftlite.NodeID) {
	t := r.seg.out[to]
	if t == nil || r.closed || r.raft == nil || r.raft.Role() != raftlite.RoleLeader {
		return
	}
	for {
		pos, n, ok := t.nextChunk(SegmentChunkBytesMax)
		if !ok {
			return
		}
		if th := r.cfg.Throttle; th != nil && !th.Take(to, n) {
			return // the next tick asks again
		}
		sp, err := r.log.SegmentChunk(t.seg.Base, pos, n)
		if err != nil {
			delete(r.seg.out, to) // retention removed it: appends (or a reset)
			return
		}
		t.sent(n)
		r.seg.sentBytes += n
		r.cfg.SendSegment(r, &SegmentChunk{From: r.cfg.Self, To: to, Term: r.raft.Term(), Base: t.seg.Base, Last: t.seg.Last,
			LastTerm: t.lastTerm, FileBytes: t.seg.Bytes, Pos: pos, Span: sp})
	}
}

// tickSegments drives the transfers on the consensus clock: resends after
// a lost chunk or answer, chunks the throttle held back, and transfers to
// start; a replica that no longer leads drops them.
func (r *Replica) tickSegments() {
	if len(r.seg.out) == 0 && (r.cfg.SendSegment == nil || r.raft == nil || r.raft.Membership().Learners == 0) {
		return
	}
	if r.raft == nil || r.raft.Role() != raftlite.RoleLeader {
		clear(r.seg.out)
		return
	}
	learners := r.raft.Membership().Learners
	for to, t := range r.seg.out {
		if !learners.Has(to) {
			delete(r.seg.out, to)
			continue
		}
		t.tick()
		r.sendChunk(to)
	}
	for to := raftlite.NodeID(1); to <= raftlite.NodeIDMax; to++ {
		if learners.Has(to) && r.seg.out[to] == nil {
			r.startSegment(to)
		}
	}
}

// SegmentAnswered takes a learner's answer to a chunk: the next chunk
// goes, or, the segment adopted, raftlite sends it a reset at the
// segment's end (which makes that its match), or, refused, the learner
// gets appends for the rest of the term.
func (r *Replica) SegmentAnswered(a SegmentAnswer) {
	t := r.seg.out[a.From]
	if t == nil || r.closed || r.raft == nil {
		return
	}
	if !t.answered(a) {
		r.sendChunk(a.From)
		return
	}
	delete(r.seg.out, a.From)
	if a.Status == SegmentAdopted {
		_ = r.raft.SendReset(a.From, t.seg.Last) // not leading any more: the next primary probes
	} else {
		if r.seg.off == nil {
			r.seg.off = map[raftlite.NodeID]int32{}
		}
		r.seg.off[a.From] = r.raft.Term()
	}
	r.process()
}

// ReceiveSegment takes a chunk of a segment the primary sends whole and
// answers it (Config.AnswerSegment). After the last chunk the file
// becomes a sealed segment of the log (segReceiver), and raftlite's view
// of the log is extended over it (raftlite.Node.Adopted); the primary's
// reset at the segment's end then makes it this replica's match. The
// error says why a chunk was refused (the primary falls back to appends).
func (r *Replica) ReceiveSegment(c *SegmentChunk) (err error) {
	ans := SegmentAnswer{From: r.cfg.Self, Base: c.Base, Status: SegmentRefused}
	defer func() {
		if r.raft != nil {
			ans.Term = r.raft.Term()
		}
		if r.cfg.AnswerSegment != nil {
			r.cfg.AnswerSegment(r, c.From, ans)
		}
	}()
	if r.closed || r.raft == nil || r.failure != nil || r.raft.Role() == raftlite.RoleLeader {
		return fmt.Errorf("%w: partition %s/%d cannot take a segment now", segment.ErrAdopt, r.cfg.Topic, r.cfg.Partition)
	}
	if c.Pos+int64(len(c.Data)) == c.FileBytes {
		// The last chunk: raftlite's view must end where the log does,
		// with nothing waiting to be written, or the two would disagree.
		if st := r.raft.Status(); r.held != nil || st.LastOffset != c.Base-1 || r.log.LogEndOffset() != c.Base {
			r.seg.in.abort(r.log)
			return fmt.Errorf("%w at %d: the consensus view ends at %d, the log at %d", segment.ErrAdopt, c.Base, st.LastOffset+1, r.log.LogEndOffset())
		}
	}
	r.seg.in.fs = r.cfg.FS
	held, status, err := r.seg.in.receive(r.log, c)
	ans.Held, ans.Status = held, status
	if status != SegmentAdopted {
		return err
	}
	r.rlog.reset() // every entry is written: the tail may start empty
	r.acked = max(r.acked, c.Last)
	if err := r.recordProducers(c.Base, c.Last+1); err != nil {
		r.restart(err)
		return err
	}
	if err := r.raft.Adopted(c.Base, c.Last); err != nil {
		err = fmt.Errorf("adopting segment %d..%d: %w", c.Base, c.Last, err)
		r.restart(err)
		return err
	}
	r.process()
	return nil
}
