package partition

import (
	"sync"
	"time"

	"github.com/corestream/corestream/raftlite"
)

// Throttle bounds the catch-up bytes a node's primaries send to learners
// (the new replicas of a replica move), all partitions of the node
// together: a token bucket that raftlite asks before each append with
// entries to a learner (raftlite.Config.LearnerBudget). Appends to
// voters, in-sync followers included, are never asked, so a move cannot
// slow the acknowledgement of a produce.
//
// A send is allowed while the bucket is not in debt, and takes its bytes
// (going into debt for a large append): the average rate is the limit and
// a refused append waits for the learner's next acknowledgement or
// heartbeat answer (one heartbeat interval at most), when raftlite asks
// again. The bucket holds at most throttleBurst of the rate, so an idle
// spell does not buy a burst.
//
// One Throttle is shared by every shard of a node: mu guards every field
// but now.
type Throttle struct {
	now func() time.Time
	mu  sync.Mutex
	// rateBps is the limit in bytes/s (0: none); tokens the bytes that
	// may go now (negative: a debt); last when tokens was refilled.
	rateBps int64
	tokens  float64
	last    time.Time
	// sentBytes counts the bytes allowed, for the figures.
	sentBytes int64
}

// throttleBurst is how much of one second's rate the bucket holds.
const throttleBurst = 0.1

// NewThrottle returns a throttle without a limit; now is the clock.
func NewThrottle(now func() time.Time) *Throttle { return &Throttle{now: now} }

// SetRate sets the limit in bytes/s (0: none). A change keeps the debt.
func (t *Throttle) SetRate(bps int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if bps == t.rateBps {
		return
	}
	t.refill(t.now())
	t.rateBps = max(bps, 0)
	t.tokens = min(t.tokens, float64(t.rateBps)*throttleBurst)
}

// Rate is the limit in bytes/s (0: none).
func (t *Throttle) Rate() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rateBps
}

// SentBytes is how many bytes the throttle has let go to learners.
func (t *Throttle) SentBytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sentBytes
}

// refill adds the tokens earned since last. REQUIRES: t.mu held.
func (t *Throttle) refill(now time.Time) {
	if !t.last.IsZero() && t.rateBps > 0 {
		earned := now.Sub(t.last).Seconds() * float64(t.rateBps)
		t.tokens = min(t.tokens+earned, float64(t.rateBps)*throttleBurst)
	}
	t.last = now
}

// Take reports whether bytes may go to a learner now, and takes them if
// so. It is a raftlite.Config.LearnerBudget.
func (t *Throttle) Take(_ raftlite.NodeID, bytes int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rateBps == 0 {
		t.sentBytes += bytes
		return true
	}
	t.refill(t.now())
	if t.tokens < 0 {
		return false
	}
	t.tokens -= float64(bytes)
	t.sentBytes += bytes
	return true
}

// learnerBudget is the replica's raftlite.Config.LearnerBudget: no
// appends to a learner receiving a whole segment, or about to
// (segcatch.go: they would move its log end away from the segment's
// base), else its throttle's Take; nil when neither applies.
func (r *Replica) learnerBudget() func(raftlite.NodeID, int64) bool {
	if r.cfg.Throttle == nil && r.cfg.SendSegment == nil {
		return nil
	}
	return func(to raftlite.NodeID, bytes int64) bool {
		if r.seg.out[to] != nil || r.startSegment(to) {
			return false
		}
		return r.cfg.Throttle == nil || r.cfg.Throttle.Take(to, bytes)
	}
}
