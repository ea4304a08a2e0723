package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// broker holds the connection to one node address: at most one live
// connection, dialled on demand by one goroutine at a time, with a growing
// wait between failed dials.
type broker struct {
	cl   *Client
	addr string

	mu sync.Mutex
	// cn is the current connection; nil or closed means "dial on next use".
	// Guarded by mu.
	cn *conn
	// dialing is non-nil while a dial runs; it is closed when it ends,
	// after cn or dialErr is set. Guarded by mu.
	dialing chan struct{}
	// dialErr is the last dial's failure. Guarded by mu.
	dialErr error
	// failures counts consecutive failed dials; nextDial is when the next
	// may start. Guarded by mu.
	failures int
	nextDial time.Time

	// homes are the node's shard-aware connections (home.go).
	homes homeSet
}

// get returns a live connection, dialling when there is none. Concurrent
// callers share one dial; a dial that failed makes the next wait for the
// reconnect backoff. Every wait honours ctx.
func (b *broker) get(ctx context.Context) (*conn, error) {
	for attempt := 0; ; attempt++ {
		b.mu.Lock()
		if b.cn != nil && !b.cn.isClosed() {
			cn := b.cn
			b.mu.Unlock()
			return cn, nil
		}
		if b.cl.isClosed() {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		if b.dialing == nil {
			if wait := time.Until(b.nextDial); wait > 0 && attempt == 0 {
				b.mu.Unlock()
				if err := sleepCtx(ctx, wait); err != nil {
					return nil, err
				}
				continue
			}
			b.dialing = make(chan struct{})
			b.cl.wg.Add(1)
			go b.dial(b.dialing)
		}
		ch := b.dialing
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		b.mu.Lock()
		cn, err := b.cn, b.dialErr
		b.mu.Unlock()
		switch {
		case cn != nil && !cn.isClosed():
			return cn, nil
		case cn != nil:
			return nil, cn.failure()
		case err != nil:
			return nil, err
		}
	}
}

// dial runs one dial under the client's lifetime and publishes its result.
func (b *broker) dial(done chan struct{}) {
	defer b.cl.wg.Done()
	cn, err := dialConn(b.cl.ctx, &b.cl.cfg, b.addr)
	b.mu.Lock()
	defer b.mu.Unlock()
	defer close(done)
	b.dialing = nil
	if err != nil {
		if errors.Is(err, context.Canceled) && b.cl.isClosed() {
			err = ErrClosed
		}
		b.cn, b.dialErr = nil, err
		b.failures++
		b.nextDial = time.Now().Add(backoff(b.cl.cfg.ReconnectBackoffMin, b.cl.cfg.ReconnectBackoffMax, b.failures-1))
		return
	}
	if b.cl.isClosed() {
		cn.close(ErrClosed)
		b.cn, b.dialErr = nil, ErrClosed
		return
	}
	b.cn, b.dialErr, b.failures = cn, nil, 0
}

// close closes the current connection.
func (b *broker) close(cause error) {
	b.mu.Lock()
	cn := b.cn
	b.cn = nil
	b.mu.Unlock()
	if cn != nil {
		cn.close(cause)
	}
	b.homes.close(cause)
}

// backoff returns the wait before attempt n (from 0): base doubled n times,
// capped at ceiling, with up to 25% random jitter taken off so that many
// clients do not retry in step.
func backoff(base, ceiling time.Duration, n int) time.Duration {
	d := base
	for i := 0; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
