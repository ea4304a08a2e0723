package shard

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestInboxBounds(t *testing.T) {
	for _, tc := range []struct{ asked, want int }{{1, 2}, {2, 2}, {3, 4}, {16, 16}, {1000, 1024}} {
		q := NewInbox[int](tc.asked, func() {})
		if q.Cap() != tc.want {
			t.Fatalf("capacity %d: got %d, want %d", tc.asked, q.Cap(), tc.want)
		}
		for i := 0; i < q.Cap(); i++ {
			if err := q.TryPush(i); err != nil {
				t.Fatalf("push %d of %d: %v", i, q.Cap(), err)
			}
		}
		if err := q.TryPush(-1); !errors.Is(err, ErrInboxFull) {
			t.Fatalf("push into full inbox: %v, want ErrInboxFull", err)
		}
		if q.Len() != q.Cap() {
			t.Fatalf("Len %d, want %d", q.Len(), q.Cap())
		}
		// Freeing one slot admits exactly one more message, at the end.
		if v, ok := q.Pop(); !ok || v != 0 {
			t.Fatalf("pop: %d %v", v, ok)
		}
		if err := q.TryPush(q.Cap()); err != nil {
			t.Fatal(err)
		}
		if err := q.TryPush(-1); !errors.Is(err, ErrInboxFull) {
			t.Fatalf("second overflow: %v", err)
		}
		for want := 1; want <= q.Cap(); want++ {
			v, ok := q.Pop()
			if !ok || v != want {
				t.Fatalf("pop: got %d %v, want %d", v, ok, want)
			}
		}
		if _, ok := q.Pop(); ok || !q.Empty() {
			t.Fatal("inbox not empty after draining")
		}
	}
}

func TestInboxWakeOnlyWhenArmed(t *testing.T) {
	var wakes atomic.Int32
	q := NewInbox[int](4, func() { wakes.Add(1) })
	_ = q.TryPush(1)
	if wakes.Load() != 0 {
		t.Fatal("woken while not armed")
	}
	q.Arm()
	_ = q.TryPush(2)
	_ = q.TryPush(3)
	if wakes.Load() != 1 {
		t.Fatalf("wakes = %d after two pushes into an armed inbox, want 1", wakes.Load())
	}
	if q.Disarm() {
		t.Fatal("Disarm reported armed after a producer woke the consumer")
	}
	q.Arm()
	if !q.Disarm() {
		t.Fatal("Disarm reported not armed")
	}
	_ = q.TryPush(4)
	if wakes.Load() != 1 {
		t.Fatal("woken after Disarm")
	}
}

// TestInboxConcurrentProducers checks, with several producers racing one
// consumer that parks through Arm/Disarm, that every message arrives once,
// in per-producer order, and that the consumer is never left asleep with a
// message queued (it would hang).
func TestInboxConcurrentProducers(t *testing.T) {
	const producers, perProducer = 4, 20000
	wake := make(chan struct{}, 1)
	q := NewInbox[[2]int](64, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < perProducer; {
				if err := q.TryPush([2]int{p, i}); err == nil {
					i++
				} else {
					runtime.Gosched()
				}
			}
		}(p)
	}
	next := make([]int, producers)
	for got := 0; got < producers*perProducer; {
		v, ok := q.Pop()
		if !ok {
			q.Arm()
			if !q.Empty() {
				q.Disarm()
				continue
			}
			<-wake
			q.Disarm()
			continue
		}
		if v[1] != next[v[0]] {
			t.Fatalf("producer %d: got message %d, want %d", v[0], v[1], next[v[0]])
		}
		next[v[0]]++
		got++
	}
	wg.Wait()
}

func BenchmarkInboxPushPop(b *testing.B) {
	q := NewInbox[int](1024, func() {})
	for i := 0; i < b.N; i++ {
		_ = q.TryPush(i)
		q.Pop()
	}
}
