package partition

import (
	"testing"
	"time"
)

// The bucket lets a send go while it is not in debt, holds the next until
// the debt is earned back at the rate, keeps at most a tenth of a second's
// rate, and lets everything go without a limit.
func TestThrottleTokenBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	th := NewThrottle(func() time.Time { return now })
	if !th.Take(2, 1<<30) {
		t.Fatal("no limit refused a send")
	}
	th.SetRate(1 << 20) // 1 MiB/s; the bucket starts empty, not in debt
	steps := []struct {
		advance time.Duration
		bytes   int64
		want    bool
	}{
		{0, 512 << 10, true},                // not in debt: goes, 512 KiB owed
		{0, 1, false},                       // in debt
		{250 * time.Millisecond, 1, false},  // 256 KiB earned back, 256 KiB owed
		{250 * time.Millisecond, 100, true}, // square: goes
		{10 * time.Second, 200 << 10, true}, // an idle spell earns 0.1 s (~102 KiB) at most
		{0, 1, false},                       // ~98 KiB owed
		{100 * time.Millisecond, 1, true},   // earned back
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := th.Take(2, s.bytes); got != s.want {
			t.Fatalf("step %d (+%v, %d bytes): %v, want %v", i, s.advance, s.bytes, got, s.want)
		}
	}
	th.SetRate(0)
	if !th.Take(2, 1<<30) {
		t.Fatal("lifting the limit did not lift the debt")
	}
	if got, want := th.SentBytes(), int64(1<<30+512<<10+100+200<<10+1+1<<30); got != want {
		t.Fatalf("sent %d bytes, want %d", got, want)
	}
}
