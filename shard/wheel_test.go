package shard

import (
	"fmt"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// firing records which timer fired at which tick.
type firing struct {
	id   int
	tick int64
}

func TestWheelFiresAtDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start int64
		whens []int64
	}{
		{"level0", 0, []int64{0, 1, 5, 63}},
		{"level boundaries", 0, []int64{64, 65, 127, 4095, 4096, 4097, 262143, 262144}},
		{"unaligned start", 100, []int64{100, 101, 163, 164, 170, 4196, 5000}},
		{"past deadline fires next tick", 1000, []int64{3, 999}},
		{"beyond the last level", 0, []int64{wheelSpanTicks + 5, 3 * wheelSpanTicks}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWheel(tc.start)
			var got []firing
			for i, when := range tc.whens {
				i := i
				w.Schedule(NewTimer(func() { got = append(got, firing{i, w.Now() - 1}) }), when)
			}
			last := tc.start
			for _, when := range tc.whens {
				last = max(last, when)
			}
			if n := w.Advance(last); n != len(tc.whens) {
				t.Fatalf("Advance fired %d, want %d", n, len(tc.whens))
			}
			for _, f := range got {
				want := max(tc.whens[f.id], tc.start)
				if f.tick != want {
					t.Errorf("timer for %d fired at %d, want %d", tc.whens[f.id], f.tick, want)
				}
			}
			if w.Len() != 0 {
				t.Fatalf("%d timers left", w.Len())
			}
		})
	}
}

func TestWheelStopAndReschedule(t *testing.T) {
	w := NewWheel(0)
	var fired []string
	a := NewTimer(func() { fired = append(fired, "a") })
	b := NewTimer(func() { fired = append(fired, "b") })
	c := NewTimer(func() { fired = append(fired, "c") })
	w.Schedule(a, 10)
	w.Schedule(b, 10)
	w.Schedule(c, 5000)
	if !w.Stop(b) || w.Stop(b) {
		t.Fatal("Stop of a pending timer must report true once")
	}
	w.Schedule(c, 10) // move from level 2 to level 0
	w.Advance(9)
	if len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	w.Advance(10)
	if fmt.Sprint(fired) != "[a c]" {
		t.Fatalf("fired %v, want [a c]", fired)
	}
	if a.Pending() || c.Pending() {
		t.Fatal("fired timers still pending")
	}
}

// A callback may stop a timer due in the same tick (it must not fire) and
// schedule new ones (they fire at the next tick processed).
func TestWheelCallbacksChangeTheirTick(t *testing.T) {
	w := NewWheel(0)
	var fired []string
	var b *Timer
	a := NewTimer(func() {
		fired = append(fired, "a")
		w.Stop(b)
		w.Schedule(NewTimer(func() { fired = append(fired, fmt.Sprint("late@", w.Now()-1)) }), 0)
	})
	b = NewTimer(func() { fired = append(fired, "b") })
	w.Schedule(a, 7)
	w.Schedule(b, 7)
	w.Advance(7)
	w.Advance(8)
	if fmt.Sprint(fired) != "[a late@8]" {
		t.Fatalf("fired %v", fired)
	}
}

func TestWheelNextExpiry(t *testing.T) {
	w := NewWheel(10)
	if _, ok := w.NextExpiry(); ok {
		t.Fatal("empty wheel reports an expiry")
	}
	w.Schedule(NewTimer(func() {}), 40)
	if got, _ := w.NextExpiry(); got != 40 {
		t.Fatalf("next %d, want 40", got)
	}
	w2 := NewWheel(10)
	w2.Schedule(NewTimer(func() {}), 5000)
	got, _ := w2.NextExpiry()
	if got > 5000 || got < 10 {
		t.Fatalf("next %d must be in [10, 5000]", got)
	}
}

// TestWheelMatchesModel drives the wheel with random schedules, stops and
// advances and checks every firing against a plain model: each pending
// timer fires exactly once, at max(deadline, tick when scheduled), in
// deadline order (any order within one tick).
func TestWheelMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := rapid.Int64Range(0, 1<<20).Draw(t, "start")
		w := NewWheel(start)
		type model struct {
			due int64
			seq int
		}
		pending := map[int]model{}
		timers := map[int]*Timer{}
		var got []firing
		seq := 0
		for step := 0; step < 200; step++ {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3, 4: // schedule (or reschedule) a timer
				id := rapid.IntRange(0, 30).Draw(t, "id")
				far := rapid.IntRange(0, 3).Draw(t, "level")
				d := rapid.Int64Range(-5, int64(1)<<(6*(far+1))).Draw(t, "delta")
				tm := timers[id]
				if tm == nil {
					tm = NewTimer(func() { got = append(got, firing{id, w.Now() - 1}) })
					timers[id] = tm
				}
				w.Schedule(tm, w.Now()+d)
				seq++
				pending[id] = model{max(w.Now()+d, w.Now()), seq}
			case 5: // stop
				id := rapid.IntRange(0, 30).Draw(t, "id")
				_, was := pending[id]
				if tm := timers[id]; tm != nil {
					if w.Stop(tm) != was {
						t.Fatalf("Stop(%d) disagrees with the model (pending=%v)", id, was)
					}
				}
				delete(pending, id)
			default: // advance
				to := w.Now() + rapid.Int64Range(0, 5000).Draw(t, "advance")
				got = got[:0]
				w.Advance(to)
				type due struct {
					firing
				}
				var fire []due
				for id, m := range pending {
					if m.due <= to {
						fire = append(fire, due{firing{id, m.due}})
						delete(pending, id)
					}
				}
				sort.Slice(fire, func(i, j int) bool {
					if fire[i].tick != fire[j].tick {
						return fire[i].tick < fire[j].tick
					}
					return fire[i].id < fire[j].id
				})
				for i := 1; i < len(got); i++ {
					if got[i].tick < got[i-1].tick {
						t.Fatalf("fired out of deadline order: %v", got)
					}
				}
				sort.SliceStable(got, func(i, j int) bool {
					if got[i].tick != got[j].tick {
						return got[i].tick < got[j].tick
					}
					return got[i].id < got[j].id
				})
				want := []firing{}
				for _, f := range fire {
					want = append(want, f.firing)
				}
				if len(got) == 0 {
					got = []firing{}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("advance to %d fired %v, want %v", to, got, want)
				}
				if w.Len() != len(pending) {
					t.Fatalf("wheel holds %d timers, model %d", w.Len(), len(pending))
				}
			}
		}
	})
}

func BenchmarkWheelScheduleAdvance(b *testing.B) {
	w := NewWheel(0)
	tm := NewTimer(func() {})
	for i := 0; i < b.N; i++ {
		w.Schedule(tm, w.Now()+int64(i%300))
		w.Advance(w.Now())
	}
}
