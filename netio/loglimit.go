package netio

import (
	"sync"
	"time"
)

// logLimit caps the lines a server logs about its connections: at most
// linesMax in each window of interval, counted from the first line of the
// window; the lines past it are only counted, and reported as one summary
// line when the window ends. A flood of bad connections (a port scanner,
// a client speaking another protocol) then costs a few lines per interval
// instead of one per connection. Time comes in as an argument, so the
// limiter is tested without a clock.
//
// Every shard of a server logs through the one limiter: mu guards every
// field. Logging is rare and the lock is held for a few comparisons.
type logLimit struct {
	linesMax   int
	intervalNs int64

	mu            sync.Mutex
	windowStartNs int64
	open          bool // a window has begun (windowStartNs is valid)
	lines         int  // lines let through in the window; <= linesMax
	suppressed    int  // lines held back in the window
}

func newLogLimit(linesMax int, interval time.Duration) *logLimit {
	return &logLimit{linesMax: linesMax, intervalNs: int64(interval)}
}

// admit decides about one line at nowNs. ok says whether to log it;
// suppressedBefore, when > 0, is how many lines the window that just
// ended held back, to be reported (before this line) with its summary.
// first says the line is the first one held back in its window: the
// caller arms a timer for flush at windowEndNs, so the summary comes even
// if no other line follows.
func (l *logLimit) admit(nowNs int64) (ok bool, suppressedBefore int, first bool, windowEndNs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	suppressedBefore = l.roll(nowNs)
	if l.lines < l.linesMax {
		l.lines++
		return true, suppressedBefore, false, 0
	}
	l.suppressed++
	return false, suppressedBefore, l.suppressed == 1, l.windowStartNs + l.intervalNs
}

// flush ends the window if it is over at nowNs and returns how many lines
// it held back (0 when it is not over, or held back none).
func (l *logLimit) flush(nowNs int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open || nowNs < l.windowStartNs+l.intervalNs {
		return 0
	}
	return l.drainLocked()
}

// drain ends the window now, whether or not it is over (the server shuts
// down), and returns how many lines it held back.
func (l *logLimit) drain() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.drainLocked()
}

func (l *logLimit) drainLocked() int {
	n := l.suppressed
	l.open, l.lines, l.suppressed = false, 0, 0
	return n
}

// roll starts a new window at nowNs when none is open or the current one
// is over, and returns what the ended window held back. REQUIRES: l.mu.
func (l *logLimit) roll(nowNs int64) int {
	if l.open && nowNs < l.windowStartNs+l.intervalNs {
		return 0
	}
	n := l.suppressed
	l.open, l.windowStartNs, l.lines, l.suppressed = true, nowNs, 0, 0
	return n
}
