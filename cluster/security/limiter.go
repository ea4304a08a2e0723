package security

import (
	"sync"
	"sync/atomic"
	"time"
)

// LimiterAddressesMax bounds the addresses a Limiter remembers; past it,
// the entries whose window has passed are dropped, then arbitrary ones
// (an attacker with that many addresses gains a few more tries each, but
// cannot grow the node's memory).
const LimiterAddressesMax = 65536

// Limiter refuses logins from an address that failed FailuresMax times
// within Window (security.login_failures_max, login_failure_window_ms),
// until the window that began with its first failure has passed. Every
// listener shares one, so a guesser cannot spread tries over the native
// port and HTTP. Safe for concurrent use.
//
// mu guards byAddr.
type Limiter struct {
	failuresMax int
	window      time.Duration
	mu          sync.Mutex
	byAddr      map[string]*failures
	// Failed counts failed logins; Refused counts logins refused by the
	// limit without being tried (both for /metrics).
	Failed, Refused atomic.Uint64
}

type failures struct {
	since time.Time
	n     int
}

// NewLimiter returns a limiter of failuresMax failures per window.
func NewLimiter(failuresMax int, window time.Duration) *Limiter {
	return &Limiter{failuresMax: failuresMax, window: window, byAddr: map[string]*failures{}}
}

// Allow reports whether a login from addr may be tried at now; when not,
// retryAfter says when it may.
func (l *Limiter) Allow(addr string, now time.Time) (retryAfter time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.byAddr[addr]
	if f == nil {
		return 0, true
	}
	if end := f.since.Add(l.window); !now.Before(end) {
		delete(l.byAddr, addr)
		return 0, true
	} else if f.n >= l.failuresMax {
		l.Refused.Add(1)
		return end.Sub(now), false
	}
	return 0, true
}

// Fail records a failed login from addr at now.
func (l *Limiter) Fail(addr string, now time.Time) {
	l.Failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.byAddr[addr]
	if f == nil || !now.Before(f.since.Add(l.window)) {
		if len(l.byAddr) >= LimiterAddressesMax {
			l.evict(now)
		}
		f = &failures{since: now}
		l.byAddr[addr] = f
	}
	f.n++
}

// evict makes room. REQUIRES: mu held.
func (l *Limiter) evict(now time.Time) {
	for a, f := range l.byAddr {
		if !now.Before(f.since.Add(l.window)) {
			delete(l.byAddr, a)
		}
	}
	for a := range l.byAddr {
		if len(l.byAddr) < LimiterAddressesMax {
			return
		}
		delete(l.byAddr, a)
	}
}
