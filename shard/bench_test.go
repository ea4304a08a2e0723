package shard

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Cross-shard hand-off costs, each against the Go channel equivalent in
// the same run (docs/design/threading.md quotes them).

// BenchmarkCallRoundTrip: shard 0 calls shard 1 and, in the reply, calls
// again; one op is one round trip. With SpinIdle 0 both shards park
// between messages, so each leg pays an eventfd wake-up.
func BenchmarkCallRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name string
		spin time.Duration
	}{{"park", 0}, {"spin20us", 20 * time.Microsecond}} {
		b.Run(tc.name, func(b *testing.B) {
			g := startGroup(b, Config{Count: 2, SpinIdle: tc.spin})
			a, c := g.Shard(0), g.Shard(1)
			done := make(chan struct{})
			n := b.N
			var next func(int)
			next = func(left int) {
				if left == 0 {
					close(done)
					return
				}
				if err := Call(a, c, func(*Shard) int { return left - 1 }, next); err != nil {
					b.Error(err)
					close(done)
				}
			}
			b.ResetTimer()
			_ = a.Post(func() { next(n) })
			<-done
		})
	}
}

// BenchmarkChannelRoundTrip is the baseline: two goroutines locked to
// their threads ping-pong over channels.
func BenchmarkChannelRoundTrip(b *testing.B) {
	ping, pong := make(chan int, 1), make(chan int, 1)
	go func() {
		runtime.LockOSThread()
		for v := range ping {
			pong <- v
		}
		close(pong)
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ping <- i
		<-pong
	}
	close(ping)
	<-pong
}

// BenchmarkPostStream: one goroutine posts tasks to a shard as fast as the
// inbox takes them; one op is one task run.
func BenchmarkPostStream(b *testing.B) {
	g := startGroup(b, Config{Count: 1})
	s := g.Shard(0)
	var ran atomic.Int64
	task := func() { ran.Add(1) }
	b.ResetTimer()
	for i := 0; i < b.N; {
		if s.Post(task) == nil {
			i++
		} else {
			runtime.Gosched()
		}
	}
	for ran.Load() != int64(b.N) {
		runtime.Gosched()
	}
}

// BenchmarkChannelStream is the baseline: the same stream over a buffered
// channel of the same depth as the inbox.
func BenchmarkChannelStream(b *testing.B) {
	ch := make(chan func(), InboxDepthDefault)
	var ran atomic.Int64
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		for t := range ch {
			t()
		}
		close(done)
	}()
	task := func() { ran.Add(1) }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch <- task
	}
	close(ch)
	<-done
}
