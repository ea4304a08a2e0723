package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func fakeSpec(mode Mode) Spec {
	s := DefaultSpec(mode)
	s.Brokers = []string{"fake"}
	s.Warmup, s.Duration = 0, 0
	s.Messages = 1000
	return s
}

func TestRunProduceCount(t *testing.T) {
	s := fakeSpec(ModeProduce)
	s.Producers = 3
	rep, err := Run(context.Background(), newFakeSystem(), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Produce.Messages != 1000 || rep.Produce.Bytes != 1000*int64(s.MessageBytes) {
		t.Fatalf("total %d messages, %d bytes; want 1000 and %d", rep.Produce.Messages, rep.Produce.Bytes, 1000*s.MessageBytes)
	}
	want := []int64{334, 333, 333}
	for i, p := range rep.Producers {
		if p.Messages != want[i] {
			t.Errorf("producer %d: %d messages, want %d", i, p.Messages, want[i])
		}
	}
	// Async and unlimited: one message in sampleEvery of each producer is
	// timed (334, 333, 333 messages: 21 each).
	if l := rep.Produce.Latency; l == nil || l.Count != 3*21 || l.P50Ns > l.P99Ns || l.P99Ns > l.MaxNs {
		t.Fatalf("latency summary %+v, want 63 timed messages", l)
	}
	s.Sync = true
	rep, err = Run(context.Background(), newFakeSystem(), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l := rep.Produce.Latency; rep.Produce.Messages != 1000 || l == nil || l.Count != 1000 {
		t.Fatalf("one at a time: %d messages, latency %+v; want every one of 1000 timed", rep.Produce.Messages, l)
	}
	if rep.Consume != nil || rep.Errors != 0 || rep.System != "fake" || rep.Settings["kind"] != "fake" || rep.Machine.Cores == 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Produce.MessagesPerSec <= 0 || rep.Produce.ElapsedNs <= 0 {
		t.Fatalf("rates %+v", rep.Produce)
	}
}

func TestRunE2E(t *testing.T) {
	s := fakeSpec(ModeE2E)
	s.Producers, s.Consumers, s.Partitions, s.Messages = 2, 2, 4, 500
	rep, err := Run(context.Background(), newFakeSystem(), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Produce.Messages != 500 || rep.Consume.Messages != 500 || rep.Lost != 0 {
		t.Fatalf("produced %d, consumed %d, lost %d; want 500, 500, 0", rep.Produce.Messages, rep.Consume.Messages, rep.Lost)
	}
	if len(rep.Consumers) != 2 || rep.Consumers[0].Messages+rep.Consumers[1].Messages != 500 {
		t.Fatalf("consumers %+v", rep.Consumers)
	}
	if rep.Consume.Latency == nil || rep.Consume.Latency.Count != 500 {
		t.Fatalf("e2e latency %+v", rep.Consume.Latency)
	}
}

func TestRunConsumePreload(t *testing.T) {
	s := fakeSpec(ModeConsume)
	s.Messages, s.Partitions, s.Consumers = 300, 3, 2
	sys := newFakeSystem()
	rep, err := Run(context.Background(), sys, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Consume.Messages != 300 || rep.Produce != nil || rep.Consume.Latency != nil {
		t.Fatalf("consume %+v, produce %+v", rep.Consume, rep.Produce)
	}
	if n := len(sys.logs[0]) + len(sys.logs[1]) + len(sys.logs[2]); n != 300 {
		t.Fatalf("preloaded %d messages, want 300", n)
	}
}

// With a rate, message k is due at k intervals: exactly the messages due
// in [warm-up, warm-up + duration) have their latency measured, however
// late they go; throughput counts the completions inside the window.
func TestRunRateAndWarmupAreExact(t *testing.T) {
	s := fakeSpec(ModeProduce)
	s.Messages, s.Warmup, s.Duration, s.Rate = 0, 50*time.Millisecond, 100*time.Millisecond, 2000
	rep, err := Run(context.Background(), newFakeSystem(), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Produce.Latency.Count; n != 200 {
		t.Fatalf("latency of %d messages, want 200 (2000/s for 100ms)", n)
	}
	if n := rep.Produce.Messages; n < 150 || n > 210 {
		t.Fatalf("%d completions in the window, want about 200", n)
	}
	if rep.Produce.ElapsedNs != int64(100*time.Millisecond) {
		t.Fatalf("elapsed %v, want the 100ms window", time.Duration(rep.Produce.ElapsedNs))
	}
}

// A system that completes nothing sent inside the window still shows its
// throughput: completions inside the window count, whenever sent.
func TestWindowCountsCompletionsInDurationMode(t *testing.T) {
	w := window{warmNs: 100, endNs: 200}
	for _, tc := range []struct {
		now, sent int64
		want      bool
	}{{150, 10, true}, {150, 150, true}, {99, 50, false}, {200, 150, false}} {
		if got := w.counts(tc.now, tc.sent); got != tc.want {
			t.Errorf("duration mode: counts(%d, %d) = %v", tc.now, tc.sent, got)
		}
	}
	c := window{warmNs: 100}
	if !c.counts(5000, 100) || c.counts(5000, 99) {
		t.Error("count mode counts the messages sent after the warm-up")
	}
	w.runEndNs = 300
	if w.elapsed(180) != 100 {
		t.Errorf("elapsed = %d, want the window", w.elapsed(180))
	}
	w.runEndNs = 150 // ran out of work: up to the last completion
	if w.elapsed(140) != 40 {
		t.Errorf("elapsed after an early end = %d, want 40", w.elapsed(140))
	}
}

func TestRunCountsFailures(t *testing.T) {
	sys := newFakeSystem()
	sys.failEvery = 10
	rep, err := Run(context.Background(), sys, fakeSpec(ModeProduce), Options{})
	if !errors.Is(err, ErrRunFailed) {
		t.Fatalf("err %v, want ErrRunFailed", err)
	}
	if rep.Errors != 100 || rep.Produce.Messages != 900 || rep.FirstError != "producer-0: "+errFake.Error() {
		t.Fatalf("errors %d, messages %d, first %q", rep.Errors, rep.Produce.Messages, rep.FirstError)
	}
}

func TestRunRefusesABadSpec(t *testing.T) {
	s := fakeSpec(ModeProduce)
	s.MessageBytes = 3
	sys := newFakeSystem()
	if rep, err := Run(context.Background(), sys, s, Options{}); !errors.Is(err, ErrSpec) || rep != nil {
		t.Fatalf("got %v, %v; want ErrSpec and no report", rep, err)
	}
	if sys.prepared {
		t.Fatal("a bad spec reached the system")
	}
}
