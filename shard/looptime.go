package shard

import (
	"sync/atomic"
	"time"
)

// loopTimes splits the time a shard's loop has run into busy and
// waiting: waiting is the time blocked in park's epoll_wait, busy the
// rest (running messages, timers, completions and descriptors, and
// spinning, which holds the CPU). The loop reads the clock twice per
// park and never on a round that found work, so a saturated shard pays
// nothing; a park already pays a timerfd check and epoll_wait.
//
// The shard's thread writes; LoopTimes reads from any goroutine. A park
// and a wake read the clock and change the fields under seq (a sequence
// lock, odd meanwhile), and a reader reads the fields and then its own
// now under an even, unchanged seq: so a reader never counts a park
// twice or not at all, a clock read of the shard's is never older than
// a reader's now that saw the fields before it, and neither figure ever
// goes back.
type loopTimes struct {
	// started is set once the loop runs; startNs is when, endNs when it
	// ended (0 while it runs).
	started        atomic.Bool
	startNs, endNs atomic.Int64
	seq            atomic.Uint64
	waitNs         atomic.Int64 // finished parks' time
	parkedNs       atomic.Int64 // when the current park began; 0: none
	// readBusyNs and readWaitNs are the largest figures read so far:
	// a read that gave up on a consistent snapshot (the loop parked and
	// woke without pause loopTimesReadsMax times) may be torn, and no
	// figure it gives may go below one given before (they are counters).
	readBusyNs, readWaitNs atomic.Int64
}

// atLeastSeen raises v to seen's largest earlier value and records v.
func atLeastSeen(seen *atomic.Int64, v int64) int64 {
	for {
		old := seen.Load()
		if v <= old {
			return old
		}
		if seen.CompareAndSwap(old, v) {
			return v
		}
	}
}

// begin marks the loop's start at now (ns).
func (t *loopTimes) begin(now int64) {
	t.startNs.Store(now)
	t.started.Store(true)
}

// finish marks the loop's end at now.
func (t *loopTimes) finish(now int64) { t.endNs.Store(now) }

// park marks a park's start on clock.
func (t *loopTimes) park(clock Clock) {
	t.seq.Add(1)
	t.parkedNs.Store(clock.Now())
	t.seq.Add(1)
}

// wake ends the park begun with park.
func (t *loopTimes) wake(clock Clock) {
	t.seq.Add(1)
	now := clock.Now()
	t.waitNs.Add(max(now-t.parkedNs.Load(), 0))
	t.parkedNs.Store(0)
	t.seq.Add(1)
}

// loopTimesReadsMax bounds the retries of a read that raced a wake (a
// wake takes nanoseconds; a reader retrying this often meets a shard
// that parks and wakes without pause, and takes the last read).
const loopTimesReadsMax = 64

// read returns busy and waiting time up to the clock's now.
func (t *loopTimes) read(clock Clock) (busy, wait time.Duration) {
	if !t.started.Load() {
		return 0, 0
	}
	var waitNs, parked, now int64
	for i := 0; i < loopTimesReadsMax; i++ {
		s := t.seq.Load()
		waitNs, parked, now = t.waitNs.Load(), t.parkedNs.Load(), clock.Now()
		if s%2 == 0 && t.seq.Load() == s {
			break
		}
	}
	if end := t.endNs.Load(); end != 0 {
		now = end
	}
	if parked != 0 && now > parked {
		waitNs += now - parked
	}
	elapsed := now - t.startNs.Load()
	busyNs := atLeastSeen(&t.readBusyNs, max(elapsed-waitNs, 0))
	return time.Duration(busyNs), time.Duration(atLeastSeen(&t.readWaitNs, waitNs))
}

// LoopTimes are the time the shard's loop has spent busy and waiting
// for work (blocked in epoll_wait) since it started, up to now or to its
// end; busy + wait is the loop's run time, and busy's rate is the
// shard's utilisation (0..1 of one CPU). Spinning before a park
// (Config.SpinIdle) counts as busy: it holds the CPU. Any goroutine;
// zero for a shard whose loop never ran (a stepped shard).
func (s *Shard) LoopTimes() (busy, wait time.Duration) {
	return s.times.read(s.clock)
}
