package tlsbridge

import (
	"sync"
	"time"
)

// Refusals are logged at most logLinesMax per logInterval; the lines held
// back are counted and reported with the next line logged.
const (
	logLinesMax = 10
	logInterval = 10 * time.Second
)

// logLimit is a fixed-window line limit. Safe for concurrent use.
type logLimit struct {
	mu         sync.Mutex
	start      time.Time // the window's start
	lines      int       // lines logged in the window
	suppressed int       // lines held back and not yet reported
}

func newLogLimit() *logLimit { return &logLimit{} }

// admit says whether a line may be logged at now, and how many held-back
// lines to report first.
func (l *logLimit) admit(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= logInterval {
		l.start, l.lines = now, 0
	}
	if l.lines >= logLinesMax {
		l.suppressed++
		return false, 0
	}
	l.lines++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
