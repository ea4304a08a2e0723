package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// Metadata refreshes. Three rules keep one node's partial view from
// steering the client (docs/client.md, "Routing and metadata"):
//
//  1. Answers are ranked (metaQuality): one from a node that sees the
//     metadata quorum is trusted and applied whole; an untrusted one (a
//     node cut off from its peers, or one still replaying the metadata
//     after a restart) is applied only when no node gave a trusted one, and
//     then merged: it never turns a route the cache can use into an error,
//     nor drops a topic.
//  2. Nodes are asked one after another, the one that last gave a trusted
//     answer first and the ones that failed or gave untrusted answers last;
//     the next is asked as soon as one fails or answers untrusted, or when
//     one has not answered within metadataHedgeDelay (a hung node keeps its
//     socket open and would otherwise hold the refresh for a whole
//     timeout). With only untrusted answers, the refresh ends a hedge
//     delay after the last node was asked.
//  3. Refreshes caused by errors are paced: one starts at most every
//     MetadataRefreshBackoff, and every caller whose failure came before a
//     refresh started shares it, so a storm of errors causes one refresh.

// metadataHedgeDelay is how long a metadata request may go unanswered
// before the next node is asked as well.
const metadataHedgeDelay = 250 * time.Millisecond

// kickRefresh asks for a background metadata refresh without waiting.
func (c *Client) kickRefresh() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// refreshMetadata loads the metadata now (joining a refresh already
// running) and applies it. It waits under ctx.
func (c *Client) refreshMetadata(ctx context.Context) error {
	c.refreshMu.Lock()
	if c.refreshing == nil {
		c.startRefreshLocked()
	}
	ch := c.refreshing
	c.refreshMu.Unlock()
	return c.awaitRefresh(ctx, ch)
}

// refreshAfterError makes sure the metadata was loaded by a refresh that
// started at or after failedAt, the time the failed request was sent, and
// returns that refresh's error. Refreshes start at most every
// MetadataRefreshBackoff: a caller waits (under ctx) for the next allowed
// start, and callers whose failures the running refresh postdates share
// it.
func (c *Client) refreshAfterError(ctx context.Context, failedAt time.Time) error {
	for { // bounded: each turn waits for a refresh or for the pace
		c.refreshMu.Lock()
		if ch := c.refreshing; ch != nil {
			fresh := !c.refreshStart.Before(failedAt)
			c.refreshMu.Unlock()
			err := c.awaitRefresh(ctx, ch)
			if fresh || ctx.Err() != nil {
				return err
			}
			continue
		}
		if !c.lastStart.IsZero() && !c.lastStart.Before(failedAt) {
			err := c.refreshErr
			c.refreshMu.Unlock()
			return err
		}
		if wait := time.Until(c.lastStart.Add(c.cfg.MetadataRefreshBackoff)); wait > 0 {
			c.refreshMu.Unlock()
			if err := sleepCtx(ctx, wait); err != nil {
				return err
			}
			continue
		}
		c.startRefreshLocked()
		c.refreshMu.Unlock()
	}
}

// startRefreshLocked starts a refresh. REQUIRES: c.refreshMu held; none
// running.
func (c *Client) startRefreshLocked() {
	c.refreshing = make(chan struct{})
	c.refreshStart = time.Now()
	c.wg.Add(1)
	go c.runRefresh(c.refreshing)
}

// awaitRefresh waits for the refresh that closes ch and returns its error.
func (c *Client) awaitRefresh(ctx context.Context, ch chan struct{}) error {
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	return c.refreshErr
}

func (c *Client) runRefresh(done chan struct{}) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout+c.cfg.responseTimeout())
	defer cancel()
	_, err := c.fetchMetadata(ctx)
	c.refreshMu.Lock()
	c.refreshErr = err
	c.refreshing = nil
	c.lastStart = c.refreshStart
	close(done)
	c.refreshMu.Unlock()
}

// metaAnswer is one node's answer to a metadata request.
type metaAnswer struct {
	addr string
	resp *wire.MetadataResponse
	q    metaQuality
	err  error
}

// fetchMetadata asks nodes for the metadata (rule 2 above) and applies the
// first trusted answer, else the best untrusted one (rule 1); it returns
// the answer applied.
func (c *Client) fetchMetadata(ctx context.Context) (*wire.MetadataResponse, error) {
	cands := c.metadataCandidates()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan metaAnswer, len(cands)) // never blocks an asker
	asked, waiting := 0, 0
	ask := func() {
		addr := cands[asked]
		asked++
		waiting++
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			answers <- c.askMetadata(ctx, addr)
		}()
	}
	hedge := time.NewTimer(metadataHedgeDelay)
	defer hedge.Stop()
	ask()
	doubtful := map[string]bool{}
	var best *metaAnswer
	var errs []error
	for waiting > 0 { // bounded: at most len(cands) answers
		select {
		case a := <-answers:
			waiting--
			switch {
			case a.err != nil:
				if errors.Is(a.err, ErrClosed) {
					return nil, a.err
				}
				doubtful[a.addr] = true
				errs = append(errs, a.err)
			case a.q.trusted:
				c.applyAnswer(&a, doubtful)
				return a.resp, nil
			default:
				doubtful[a.addr] = true
				if best == nil || a.q.betterThan(best.q) {
					best = &a
				}
			}
			if asked < len(cands) {
				ask()
				hedge.Reset(metadataHedgeDelay)
			}
		case <-hedge.C:
			if asked < len(cands) {
				ask()
				hedge.Reset(metadataHedgeDelay)
			} else if best != nil {
				// Everyone was asked and the ones still silent had a hedge
				// delay more: take the best untrusted answer.
				waiting = 0
			}
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
			waiting = 0
		}
	}
	if best != nil {
		c.applyAnswer(best, doubtful)
		return best.resp, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrNoBrokers, errors.Join(errs...))
}

// askMetadata sends one metadata request to addr.
func (c *Client) askMetadata(ctx context.Context, addr string) metaAnswer {
	a := metaAnswer{addr: addr}
	cn, err := c.connTo(ctx, addr)
	if err == nil {
		var resp wire.MetadataResponse
		if err = cn.roundTrip(ctx, &wire.MetadataRequest{}, &resp, false); err == nil {
			a.resp, a.q = &resp, assessMetadata(&resp)
			return a
		}
	}
	if errors.Is(err, ErrClosed) {
		a.err = err
	} else {
		a.err = fmt.Errorf("metadata from %s: %w", addr, err)
	}
	return a
}

// applyAnswer applies a to the cache and remembers who answered how.
func (c *Client) applyAnswer(a *metaAnswer, doubtful map[string]bool) {
	dead := c.meta.deadNodes()
	c.meta.applyRanked(a.resp, a.q)
	c.redialRevived(dead)
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.q.trusted {
		c.lastGood = a.addr
	}
	c.doubtful = doubtful
}

// metadataCandidates lists the addresses to ask, in order: the node that
// last gave a trusted answer, the known nodes (alive first), the seeds;
// those that failed or answered untrusted last time go last.
func (c *Client) metadataCandidates() []string {
	c.mu.Lock()
	first, doubtful := c.lastGood, c.doubtful
	c.mu.Unlock()
	all := append([]string{first}, c.meta.addrs()...)
	all = append(all, c.cfg.Brokers...)
	seen := map[string]bool{"": true}
	var good, bad []string
	for _, addr := range all {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		if doubtful[addr] {
			bad = append(bad, addr)
		} else {
			good = append(good, addr)
		}
	}
	return append(good, bad...)
}
