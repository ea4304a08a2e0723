package netio

// A frame's body aliases the shard's read buffer, which the next read
// overwrites. A handler that hands the body to a write the kernel does
// later (the log writes a produced batch straight from it) retains the
// buffer instead of copying the body: the shard then reads into another
// buffer, and the retained one comes back to the shard when its last
// holder releases it.
//
// Every read buffer is Config.ReadBufferBytes. Those released come back to
// a small per-shard list (readBufsFreeMax) and are reused; beyond it they
// are left to the collector. What is retained at once is bounded by the
// holders: the log holds a batch until its write completes, at most
// ChainsInFlight writes per partition.

// readBufsFreeMax bounds the released read buffers a shard keeps for
// reuse: enough for the buffers a producing connection's writes hold
// across one loop iteration.
const readBufsFreeMax = 8

// readBuf is a shard's read buffer with the count of its frames that
// handlers retained. Invariant: refs >= 0; a buffer with refs > 0 is
// never read into.
type readBuf struct {
	mem  []byte
	refs int
}

// retainer is a frame's claim on its read buffer (Conn.Retain).
type retainer struct {
	lp       *loop
	rb       *readBuf
	released bool
}

// release gives back one retained frame; extra calls are ignored.
func (r *retainer) release() {
	if r.released {
		return
	}
	r.released = true
	r.lp.unref(r.rb)
}

// Retain keeps the memory of the frame being delivered to OnFrame alive
// and unchanged past OnFrame, so the body can be handed on without a
// copy, and returns the function that gives it back (call it exactly
// once, on the connection's shard; later calls are ignored). It returns
// nil when the body does not lie in a buffer that can be retained (a
// frame larger than half the read buffer, read into the connection's
// own, or a frame delivered after reading paused): the caller copies
// then. Only valid during OnFrame for c, on c's shard; anywhere else it
// returns nil.
//
// Its signature is segment.Lend's: a produce handler passes c.Retain to
// the log, which calls it only for a batch it writes in place.
func (c *Conn) Retain() (release func()) {
	lp := c.lp
	if lp.delivering != c || lp.deliveringBuf == nil {
		return nil
	}
	rb := lp.deliveringBuf
	rb.refs++
	lp.srv.stats.Retained.Add(1)
	r := &retainer{lp: lp, rb: rb}
	return r.release
}

// unref drops one claim on rb; a buffer no longer current and no longer
// claimed goes back to the free list.
func (lp *loop) unref(rb *readBuf) {
	rb.refs--
	if rb.refs == 0 && rb != lp.rbuf && len(lp.rbufFree) < readBufsFreeMax {
		lp.rbufFree = append(lp.rbufFree, rb)
	}
}

// renewReadBuf switches the shard to a fresh read buffer when a handler
// retained a frame of the current one. The input a connection still
// needs was copied out of it (Conn.keep) before.
func (lp *loop) renewReadBuf() {
	if lp.rbuf.refs == 0 {
		return
	}
	if n := len(lp.rbufFree); n > 0 {
		lp.rbuf = lp.rbufFree[n-1]
		lp.rbufFree[n-1] = nil
		lp.rbufFree = lp.rbufFree[:n-1]
	} else {
		lp.rbuf = &readBuf{mem: make([]byte, len(lp.rbuf.mem))}
		lp.srv.stats.ReadBufsMade.Add(1)
	}
}
