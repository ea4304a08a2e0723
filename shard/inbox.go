package shard

import (
	"errors"
	"sync/atomic"
)

// ErrInboxFull is returned by Inbox.TryPush (and so by Shard.Post) when the
// inbox holds its capacity of messages. The poster is refused, never blocked:
// a network loop that blocked on another shard's full inbox could deadlock
// against that shard blocking on its own. Callers answer BUSY (retriable) or
// retry from a timer.
var ErrInboxFull = errors.New("shard: inbox full")

// cacheLinePad keeps fields written by different threads on different cache
// lines.
type cacheLinePad [64]byte

// inboxSlot is one cell of the ring. seq tells its state relative to a
// position pos that maps to it: seq == pos means free for the producer that
// claims pos; seq == pos+1 means published and readable by the consumer.
type inboxSlot[T any] struct {
	seq atomic.Uint64
	val T
}

// Inbox is a bounded multi-producer single-consumer queue (Vyukov's bounded
// queue with per-slot sequence numbers). Producers claim a position with one
// CAS and publish by storing the slot's sequence; the consumer never writes a
// shared counter except the slot sequence that frees a cell.
//
// Inbox also carries the consumer's park protocol: before the consumer stops
// looking at the queue (parks, or returns to its host loop) it calls Arm and
// then checks the queue once more; a producer that publishes and finds the
// inbox armed disarms it and calls the wake function. The sequentially
// consistent atomics make the race safe: either the consumer's last check
// sees the message or the producer sees the armed flag.
type Inbox[T any] struct {
	_    cacheLinePad
	tail atomic.Uint64 // next position a producer claims
	_    cacheLinePad
	// head is the next position the consumer reads. Only the consumer
	// stores it; it is atomic so that Len may read it from other goroutines.
	head atomic.Uint64
	_    cacheLinePad
	// armed is 1 while the consumer may not look at the queue again without
	// being woken.
	armed atomic.Uint32
	wakes atomic.Uint64 // how many times wake was called (observability)
	_     cacheLinePad

	mask  uint64
	slots []inboxSlot[T]
	wake  func()
}

// NewInbox returns an inbox holding up to capacity messages, rounded up to a
// power of two of at least 2 (with one slot, "published" and "free for the
// next lap" would be the same sequence number). wake is called (from the producer's goroutine) when a message
// is published into an armed inbox; it must not block.
// REQUIRES: capacity >= 1, wake != nil.
func NewInbox[T any](capacity int, wake func()) *Inbox[T] {
	if capacity < 1 {
		panic("shard: inbox capacity must be at least 1")
	}
	n := uint64(2)
	for n < uint64(capacity) {
		n <<= 1
	}
	q := &Inbox[T]{mask: n - 1, slots: make([]inboxSlot[T], n), wake: wake}
	for i := range q.slots {
		q.slots[i].seq.Store(uint64(i))
	}
	return q
}

// Cap is the number of messages the inbox holds.
func (q *Inbox[T]) Cap() int { return len(q.slots) }

// TryPush appends v, or returns ErrInboxFull. Safe for concurrent use.
func (q *Inbox[T]) TryPush(v T) error {
	for {
		pos := q.tail.Load()
		s := &q.slots[pos&q.mask]
		seq := s.seq.Load()
		switch d := int64(seq - pos); {
		case d == 0:
			if !q.tail.CompareAndSwap(pos, pos+1) {
				continue
			}
			s.val = v
			s.seq.Store(pos + 1)
			if q.armed.Load() == 1 && q.armed.CompareAndSwap(1, 0) {
				q.wakes.Add(1)
				q.wake()
			}
			return nil
		case d < 0:
			// The slot still holds the message from one lap ago.
			return ErrInboxFull
		}
		// Another producer claimed pos between our loads; retry.
	}
}

// Pop removes the oldest published message. It reports false when the inbox
// is empty, or when the oldest claimed position is not yet published (its
// producer will publish and, if the inbox is armed, wake the consumer).
// REQUIRES: called by the single consumer only.
func (q *Inbox[T]) Pop() (T, bool) {
	var zero T
	h := q.head.Load()
	s := &q.slots[h&q.mask]
	if s.seq.Load() != h+1 {
		return zero, false
	}
	v := s.val
	s.val = zero
	s.seq.Store(h + q.mask + 1)
	q.head.Store(h + 1)
	return v, true
}

// Empty reports whether the consumer would find nothing to Pop.
// REQUIRES: called by the single consumer only.
func (q *Inbox[T]) Empty() bool {
	h := q.head.Load()
	return q.slots[h&q.mask].seq.Load() != h+1
}

// Len is an estimate of the number of messages claimed but not yet popped.
// Safe from any goroutine; exact only when no push or pop runs concurrently.
func (q *Inbox[T]) Len() int {
	n := int64(q.tail.Load() - q.head.Load())
	if n < 0 {
		return 0
	}
	return int(n)
}

// Arm tells producers that the consumer is about to stop looking: the next
// publish calls wake. The consumer must check Empty after Arm and before
// parking, and Disarm when it does not park.
// REQUIRES: called by the single consumer only.
func (q *Inbox[T]) Arm() { q.armed.Store(1) }

// Disarm withdraws Arm. It reports whether the inbox was still armed (false
// means a producer has already called, or is calling, wake).
// REQUIRES: called by the single consumer only.
func (q *Inbox[T]) Disarm() bool { return q.armed.Swap(0) == 1 }

// Wakes is the number of times a producer called wake.
func (q *Inbox[T]) Wakes() uint64 { return q.wakes.Load() }
