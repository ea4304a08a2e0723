package uring

// RingStats are a ring's counters read at one moment.
type RingStats struct {
	// Submitted is the SQEs the kernel consumed; Reaped the CQEs the
	// owner copied out. Submitted - Reaped is the queue depth: the
	// submissions in the kernel (running, or complete and not yet
	// reaped). A write linked to its fdatasync is two.
	Submitted, Reaped uint64
}

// InFlight is the queue depth, Submitted - Reaped (0 if a read raced a
// reap).
func (s RingStats) InFlight() uint64 {
	if s.Reaped > s.Submitted {
		return 0
	}
	return s.Submitted - s.Reaped
}
