package shard

import (
	"testing"
	"time"
)

// The loop's time splits into waiting (parked in epoll_wait) and busy
// (running work), on the shard's clock: with a clock moved by hand, a
// park of 4 ms and a task that runs 3 ms read back as exactly that, the
// wait grows while the shard stays parked, busy does not, and a stopped
// shard's figures stop.
func TestLoopTimes(t *testing.T) {
	clk := &manualClock{}
	clk.ns.Store(int64(time.Second))
	g, err := NewGroup(Config{Count: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s := g.Shard(0)
	if busy, wait := s.LoopTimes(); busy != 0 || wait != 0 {
		t.Fatalf("before the loop ran: busy %v wait %v", busy, wait)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = g.Stop()
		}
	}()
	parkedTimes := func(n uint64) {
		t.Helper()
		waitFor(t, "the shard to park", func() bool { return s.Stats().Parks.Load() >= n && s.times.parkedNs.Load() != 0 })
	}
	want := func(step string, busy, wait time.Duration) {
		t.Helper()
		if b, w := s.LoopTimes(); b != busy || w != wait {
			t.Fatalf("%s: busy %v wait %v, want %v and %v", step, b, w, busy, wait)
		}
	}
	parkedTimes(1)
	want("parked at once", 0, 0)
	clk.ns.Add(int64(4 * time.Millisecond))
	want("parked 4 ms", 0, 4*time.Millisecond)
	ran := make(chan struct{})
	_ = s.Post(func() {
		clk.ns.Add(int64(3 * time.Millisecond))
		close(ran)
	})
	<-ran
	parkedTimes(2)
	want("after a 3 ms task", 3*time.Millisecond, 4*time.Millisecond)
	clk.ns.Add(int64(2 * time.Millisecond))
	want("parked 2 ms more", 3*time.Millisecond, 6*time.Millisecond)
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	busy, wait := s.LoopTimes()
	clk.ns.Add(int64(time.Second))
	if b, w := s.LoopTimes(); b != busy || w != wait || wait < 6*time.Millisecond {
		t.Fatalf("a stopped shard's figures moved: busy %v→%v wait %v→%v", busy, b, wait, w)
	}
}

// A read racing wakes never sees the wait go back, nor busy: both are
// counters. The reader reads through a thousand parks and wakes (or
// ten seconds).
func TestLoopTimesMonotonic(t *testing.T) {
	g := startGroup(t, Config{Count: 1})
	s := g.Shard(0)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // wakes the shard without pause
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = s.Post(func() {})
			}
		}
	}()
	var lastBusy, lastWait time.Duration
	parks, deadline := s.Stats().Parks.Load(), time.Now().Add(10*time.Second)
	for s.Stats().Parks.Load() < parks+1000 && time.Now().Before(deadline) {
		b, w := s.LoopTimes()
		if b < lastBusy || w < lastWait {
			close(stop)
			<-done
			t.Fatalf("went back: busy %v→%v wait %v→%v", lastBusy, b, lastWait, w)
		}
		lastBusy, lastWait = b, w
	}
	close(stop)
	<-done
}

// BenchmarkLoopTimesPark is what the loop timing adds to one park: the
// marks around epoll_wait (two clock reads, four atomic adds), against
// the clock reads alone in the same run; a park itself is an epoll_wait
// and a wake-up (microseconds: BenchmarkCallRoundTrip/park).
func BenchmarkLoopTimesPark(b *testing.B) {
	b.Run("marks", func(b *testing.B) {
		var lt loopTimes
		clk := monoClock{}
		lt.begin(clk.Now())
		for i := 0; i < b.N; i++ {
			lt.park(clk)
			lt.wake(clk)
		}
	})
	b.Run("clock-reads-only", func(b *testing.B) {
		clk := monoClock{}
		var sum int64
		for i := 0; i < b.N; i++ {
			sum += clk.Now()
			sum -= clk.Now()
		}
		_ = sum
	})
}

// A read that gives up on a consistent snapshot (a writer mid-update
// every time it looks, as on a loaded machine where the loop parks and
// wakes without pause) may be torn: here it takes a park's start that
// the finished parks already hold, and counts that park twice. The
// figures it gives must still never go below those given before, nor
// may the next consistent read's go below the torn one's (CI saw the
// wait go back by 70 us).
func TestLoopTimesTornReadNeverGoesBack(t *testing.T) {
	clk := &manualClock{}
	clk.ns.Store(int64(time.Second))
	var lt loopTimes
	lt.begin(clk.Now())
	clk.ns.Add(int64(time.Millisecond))
	lt.park(clk)
	clk.ns.Add(int64(2 * time.Millisecond))
	lt.wake(clk) // 1 ms busy, 2 ms waiting
	b0, w0 := lt.read(clk)
	if b0 != time.Millisecond || w0 != 2*time.Millisecond {
		t.Fatalf("consistent read: busy %v wait %v", b0, w0)
	}
	// Torn: the finished park's start is still seen as a park in
	// progress, while a writer holds the sequence odd.
	lt.parkedNs.Store(int64(time.Second) + int64(time.Millisecond))
	lt.seq.Add(1)
	b1, w1 := lt.read(clk)
	lt.seq.Add(1)
	lt.parkedNs.Store(0)
	b2, w2 := lt.read(clk)
	if b1 < b0 || w1 < w0 || b2 < b1 || w2 < w1 {
		t.Fatalf("went back: busy %v→%v→%v wait %v→%v→%v", b0, b1, b2, w0, w1, w2)
	}
}
