package security

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := NewLimiter(3, time.Minute)
	t0 := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		if _, ok := l.Allow("a", t0); !ok {
			t.Fatalf("try %d refused before the limit", i)
		}
		l.Fail("a", t0.Add(time.Duration(i)*time.Second))
	}
	if wait, ok := l.Allow("a", t0.Add(10*time.Second)); ok || wait != 50*time.Second {
		t.Fatalf("after 3 failures: ok %v, wait %v; want refused for 50 s", ok, wait)
	}
	if _, ok := l.Allow("b", t0.Add(10*time.Second)); !ok {
		t.Fatal("another address is refused")
	}
	if _, ok := l.Allow("a", t0.Add(time.Minute)); !ok {
		t.Fatal("still refused once the window has passed")
	}
	if l.Failed.Load() != 3 || l.Refused.Load() != 1 {
		t.Fatalf("counted %d failed, %d refused; want 3, 1", l.Failed.Load(), l.Refused.Load())
	}
}

func TestLimiterBounded(t *testing.T) {
	l := NewLimiter(1, time.Minute)
	t0 := time.Unix(1000, 0)
	for i := 0; i < LimiterAddressesMax+10; i++ {
		l.Fail(string(rune(i)), t0)
	}
	if len(l.byAddr) > LimiterAddressesMax {
		t.Fatalf("%d addresses remembered, bound %d", len(l.byAddr), LimiterAddressesMax)
	}
}
