package clock

import (
	"testing"
	"time"
)

func TestManual(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	m := NewManual(start)
	if got := m.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	m.Advance(1500 * time.Millisecond)
	if got := Since(m, start); got != 1500*time.Millisecond {
		t.Fatalf("Since = %v after Advance(1.5s)", got)
	}
	if got := Until(m, start.Add(2*time.Second)); got != 500*time.Millisecond {
		t.Fatalf("Until = %v", got)
	}
	m.Advance(-time.Second) // a jump back
	if got := Since(m, start); got != 500*time.Millisecond {
		t.Fatalf("Since = %v after a jump back", got)
	}
	m.Set(start)
	if !m.Now().Equal(start) {
		t.Fatalf("Set did not move the clock")
	}
}

func TestRealMoves(t *testing.T) {
	c := Real()
	a := c.Now()
	if d := time.Since(a); d < 0 || d > time.Minute {
		t.Fatalf("Real clock %v is not the wall clock", a)
	}
}
