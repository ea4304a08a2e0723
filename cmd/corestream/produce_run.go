package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corestream/corestream/client"
)

// Bounds of produce.
const (
	// closeWaitMax bounds the wait for the producer to fail what is left
	// once produce gave up (every callback normally runs at once).
	closeWaitMax = 5 * time.Second
	// deliveryMarginMax caps deliveryMargin.
	deliveryMarginMax = time.Second
)

// deliveryMargin is how much sooner than --timeout the producer fails a
// batch on its own: a tenth of it, at most deliveryMarginMax.
func deliveryMargin(timeout time.Duration) time.Duration {
	return min(timeout/10, deliveryMarginMax)
}

// errNoAnswer is the outcome of lines still unanswered --timeout after the
// producer took them: produce gives up on them and on the rest.
var errNoAnswer = errors.New("no answer within --timeout")

// errStopped is the cause of stopCtx once produce has stopped waiting.
var errStopped = errors.New("produce stopped")

// produceRun is one `produce`: a reading goroutine hands lines to the
// producer, the producer's delivery goroutine reports their outcomes, and
// the command's goroutine watches both (watch).
type produceRun struct {
	a       *app
	p       *client.Producer
	target  produceTarget
	timeout time.Duration
	// stopCtx ends when reading must stop: a line failed, produce gave up
	// waiting, or the command was interrupted. stop's cause says which.
	stopCtx context.Context
	stop    context.CancelCauseFunc

	// sendMu is held by the reading goroutine from taking a line into the
	// ledger until the producer took it or refused it, so that produce can
	// wait for that before closing the producer (the reading goroutine may
	// be blocked on input, which no one can wait for). Lock order: sendMu,
	// then mu.
	sendMu sync.Mutex
	// noMore, once set (under sendMu), stops the reading goroutine before
	// its next line.
	noMore bool
	// mu guards led and closed.
	mu  sync.Mutex
	led *lineLedger
	// closed is set once the report is taken: later outcomes are ignored.
	closed bool
}

// readResult is how reading ended.
type readResult struct {
	err error
	eof bool
}

// produceTarget is where and how produce sends each line: the topic, the
// partition (-1: by key, keyless ones spread), the key separator ("":
// no key) and the headers every record carries.
type produceTarget struct {
	topic     string
	partition int32
	keySep    string
	headers   []client.Header
}

// produceLines sends stdin's lines, stopping at the first that fails, and
// reports which were acknowledged.
func produceLines(ctx context.Context, a *app, c *client.Client, cfg client.ProducerConfig, target produceTarget) error {
	initCtx, cancel := context.WithTimeout(ctx, a.timeout)
	p, err := c.NewProducer(initCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	r := &produceRun{a: a, p: p, target: target, timeout: a.timeout, led: newLineLedger()}
	r.stopCtx, r.stop = context.WithCancelCause(ctx)
	defer r.stop(nil)
	read := make(chan readResult, 1)
	go func() { read <- r.read() }()
	res, gaveUp := r.watch(read)
	// Reading stops (stop ends a wait for buffer space) and the line being
	// handed over, if any, gets to the producer or is taken back.
	r.stop(errStopped)
	r.sendMu.Lock()
	r.noMore = true
	r.sendMu.Unlock()
	r.closeProducer(gaveUp)

	r.mu.Lock()
	r.closed = true
	rep := r.led.report()
	r.mu.Unlock()
	rep.UnreadInput = !res.eof
	if a.json {
		a.emit(rep, nil)
	}
	var failure error
	switch {
	case rep.FirstFailedLine > 0:
		failure = errors.New(rep.summary())
	case res.err != nil:
		failure = fmt.Errorf("%s; %w", acknowledgedPrefix(rep.AcknowledgedThrough), res.err)
	case !res.eof:
		failure = fmt.Errorf("interrupted: %s; the input after line %d was not read", acknowledgedPrefix(rep.AcknowledgedThrough), rep.Sent)
	}
	return failure
}

// read hands stdin's lines to the producer until the input ends or
// stopCtx does. A line the producer refuses, or one without the key
// separator, fails and stops it.
func (r *produceRun) read() readResult {
	sc := bufio.NewScanner(r.a.stdin)
	sc.Buffer(make([]byte, 0, 64<<10), lineBytesMax)
	for line := 1; ; line++ {
		if r.stopCtx.Err() != nil {
			return readResult{}
		}
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				err = fmt.Errorf("reading standard input after line %d: %w", line-1, err)
				r.stop(err)
				return readResult{err: err}
			}
			return readResult{eof: true}
		}
		if !r.send(line, client.Record{Topic: r.target.topic, Partition: r.target.partition, Value: sc.Bytes(), Headers: r.target.headers}) {
			return readResult{}
		}
	}
}

// send hands line to the producer; it returns false when reading must
// stop.
func (r *produceRun) send(line int, rec client.Record) bool {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.noMore || r.stopCtx.Err() != nil {
		return false
	}
	r.mu.Lock()
	r.led.accept(line, time.Now())
	r.mu.Unlock()
	if sep := r.target.keySep; sep != "" {
		k, v, ok := bytes.Cut(rec.Value, []byte(sep))
		if !ok {
			r.failLine(line, fmt.Errorf("line %d has no key separator %q: %w", line, sep, errNoKeySeparator))
			return false
		}
		rec.Key, rec.Value = k, v
	}
	if err := r.p.ProduceAsync(r.stopCtx, rec, r.outcome(line)); err != nil {
		if r.stopCtx.Err() != nil && errors.Is(err, r.stopCtx.Err()) {
			// Stopped while waiting for buffer space: the line was not
			// taken, and is not part of the account.
			r.mu.Lock()
			r.led.unaccept(line)
			r.mu.Unlock()
			return false
		}
		r.failLine(line, fmt.Errorf("%w: %w", errNotAccepted, err))
		return false
	}
	return true
}

// failLine records that line failed before reaching a partition, and
// stops reading. REQUIRES: sendMu held.
func (r *produceRun) failLine(line int, err error) {
	r.mu.Lock()
	r.led.fail(line, -1, err)
	r.mu.Unlock()
	r.stop(err)
}

// outcome returns line's producer callback.
func (r *produceRun) outcome(line int) func(client.Produced, error) {
	return func(pr client.Produced, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			return
		}
		if err == nil {
			r.led.ack(line, pr.Partition, pr.Offset)
			return
		}
		r.led.fail(line, pr.Partition, err)
		r.stop(err)
	}
}

// watch waits for reading to end (the input's end or a stop), then for
// every line taken to have an outcome, giving up when the oldest line
// still in flight was taken --timeout ago. It returns how reading ended
// (when it did) and whether it gave up.
func (r *produceRun) watch(read <-chan readResult) (res readResult, gaveUp bool) {
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	flushed := make(chan struct{})
	flushCtx, cancelFlush := context.WithCancel(context.WithoutCancel(r.stopCtx))
	defer cancelFlush()
	flushing := false
	startFlush := func() {
		if !flushing {
			flushing = true
			go func() { r.p.Flush(flushCtx); close(flushed) }()
		}
	}
	stopped := r.stopCtx.Done()
	for {
		select {
		case res = <-read:
			read = nil
			startFlush()
		case <-stopped:
			// Reading stops at its next line (or is blocked on input that
			// may never come): flush what the producer took.
			stopped = nil
			startFlush()
		case <-flushed:
			return res, false
		case now := <-timer.C:
			r.mu.Lock()
			since, waiting := r.led.waitingSince()
			if waiting && now.Sub(since) >= r.timeout {
				r.led.abortCause = fmt.Errorf("%w (%v): the cluster may be down, hung or cut off, and the lines sent may have been written", errNoAnswer, r.timeout)
				cause := r.led.abortCause
				r.mu.Unlock()
				r.stop(cause)
				select { // reading may have ended meanwhile
				case res = <-read:
				default:
				}
				return res, true
			}
			r.mu.Unlock()
			next := r.timeout
			if waiting {
				next = since.Add(r.timeout).Sub(now)
			}
			timer.Reset(next)
		}
	}
}

// closeProducer closes the producer: at once when produce gave up (what
// is left fails, as lines of unknown outcome), else after the flush that
// already ended. Every callback has run when it returns, unless the
// producer takes over closeWaitMax to fail them; their lines then count
// as of unknown outcome.
func (r *produceRun) closeProducer(gaveUp bool) {
	ctx, cancel := context.WithTimeout(context.Background(), closeWaitMax)
	defer cancel()
	if gaveUp {
		expired, cancelNow := context.WithCancel(ctx)
		cancelNow()
		ctx = expired
	}
	done := make(chan struct{})
	go func() { r.p.Close(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWaitMax):
	}
}
