package client

import (
	"context"
	"time"
)

// This file lets a synchronous Produce run its partition's sender itself.
//
// With Linger < 0 every Produce cuts a batch of its one record. Handed to
// a sender goroutine, the record's round trip crossed five goroutines
// (caller, sender, connection writer, reader, sender again, delivery
// goroutine, caller), and each hand-off to a parked goroutine may wake a
// thread on another CPU: tens of microseconds each on a machine whose
// idle CPUs halt, more than the broker's own work. When no sender runs,
// the Produce takes the sender's role instead: it sends (writing the frame
// itself when the connection is idle, conn.send), waits for the reader to
// hand it the completion, and completes its own record, so a request
// wakes one goroutine (the caller, from the reader) besides the reader.
//
// Only the plain path runs here. Anything else — a failed send and its
// recovery, a delivery timeout, the producer closing, the caller's
// context ending, a batch of the caller's acknowledged while later ones
// wait — hands the role, with the sender's state, to a sender goroutine
// (handOff), which goes on exactly as it would have from the start.
// Ordering holds because one role runs at a time (running), and the
// caller's own answer waits behind the callbacks of the partition's
// earlier batches (undelivered).

// runInline is run's loop on a Produce's goroutine, until own is handed
// to delivery. REQUIRES: the caller took the sender's role (cutRunLocked
// returned own).
func (s *partSender) runInline(ctx context.Context, own *prodBatch) {
	defer s.p.senders.Done()
	var expiry *time.Timer
	defer func() {
		if expiry != nil {
			expiry.Stop()
		}
	}()
	for { // bounded like run's; every way out of the plain path hands off
		if !s.takeReady() {
			return
		}
		if s.p.ctx.Err() != nil || ctx.Err() != nil || s.recovering {
			s.handOff()
			return
		}
		if s.deliverDone(own) {
			s.handOffOrStop()
			return
		}
		head := s.oldestUnfinished()
		if head == nil {
			continue
		}
		if !time.Now().Before(head.deadline()) {
			s.handOff() // run expires it
			return
		}
		s.sendUnsent(ctx)
		if s.recovering || ctx.Err() != nil {
			s.handOff()
			return
		}
		if s.inflight == 0 {
			continue
		}
		if expiry == nil {
			expiry = time.NewTimer(time.Until(head.deadline()))
		} else {
			expiry.Reset(time.Until(head.deadline()))
		}
		select {
		case b := <-s.events:
			s.completed(b)
		case <-s.kick:
		case <-expiry.C:
		case <-s.p.ctx.Done():
		case <-ctx.Done():
		}
	}
}

// handOffOrStop gives the sender's role up after the caller's batch was
// delivered: it ends when nothing is left, else a goroutine takes over.
func (s *partSender) handOffOrStop() {
	if s.takeReady() {
		s.handOff()
	}
}

// handOff passes the sender's role, and with it the state it owns (the
// window, the sends in flight, recovery), to a new sender goroutine.
func (s *partSender) handOff() {
	s.p.senders.Add(1) // before runInline's Done: Close's Wait never sees 0 between
	go s.run()
}
