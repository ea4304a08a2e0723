package shard

import (
	"errors"
	"testing"
	"time"
)

// TestSteppedGroup drives two shards from the test's goroutine: a
// CallAsync whose reply waits on a timer runs only when the test steps the
// shards and moves the clock, and the stepped group stops cleanly.
func TestSteppedGroup(t *testing.T) {
	clk := &manualClock{}
	started := 0
	g, err := NewGroup(Config{Count: 2, Clock: clk, OnStart: func(*Shard) { started++ }})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.StartStepped(); err != nil {
		t.Fatal(err)
	}
	if started != 2 {
		t.Fatalf("OnStart ran %d times, want 2", started)
	}
	a, b := g.Shard(0), g.Shard(1)
	if a.OnThread() {
		t.Fatal("a stepped shard claims the caller's goroutine as its thread")
	}
	var got []string
	if err := a.Post(func() {
		err := CallAsync(a, b, func(to *Shard, reply func(string)) {
			to.AfterFunc(5*time.Millisecond, func() { reply("late") })
		}, func(v string) { got = append(got, v) })
		if err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	settle := func() {
		for a.Step()+b.Step() > 0 {
		}
	}
	settle()
	if len(got) != 0 {
		t.Fatalf("reply ran before its timer: %v", got)
	}
	at, ok := b.NextTimerNs()
	if !ok || at < int64(5*time.Millisecond) {
		t.Fatalf("next timer at %d ns (pending %v), want at least 5 ms", at, ok)
	}
	if _, ok := a.NextTimerNs(); ok {
		t.Fatal("shard a has a timer it never armed")
	}
	clk.ns.Store(at - 1)
	settle()
	if len(got) != 0 {
		t.Fatal("timer fired before its time")
	}
	clk.ns.Store(at)
	settle()
	if len(got) != 1 || got[0] != "late" {
		t.Fatalf("replies %v, want [late]", got)
	}
	if err := g.StopStepped(100); err != nil {
		t.Fatal(err)
	}
	if err := a.Post(func() {}); !errors.Is(err, ErrStopped) {
		t.Fatalf("post after stop: %v, want ErrStopped", err)
	}
	g.AbandonStepped() // after a stop: nothing left to release
}

// TestSteppedGroupAbandon ends a stepped group like a crash: a task posted
// and never stepped does not run.
func TestSteppedGroupAbandon(t *testing.T) {
	g, err := NewGroup(Config{Count: 1, Clock: &manualClock{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.StartStepped(); err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := g.Shard(0).Post(func() { ran = true }); err != nil {
		t.Fatal(err)
	}
	g.AbandonStepped()
	if ran {
		t.Fatal("an abandoned shard ran its inbox")
	}
	if err := g.Shard(0).Post(func() {}); !errors.Is(err, ErrStopped) {
		t.Fatalf("post after abandon: %v, want ErrStopped", err)
	}
	select {
	case <-g.Shard(0).Done():
	default:
		t.Fatal("an abandoned shard is not done")
	}
}

// TestSteppedStopAnswersCalls stops a stepped group while a call from one
// shard to the other waits in the callee's inbox: the stop runs both
// until the reply has run, as a running group's Stop waits for its
// shards' calls.
func TestSteppedStopAnswersCalls(t *testing.T) {
	g, err := NewGroup(Config{Count: 2, Clock: &manualClock{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.StartStepped(); err != nil {
		t.Fatal(err)
	}
	a, b := g.Shard(0), g.Shard(1)
	answered := false
	if err := a.Post(func() {
		if err := Call(a, b, func(*Shard) int { return 7 }, func(v int) { answered = v == 7 }); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	a.Step() // the call is now in b's inbox
	if err := g.StopStepped(100); err != nil {
		t.Fatal(err)
	}
	if !answered {
		t.Fatal("the stop ended before the call's reply ran")
	}
}

// TestSteppedDo: Do on a stepped shard, from the goroutine that steps
// it, runs fn (and the shard's other due work) and returns, where a Do
// that waited for a loop would never return.
func TestSteppedDo(t *testing.T) {
	g, err := NewGroup(Config{Count: 2, Clock: &manualClock{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.StartStepped(); err != nil {
		t.Fatal(err)
	}
	a := g.Shard(1)
	var order []string
	if err := a.Post(func() { order = append(order, "posted") }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- a.Do(func(s *Shard) {
			if s != a {
				t.Error("Do ran fn with another shard")
			}
			order = append(order, "do")
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do on a stepped shard did not return")
	}
	if len(order) != 2 || order[0] != "posted" || order[1] != "do" {
		t.Fatalf("ran %v, want the posted work, then fn", order)
	}
	if err := g.StopStepped(100); err != nil {
		t.Fatal(err)
	}
	if err := a.Do(func(*Shard) {}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Do after the stop: %v, want ErrStopped", err)
	}
}
