// Package clock is the time seam of the control plane: every part of a
// node (liveness, the metadata controller, the balancer driver,
// reconciliation, in-sync tracking, open-failure back-off) reads time
// through a Clock it is given, never from the time package, so that a
// simulator can run whole nodes on simulated time and replay a seed
// exactly.
//
// Timers are not here: a part arms them on the scheduler that owns it (a
// shard in a running node, the simulator's event queue in a simulation),
// because a timer's callback must run on its owner's goroutine.
package clock

import (
	"sync/atomic"
	"time"
)

// Clock tells the time.
type Clock interface {
	// Now is the current time. A Clock never goes backwards by itself;
	// a Manual clock goes where it is set (the simulator's clock jumps).
	Now() time.Time
}

// Real is the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Since is c.Now().Sub(t). On the wall clock it is time.Since, which
// reads only the monotonic clock when t has a reading of it (half the
// cost of a Now: the service's latency metrics time every produce).
func Since(c Clock, t time.Time) time.Duration {
	if _, ok := c.(realClock); ok {
		return time.Since(t)
	}
	return c.Now().Sub(t)
}

// Until is t.Sub(c.Now()).
func Until(c Clock, t time.Time) time.Duration { return t.Sub(c.Now()) }

// Manual is a clock that moves only when told: the simulator's clock and
// the tests'. Safe for concurrent use.
type Manual struct {
	ns atomic.Int64
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual {
	m := &Manual{}
	m.ns.Store(start.UnixNano())
	return m
}

// Now is the time the clock was last set to.
func (m *Manual) Now() time.Time { return time.Unix(0, m.ns.Load()) }

// Advance moves the clock forward by d (d < 0 moves it back: a clock
// jump).
func (m *Manual) Advance(d time.Duration) { m.ns.Add(int64(d)) }

// Set moves the clock to t.
func (m *Manual) Set(t time.Time) { m.ns.Store(t.UnixNano()) }
