package client

import (
	"context"
	"fmt"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// A producer whose batch failed on a partition without a usable primary
// (no primary in the metadata, NOT_PRIMARY without a hint,
// NOT_ENOUGH_REPLICAS, a refused connection) used to sleep out its
// exponential backoff, up to RetryBackoffMax, and learn of a new primary
// only at its next attempt: after a node's restart the first write
// landed up to a second after the election (fault harness: about 1.6 s
// from the election to the first write, most of it in backoffs). As
// Kafka's producer does (KIP-951: a batch whose partition has a new
// leader epoch skips its backoff), the wait now ends as soon as the
// metadata shows the partition's route moved on, and while it waits the
// metadata is refreshed every MetadataRefreshBackoff, so the new route is
// learnt within that time. A route that moved on also restarts the
// batch's backoff from RetryBackoffMin: it is a new situation.

// routeState is what the cache says of one partition's route, as far as a
// retry cares: whether it can be used, and how far it has moved on.
type routeState struct {
	// usable: no partition error, a primary with an address, and that
	// primary's node not reported down.
	usable bool
	// gen is the primary's generation.
	gen int32
	// offline is how many replicas the metadata reports offline.
	offline int
}

// improves reports whether s is worth an attempt now, for a batch whose
// last attempt was routed when the cache said was: the route became
// usable, moved to a newer generation, or has fewer replicas offline. A
// different primary at the same generation does not count: two nodes
// whose views have not converged would bounce a batch between them (the
// backoff spaces those attempts).
func (s routeState) improves(was routeState) bool {
	if !s.usable {
		return false
	}
	return !was.usable || s.gen > was.gen || s.offline < was.offline
}

// state returns topic/partition's routeState; the zero value (not usable)
// when the cache does not have it.
func (m *metaCache) state(topic string, partition int32) routeState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.parts) {
		return routeState{}
	}
	p := &t.parts[partition]
	n, known := m.nodes[p.primary]
	usable := p.err == wire.CodeNone && p.primary != wire.NodeNone && p.addr != "" && (!known || n.Alive)
	return routeState{usable: usable, gen: p.gen, offline: len(p.offline)}
}

// waitRoute waits for d, or until topic/partition's cached route improves
// on was, and reports whether it did; it returns ctx's error when ctx ends
// first. With refresh set it keeps the metadata fresh meanwhile: a
// refresh at most every MetadataRefreshBackoff (shared with every other
// caller, so many waiting partitions cause one refresh per interval).
func (c *Client) waitRoute(ctx context.Context, topic string, partition int32, was routeState, d time.Duration, refresh bool) (bool, error) {
	wait := time.NewTimer(d)
	defer wait.Stop()
	pace := time.NewTimer(time.Hour)
	defer pace.Stop()
	for { // bounded by d: each turn waits for a change, the pace or the end
		changed := c.meta.watch() // before the check, so that no change is missed
		if c.meta.state(topic, partition).improves(was) {
			return true, nil
		}
		if refresh {
			pace.Reset(c.refreshIfDue())
		}
		select {
		case <-changed:
		case <-pace.C:
		case <-wait.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// refreshIfDue starts a metadata refresh unless one is running or the
// last started less than MetadataRefreshBackoff ago, and returns how long
// until the next one may be due.
func (c *Client) refreshIfDue() time.Duration {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if c.refreshing != nil {
		return c.cfg.MetadataRefreshBackoff
	}
	if wait := time.Until(c.lastStart.Add(c.cfg.MetadataRefreshBackoff)); wait > 0 {
		return wait
	}
	c.startRefreshLocked()
	return c.cfg.MetadataRefreshBackoff
}

// deadNodes returns the ids of the nodes the cache reports down.
func (m *metaCache) deadNodes() map[int32]bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	dead := map[int32]bool{}
	for id, n := range m.nodes {
		if !n.Alive {
			dead[id] = true
		}
	}
	return dead
}

// redialRevived lets the client dial at once the nodes that were down
// (wasDead) and that the cache now reports alive: a node back from a
// restart is seen alive by its peers, and its partitions' producers would
// otherwise wait out the reconnect backoff that its refused dials grew
// (up to ReconnectBackoffMax) before their first write to it.
func (c *Client) redialRevived(wasDead map[int32]bool) {
	if len(wasDead) == 0 {
		return
	}
	var addrs []string
	c.meta.mu.RLock()
	for id := range wasDead {
		if n, ok := c.meta.nodes[id]; ok && n.Alive {
			addrs = append(addrs, n.ClientAddr)
		}
	}
	c.meta.mu.RUnlock()
	for _, addr := range addrs {
		c.mu.Lock()
		b := c.brokers[addr]
		c.mu.Unlock()
		if b != nil {
			b.dialNow()
		}
	}
}

// dialNow lets the next use dial at once, whatever the backoff of failed
// dials said; failures keep counting, so a node that still refuses is
// backed off from where it was.
func (b *broker) dialNow() {
	b.mu.Lock()
	b.nextDial = time.Time{}
	b.mu.Unlock()
}

// dialBackoffError is a producer's attempt that was not made because its
// primary's node refused the last dial and the reconnect backoff has not
// passed. The producer waits it out in waitRoute instead of inside the
// dial, so that the wait ends when the metadata shows the node back
// (redialRevived) rather than at the backoff's end. It matches
// ErrUnreachable.
type dialBackoffError struct {
	addr  string
	until time.Time
	wait  time.Duration // the backoff left when the attempt was refused
	last  error
}

func (e *dialBackoffError) Error() string {
	// The wait is the one left when the attempt was refused: printed
	// later (in a delivery timeout's report), time.Until would be
	// negative.
	return fmt.Sprintf("%s refused the last dial; the next dial was %v away: %v", e.addr, e.wait.Round(time.Millisecond), e.last)
}

func (e *dialBackoffError) Unwrap() error { return e.last }

// dialBackoff returns the dialBackoffError for addr while its reconnect
// backoff runs, else nil.
func (c *Client) dialBackoff(addr string) error {
	b := c.broker(addr)
	b.mu.Lock()
	defer b.mu.Unlock()
	live := b.cn != nil && !b.cn.isClosed()
	if live || b.dialing != nil || b.dialErr == nil || !time.Now().Before(b.nextDial) {
		return nil
	}
	return &dialBackoffError{addr: addr, until: b.nextDial, wait: time.Until(b.nextDial), last: b.dialErr}
}
