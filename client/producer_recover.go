package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// Recovery of a partition's window after a failed send, following Kafka's
// idempotent-producer rules (docs/client.md, "Retries and ordering"). It
// runs only when nothing of the partition is in flight, so every batch's
// last outcome is known:
//
//   - A retriable failure (lost connection, NOT_PRIMARY, BUSY, ...) of the
//     oldest unacknowledged batch: apply what the error teaches (a hint, a
//     metadata refresh, a backoff) and resend every unacknowledged batch in
//     sequence order with the SAME producer id, epoch and sequence — the
//     oldest alone until it is acknowledged, then the rest pipelined.
//     Batches that were in fact appended are acknowledged by the broker's
//     deduplication with their original offsets.
//   - OUT_OF_ORDER_SEQUENCE or UNKNOWN_PRODUCER_ID on the oldest
//     unacknowledged batch: the broker lost (or expired) the producer's
//     state, and none of these batches was appended. Bump the epoch
//     (InitProducer with the current id and epoch) and renumber them from
//     sequence 0; a new epoch starts sequences afresh.
//   - A non-retriable error of the oldest batch (MESSAGE_TOO_LARGE, ...):
//     it was not appended, so neither was any later one (they would leave a
//     gap). Fail it and renumber the later ones down to close the gap.
//   - DUPLICATE_SEQUENCE (handled on completion): written long ago; success
//     with an unknown offset.
//   - INVALID_PRODUCER_EPOCH: fenced by a newer instance; the producer fails
//     every record from now on with ErrProducerFenced.
//   - A batch past its delivery timeout fails with an unknown outcome (it
//     may have been appended), and so does every batch sent after it; the
//     batches behind them that were never sent are renumbered under a new
//     epoch. The timeout fires on time (partSender.expireDue), also while
//     sends are in flight to a node that does not answer: those sends are
//     abandoned, and the new epoch fences their late appends.

// recover acts on the window's first failed batch.
// REQUIRES: s.inflight == 0 and s.recovering.
func (s *partSender) recover() {
	var head *prodBatch
	for _, b := range s.window {
		if b.state == batchFailed {
			head = b
			break
		}
	}
	if head == nil {
		s.recovering = false
		return
	}
	err := head.err
	head.failures++
	idempotent := !s.p.cfg.DisableIdempotence
	switch {
	case errors.Is(err, ErrClosed):
		s.failRest(err)
	case errors.Is(err, wire.ErrInvalidProducerEpoch):
		s.p.setFatal(ErrProducerFenced)
		s.failRest(fmt.Errorf("%w (%v)", ErrProducerFenced, brokerMessage(err)))
	case errors.Is(err, ErrTopicRecreated):
		s.failRest(err)
		s.topicID = wire.TopicID{}
		s.mu.Lock()
		s.nextSeq = 0
		s.mu.Unlock()
	case s.abandoned() != nil:
		// A send abandoned at its delivery timeout may still be read by
		// its connection: that batch must never be renumbered or resent,
		// whatever the oldest failure says. Fail every batch sent (their
		// outcome is unknown) and move the rest to a new epoch.
		s.failExpired(s.abandoned())
	case idempotent && head == s.window[0] &&
		(errors.Is(err, wire.ErrOutOfOrderSequence) || errors.Is(err, wire.ErrUnknownProducerID)):
		if head.seqRecoveries++; head.seqRecoveries > s.p.c.cfg.RetryAttemptsMax {
			s.finish(head, fmt.Errorf("%w: %s/%d after %d epoch bumps: %w", ErrRetriesExhausted, s.topic, s.partition, head.seqRecoveries-1, err))
			s.afterFailure(head)
			return
		}
		if err := s.resetSequences(); err != nil {
			sleepCtx(s.p.ctx, backoff(s.p.c.cfg.RetryBackoffMin, s.p.c.cfg.RetryBackoffMax, head.seqRecoveries))
			return
		}
		s.resendFailed()
	default:
		s.retryOrFail(head)
	}
}

// retryOrFail handles a failure that is not about sequences. A producer
// retries a retriable failure until the batch's delivery timeout (as
// Kafka's does, with retries unbounded and delivery.timeout.ms the bound),
// not RetryAttemptsMax times: a primary may take longer than ten backoffs
// to come back, and records should not fail while DeliveryTimeout allows
// waiting for it.
func (s *partSender) retryOrFail(head *prodBatch) {
	err := head.err
	v, after := backoffThenResend, time.Duration(0)
	if !errors.Is(err, errNoAnswerInTime) {
		v, after = s.p.c.judge(s.topic, s.partition, err)
	}
	if v == giveUp {
		s.finish(head, err)
		s.afterFailure(head)
		return
	}
	if errors.Is(err, errNoAnswerInTime) || !time.Now().Before(head.deadline()) {
		s.failExpired(head)
		return
	}
	// Wait for the refresh and the backoff, but not past the deadline:
	// then the next round fails the batch on time.
	ctx, cancel := context.WithDeadline(s.p.ctx, head.deadline())
	defer cancel()
	if s.waitToResend(ctx, head, v, after) != nil && s.p.ctx.Err() != nil {
		return // the producer is closing: run aborts
	}
	s.resendFailed()
}

// waitToResend carries out verdict v for head before it is resent: the
// metadata refresh, then the backoff (at least retryAfter), cut short as
// soon as the cache shows the partition's route improved on the one head
// was last routed by (routewait.go). A hint to a newer generation is
// followed at once; another hint at once only after a first failure, as
// afterVerdict does. REQUIRES: v is not giveUp.
func (s *partSender) waitToResend(ctx context.Context, head *prodBatch, v verdict, retryAfter time.Duration) error {
	c := s.p.c
	attemptAt := head.sentAt
	if attemptAt.IsZero() {
		attemptAt = time.Now()
	}
	if v == refreshThenResend {
		if err := c.refreshAfterError(ctx, attemptAt); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if c.meta.state(s.topic, s.partition).improves(head.route) {
		head.backoffFrom = head.failures
		return nil
	}
	attempt := head.failures - 1 - head.backoffFrom
	if v == resendNow && attempt == 0 {
		return nil
	}
	var db *dialBackoffError
	if errors.As(head.err, &db) {
		retryAfter = max(retryAfter, time.Until(db.until))
	}
	d := max(retryAfter, backoff(c.cfg.RetryBackoffMin, c.cfg.RetryBackoffMax, attempt))
	improved, err := c.waitRoute(ctx, s.topic, s.partition, head.route, d, v == refreshThenResend)
	if improved {
		head.backoffFrom = head.failures
	}
	return err
}

// failExpired fails head, whose delivery timeout passed, with
// ErrDeliveryTimeout, and with it every batch already sent.
func (s *partSender) failExpired(head *prodBatch) {
	bound := ErrDeliveryTimeout
	if !head.sent {
		// It never reached a broker (no route, no connection): it was
		// not written, and the batches after it take its sequences.
		s.finish(head, fmt.Errorf("%w: %s/%d after %d failed attempts (%w): %w",
			bound, s.topic, s.partition, head.failures, ErrNeverSent, head.err))
		s.afterFailure(head)
		return
	}
	// Every batch sent so far has an unknown outcome: fail them all.
	anySent := false
	for _, b := range s.window {
		if b.sent && b.state != batchDone {
			anySent = true
			s.finish(b, fmt.Errorf("%w: %s/%d after %d failed attempts (the batch may have been written): %w",
				bound, s.topic, s.partition, b.failures, b.err))
		}
	}
	s.deliverDone(nil) // on time, before the epoch bump's round trip
	if s.p.cfg.StopOnFailure {
		s.halt(head.err)
		return
	}
	if anySent && !s.p.cfg.DisableIdempotence && (s.hasState(batchFailed) || s.hasState(batchUnsent)) {
		if err := s.resetSequences(); err != nil {
			s.failRest(err)
			return
		}
	}
	s.resendFailed()
}

// abandoned returns the window's first unfinished batch whose send was
// abandoned at its delivery timeout, or nil.
func (s *partSender) abandoned() *prodBatch {
	for _, b := range s.window {
		if b.abandoned && b.state != batchDone {
			return b
		}
	}
	return nil
}

// finish makes b final with err.
func (s *partSender) finish(b *prodBatch, err error) {
	b.state, b.err = batchDone, err
}

// failRest fails every unacknowledged batch of the window and of ready.
func (s *partSender) failRest(err error) {
	s.mu.Lock()
	s.window = append(s.window, s.ready...)
	clear(s.ready)
	s.ready = s.ready[:0]
	s.mu.Unlock()
	for _, b := range s.window {
		if b.state != batchDone {
			s.finish(b, err)
		}
	}
	s.recovering = false
}

// resendFailed marks failed batches for sending again, in order, the
// oldest alone first (probing).
func (s *partSender) resendFailed() {
	for _, b := range s.window {
		if b.state == batchFailed {
			b.state = batchUnsent
		}
	}
	s.recovering = false
	s.probing = true
}

// afterFailure continues after failed, the oldest unacknowledged batch,
// failed for good: with StopOnFailure the partition halts, else the
// batches behind it close the gap and are sent.
func (s *partSender) afterFailure(failed *prodBatch) {
	if s.p.cfg.StopOnFailure {
		s.halt(failed.err)
		return
	}
	s.renumberAfterFailure(failed)
}

// halt fails every unacknowledged batch of the partition, and every batch
// cut from now on, with ErrEarlierRecordFailed (StopOnFailure). Batches
// already failed keep their own error.
func (s *partSender) halt(cause error) {
	s.mu.Lock()
	if s.halted == nil {
		s.halted = fmt.Errorf("%w (%s/%d: %v)", ErrEarlierRecordFailed, s.topic, s.partition, cause)
	}
	halted := s.halted
	s.mu.Unlock()
	if s.p.cfg.DisableIdempotence {
		// Without sequences the broker may have appended a batch sent
		// behind the failed one.
		for _, b := range s.window {
			if b.sent && b.state != batchDone {
				s.finish(b, fmt.Errorf("%s/%d: sent behind a failed batch (it may have been written): %w", s.topic, s.partition, b.err))
			}
		}
	}
	s.failRest(halted)
}

// renumberAfterFailure closes the sequence gap the definitely-unwritten
// batch failed leaves: the batches after it (none of them written either)
// take its sequence numbers onwards, in the same epoch.
func (s *partSender) renumberAfterFailure(failed *prodBatch) {
	if !s.p.cfg.DisableIdempotence {
		s.mu.Lock()
		s.renumberLocked(failed.seq)
		s.mu.Unlock()
	}
	s.resendFailed()
}

// resetSequences moves the partition to a newer epoch and renumbers every
// unacknowledged batch from sequence 0.
func (s *partSender) resetSequences() error {
	s.mu.Lock()
	pid, epoch := s.pid, s.epoch
	s.mu.Unlock()
	pid, epoch, err := s.p.bumpEpoch(pid, epoch)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pid, s.epoch = pid, epoch
	s.renumberLocked(0)
	s.mu.Unlock()
	return nil
}

// renumberLocked gives every unacknowledged batch of the window, then every
// ready batch, consecutive sequences from start under the current id and
// epoch. REQUIRES: s.mu held; no send of these batches is in flight.
func (s *partSender) renumberLocked(start int32) {
	seq := start
	renumber := func(b *prodBatch) {
		if b.state == batchDone {
			return
		}
		b.seq, b.epoch = seq, s.epoch
		batch.SetProducerState(b.data, s.pid, s.epoch, seq)
		seq = batch.IncrementSequence(seq, int32(len(b.recs)))
	}
	for _, b := range s.window {
		renumber(b)
	}
	for _, b := range s.ready {
		renumber(b)
	}
	s.nextSeq = seq
}

// bumpEpoch returns a newer identity than (pid, epoch): the producer's
// current one if another partition already bumped it, else a new epoch
// from InitProducer.
func (p *Producer) bumpEpoch(pid int64, epoch int16) (int64, int16, error) {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	if p.producerID != pid || p.epoch != epoch {
		return p.producerID, p.epoch, nil
	}
	var resp wire.InitProducerResponse
	req := wire.InitProducerRequest{ProducerID: pid, ProducerEpoch: epoch}
	if err := p.c.doAdmin(p.ctx, anyNode, &req, &resp, true); err != nil {
		return 0, 0, fmt.Errorf("client: bump producer epoch: %w", err)
	}
	p.producerID, p.epoch = resp.ProducerID, resp.ProducerEpoch
	return p.producerID, p.epoch, nil
}
