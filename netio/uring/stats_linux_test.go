//go:build linux

package uring

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The ring's counters follow its queue: SQEs count when the kernel takes
// them and leave the depth only when reaped, whether they are still
// running (a poll on an eventfd nobody wrote) or complete and waiting
// (NOPs not yet reaped).
func TestRingStatsQueueDepth(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 32})
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	want := func(step string, submitted, reaped, inFlight uint64) {
		t.Helper()
		st := r.Stats()
		if st.Submitted != submitted || st.Reaped != reaped || st.InFlight() != inFlight {
			t.Fatalf("%s: %+v (in flight %d), want submitted %d reaped %d in flight %d", step, st, st.InFlight(), submitted, reaped, inFlight)
		}
	}
	want("new ring", 0, 0, 0)
	poll := r.GetSQE()
	poll.PrepPollAdd(efd, unix.POLLIN)
	poll.SetUserData(99)
	for range 8 {
		r.GetSQE().PrepNop()
	}
	want("prepared, not submitted", 0, 0, 0)
	if n, err := r.Submit(); err != nil || n != 9 {
		t.Fatalf("Submit = %d, %v", n, err)
	}
	want("submitted", 9, 0, 9)
	reapN(t, r, 8)
	want("NOPs reaped, the poll running", 9, 8, 1)
	if _, err := unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if c := reapN(t, r, 1); c[0].UserData != 99 {
		t.Fatalf("CQE %+v, want the poll's", c[0])
	}
	want("all reaped", 9, 9, 0)
}

// The engine's ring counts a write linked to its sync as two SQEs, and
// a settled operation leaves no depth.
func TestEngineRingStats(t *testing.T) {
	e := newTestEngine(t, Options{})
	f := newTestFile(t, t.TempDir(), "f")
	if err := e.Write(f, make([]byte, 4096), 0, true, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(); err != nil {
		t.Fatal(err)
	}
	reapAllEngine(t, e, 1)
	if st := e.RingStats(); st.Submitted != 2 || st.Reaped != 2 || st.InFlight() != 0 {
		t.Fatalf("after one synced write: %+v", st)
	}
}
