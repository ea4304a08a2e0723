package partition

import "github.com/corestream/corestream/segment"

// Compaction (docs/design/compaction.md): a compacted topic's replica is
// cleaned on its own schedule, by the node's cleaner loop on the shard
// that owns it, one bounded step at a time.

// SetCleaner gives the replica its topic's cleaner settings (nil: the
// topic is not compacted, and Clean does nothing). The Limit is ignored:
// Clean sets it.
func (r *Replica) SetCleaner(c *segment.CleanConfig) {
	if c == nil {
		r.cleaner = nil
		return
	}
	cp := *c
	r.cleaner = &cp
}

// Compacted reports whether the replica's topic is compacted.
func (r *Replica) Compacted() bool { return r.cleaner != nil }

// Clean runs one step of the log cleaner within bytesMax (0: no bound;
// at least one batch), below what is both committed and durable here: a
// record is cleaned away only once every later record of its key that
// supersedes it can never be truncated.
func (r *Replica) Clean(bytesMax int64) (segment.CleanResult, error) {
	if r.closed || r.raft == nil {
		return segment.CleanResult{}, ErrClosed
	}
	if r.cleaner == nil || len(r.seg.out) > 0 {
		// Not compacted, or sending sealed segments whole to a learner:
		// a segment rewritten between two of its chunks would reach the
		// learner as a mix, which it refuses (its checks fail), and the
		// transfer would fall back to appends. The cleaner waits.
		return segment.CleanResult{Idle: true}, nil
	}
	c := *r.cleaner
	c.Limit, c.BytesMax = min(r.commit, r.acked)+1, bytesMax
	return r.log.Clean(c)
}
