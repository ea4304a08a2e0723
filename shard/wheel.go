package shard

// A hierarchical timing wheel (Varghese & Lauck; the layout of the classic
// Linux timer wheel). Time is counted in ticks; the wheel is pure: it never
// reads a clock, the shard advances it.
//
//	level 0: 64 slots of 1 tick        covers   64 ticks
//	level 1: 64 slots of 64 ticks      covers   4096 ticks
//	level 2: 64 slots of 4096 ticks    covers   262144 ticks
//	level 3: 64 slots of 262144 ticks  covers   16777216 ticks (4.6 h at 1 ms)
//
// A timer sits in the level whose span holds its distance from now, in the
// slot picked by the bits of its absolute deadline. When the level-0 index
// wraps to 0, the matching level-1 slot is emptied and its timers are placed
// again (they now land in level 0), and so on upwards. A deadline beyond the
// last level is parked in the last level and placed again when reached.
//
// Costs: Schedule and Stop are O(1); Advance is O(ticks with work + timers
// fired or moved); NextExpiry scans at most 4×64 slot heads.

const (
	wheelBits   = 6
	wheelSlots  = 1 << wheelBits
	wheelMask   = wheelSlots - 1
	wheelLevels = 4
	// wheelSpanTicks is the farthest distance the wheel places exactly.
	wheelSpanTicks = int64(1) << (wheelBits * wheelLevels)
)

// Timer is a callback scheduled on a Wheel. The zero value is not usable;
// create timers with NewTimer. A Timer may be scheduled again after it fired
// or was stopped, which lets hot paths reuse one Timer without allocating.
type Timer struct {
	fn   func()
	when int64 // tick at which fn runs
	// Invariant: w != nil exactly while the timer is linked into a slot.
	w          *Wheel
	level      uint8
	slot       uint8
	prev, next *Timer // circular list of the slot; the slot points at the head
}

// NewTimer returns an unscheduled timer that will call fn.
// REQUIRES: fn != nil.
func NewTimer(fn func()) *Timer {
	if fn == nil {
		panic("shard: NewTimer with nil func")
	}
	return &Timer{fn: fn}
}

// Pending reports whether the timer is scheduled and has not fired.
func (t *Timer) Pending() bool { return t.w != nil }

// When is the tick at which the timer fires (or fired last).
func (t *Timer) When() int64 { return t.when }

// Wheel holds timers and fires them as it is advanced. It is owned by one
// goroutine (the shard's) and is not safe for concurrent use.
type Wheel struct {
	// now is the next tick to process: every timer with when < now has fired.
	now   int64
	slots [wheelLevels][wheelSlots]*Timer
	count int // timers linked into slots

	scratch []*Timer // detach's result, reused between ticks
}

// NewWheel returns an empty wheel whose first unprocessed tick is now.
func NewWheel(now int64) *Wheel { return &Wheel{now: now} }

// Now is the next tick Advance will process.
func (w *Wheel) Now() int64 { return w.now }

// Len is the number of scheduled timers.
func (w *Wheel) Len() int { return w.count }

// Schedule arranges for t to fire at tick when; a when already passed fires
// at the next tick processed. A pending t is moved.
func (w *Wheel) Schedule(t *Timer, when int64) {
	if t.w != nil {
		t.w.unlink(t)
	}
	t.when = when
	w.place(t)
}

// Stop unschedules t. It reports whether t was pending.
func (w *Wheel) Stop(t *Timer) bool {
	if t.w != w {
		return false
	}
	w.unlink(t)
	return true
}

// place links t into the slot that matches its distance from now.
func (w *Wheel) place(t *Timer) {
	when := t.when
	if when < w.now {
		when = w.now
	}
	d := when - w.now
	if d >= wheelSpanTicks {
		when = w.now + wheelSpanTicks - 1 // parked; placed again when reached
		d = wheelSpanTicks - 1
	}
	level := 0
	for d >= int64(1)<<(wheelBits*(level+1)) {
		level++
	}
	slot := int((when >> (wheelBits * level)) & wheelMask)
	t.level, t.slot, t.w = uint8(level), uint8(slot), w
	head := w.slots[level][slot]
	if head == nil {
		t.prev, t.next = t, t
		w.slots[level][slot] = t
	} else { // append at the tail
		tail := head.prev
		t.prev, t.next = tail, head
		tail.next = t
		head.prev = t
	}
	w.count++
}

func (w *Wheel) unlink(t *Timer) {
	if t.level == dueLevel { // taken out to fire this tick; not in a slot
		t.w = nil
		return
	}
	p := &w.slots[t.level][t.slot]
	if t.next == t {
		*p = nil
	} else {
		t.prev.next = t.next
		t.next.prev = t.prev
		if *p == t {
			*p = t.next
		}
	}
	t.prev, t.next, t.w = nil, nil, nil
	w.count--
}

// dueLevel marks a timer taken out of its slot to fire in the current tick.
// Such a timer still counts as pending: Stop or Schedule from an earlier
// callback of the same tick withdraws it.
const dueLevel = 0xff

// detach empties one slot into w.scratch (reused; valid until the next
// detach), marking each timer with level, and lowers the count.
func (w *Wheel) detach(level, slot int, mark uint8) []*Timer {
	w.scratch = w.scratch[:0]
	head := w.slots[level][slot]
	if head == nil {
		return w.scratch
	}
	for t := head; ; {
		next := t.next
		t.prev, t.next, t.level = nil, nil, mark
		w.scratch = append(w.scratch, t)
		w.count--
		if next == head {
			break
		}
		t = next
	}
	w.slots[level][slot] = nil
	return w.scratch
}

// NextExpiry returns the earliest tick at which Advance may have work: a
// level-0 deadline, or a cascade of a non-empty higher slot (which may fire
// nothing; waking early is harmless). ok is false when no timer is pending.
func (w *Wheel) NextExpiry() (tick int64, ok bool) {
	if w.count == 0 {
		return 0, false
	}
	best := int64(-1)
	for i := int64(0); i < wheelSlots; i++ {
		if w.slots[0][(w.now+i)&wheelMask] != nil {
			best = w.now + i
			break
		}
	}
	for level := 1; level < wheelLevels; level++ {
		shift := uint(wheelBits * level)
		unit := int64(1) << shift
		first := (w.now + unit - 1) &^ (unit - 1) // first boundary >= now
		for i := int64(0); i < wheelSlots; i++ {
			at := first + i*unit
			if best >= 0 && at >= best {
				break
			}
			if w.slots[level][(at>>shift)&wheelMask] != nil {
				best = at
				break
			}
		}
	}
	return best, best >= 0
}

// Advance processes every tick up to and including to, firing due timers in
// deadline order; timers due at the same tick fire in no particular order
// (one that reached level 0 by a cascade may follow one scheduled later
// directly into level 0). A callback may
// schedule or stop timers (a timer stopped by an earlier callback of the
// same tick does not fire); one scheduled for a tick already processed fires
// at the next tick processed. It returns the number of timers fired.
// REQUIRES: not called from a timer callback.
func (w *Wheel) Advance(to int64) int {
	fired := 0
	for w.now <= to {
		next, ok := w.NextExpiry()
		if !ok || next > to {
			w.now = to + 1
			break
		}
		w.now = next
		fired += w.tick()
	}
	return fired
}

// tick processes tick w.now: cascades the higher levels at their
// boundaries, then fires level-0 slot w.now.
func (w *Wheel) tick() int {
	now := w.now
	for level := 1; level < wheelLevels; level++ {
		shift := uint(wheelBits * level)
		if now&(int64(1)<<shift-1) != 0 {
			break
		}
		for _, t := range w.detach(level, int((now>>shift)&wheelMask), 0) {
			t.w = nil
			w.place(t)
		}
	}
	due := w.detach(0, int(now&wheelMask), dueLevel)
	w.now = now + 1 // callbacks that schedule for <= now land on the next tick
	fired := 0
	for i, t := range due {
		due[i] = nil
		if t.w != w || t.level != dueLevel {
			continue // stopped or moved by an earlier callback of this tick
		}
		t.w = nil
		fired++
		t.fn()
	}
	return fired
}
