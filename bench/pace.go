package bench

import "time"

// pacer spreads one producer's messages evenly in time: message k is due
// k intervals after the start. The zero pacer (no rate) makes every
// message due at once.
type pacer struct {
	// intervalNs is the time between two messages; 0 means unlimited.
	intervalNs float64
}

// newPacer returns a pacer for rate messages per second (0: unlimited).
func newPacer(rate float64) pacer {
	if rate <= 0 {
		return pacer{}
	}
	return pacer{intervalNs: 1e9 / rate}
}

// limited reports whether the pacer has a rate.
func (p pacer) limited() bool { return p.intervalNs > 0 }

// due returns the run time (ns after startNs) when message k is due.
func (p pacer) due(startNs, k int64) int64 {
	return startNs + int64(float64(k)*p.intervalNs)
}

// waitUntil sleeps until the run clock reaches dueNs. Pacing is the one
// place the load generator sleeps: it is the workload, not
// synchronisation.
func waitUntil(now func() int64, dueNs int64) {
	if d := dueNs - now(); d > 0 {
		time.Sleep(time.Duration(d))
	}
}
