package client

import (
	"context"
	"sync"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// Shard-aware connections. A node runs one shard (a thread with its own
// epoll loop) per core, and each partition belongs to one shard. A request
// read by a shard that does not own its partition is handed to the owner
// and its answer handed back: two hand-offs between threads per request
// (4-6 us at the median on an idle 2-core machine, far more in its tail
// under load: docs/design/threading.md). A node that serves Home
// moves a connection to the shard that owns the partition it names, so
// the SDK keeps, per node, one connection for each shard it uses and sends
// each partition's produce and fetch requests on its shard's connection.
// The node says which shard owns a partition (the Home answer): the
// client does not compute it, so the node may map partitions as it likes.
//
// Everything else (metadata, admin, offsets) stays on the node's general
// connection (broker.cn), and so does every request to a node without
// Home, or when Config.SingleConnPerNode is set.

// homeRetryAfter is how long a node whose Home attempt failed (a dial,
// an unknown partition, an error answer) is served on its general
// connection before the next attempt.
const homeRetryAfter = time.Second

// homeKey names a partition for the shard map.
type homeKey struct {
	topic     string
	partition int32
}

// homeSet is one node's shard-aware connections.
type homeSet struct {
	mu sync.Mutex
	// conns by shard. Guarded by mu. At most one per shard of the node.
	conns map[uint16]*conn
	// shardOf is the shard each partition's Home named. Guarded by mu.
	shardOf map[homeKey]uint16
	// retryAt is when Home may be tried again after a failure. Guarded
	// by mu.
	retryAt time.Time
	// dialing holds a channel per shard whose connection is being
	// dialled, closed when the dial ends. Guarded by mu.
	dialing map[uint16]chan struct{}
	// closed is set by close: nothing is added after. Guarded by mu.
	closed bool
}

// claim returns the channel of shard s's dial in progress (mine false),
// or starts one (mine true: the caller dials, then calls unclaim).
func (h *homeSet) claim(s uint16) (wait chan struct{}, mine bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.dialing[s]; ok {
		return ch, false
	}
	if h.dialing == nil {
		h.dialing = map[uint16]chan struct{}{}
	}
	ch := make(chan struct{})
	h.dialing[s] = ch
	return ch, true
}

// unclaim ends shard s's dial: its waiters look again.
func (h *homeSet) unclaim(s uint16, ch chan struct{}) {
	h.mu.Lock()
	delete(h.dialing, s)
	h.mu.Unlock()
	close(ch)
}

// lookup returns the live connection of key's shard, if there is one.
func (h *homeSet) lookup(key homeKey) (*conn, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.shardOf[key]; ok {
		if cn := h.conns[s]; cn != nil && !cn.isClosed() {
			return cn, true
		}
	}
	return nil, false
}

// add records that key's partition lives on shard s, served by cn, and
// returns the connection to use: cn, or the live one that shard already
// had (cn is then closed). It returns nil after close (cn closed).
func (h *homeSet) add(key homeKey, s uint16, cn *conn) *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		cn.close(ErrClosed)
		return nil
	}
	if h.shardOf == nil {
		h.shardOf, h.conns = map[homeKey]uint16{}, map[uint16]*conn{}
	}
	h.shardOf[key] = s
	if old := h.conns[s]; old != nil && !old.isClosed() {
		cn.close(ErrClosed)
		return old
	}
	h.conns[s] = cn
	return cn
}

// on records that key's partition lives on shard s and returns that
// shard's live connection, if there is one.
func (h *homeSet) on(key homeKey, s uint16) (*conn, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	if h.shardOf == nil {
		h.shardOf, h.conns = map[homeKey]uint16{}, map[uint16]*conn{}
	}
	h.shardOf[key] = s
	cn := h.conns[s]
	return cn, cn != nil && !cn.isClosed()
}

// failed serves the node on its general connection for homeRetryAfter.
func (h *homeSet) failed() {
	h.mu.Lock()
	h.retryAt = time.Now().Add(homeRetryAfter)
	h.mu.Unlock()
}

// waiting reports whether Home is not to be tried now.
func (h *homeSet) waiting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed || time.Now().Before(h.retryAt)
}

// close closes every shard connection; none is added after.
func (h *homeSet) close(cause error) {
	h.mu.Lock()
	conns := h.conns
	h.conns, h.shardOf, h.closed = nil, nil, true
	h.mu.Unlock()
	for _, cn := range conns {
		cn.close(cause)
	}
}

// connForPartition returns the connection for a data request to ref's
// partition at addr: the shard-aware one when the node serves Home, else
// (and whenever making one fails) the node's general connection.
func (c *Client) connForPartition(ctx context.Context, addr string, ref *wire.PartitionRef) (*conn, error) {
	gen, err := c.connTo(ctx, addr)
	if err != nil || c.cfg.SingleConnPerNode {
		return gen, err
	}
	if _, err := gen.version(wire.APIHome); err != nil {
		return gen, nil // a node that predates Home
	}
	b := c.broker(addr)
	key := homeKey{ref.Topic, ref.Partition}
	if cn, ok := b.homes.lookup(key); ok {
		return cn, nil
	}
	if b.homes.waiting() {
		return gen, nil
	}
	// Ask on the general connection which shard owns the partition (Home
	// with Stay moves nothing), and use that shard's connection when there
	// is one: dials stay bounded by the node's shards, not its partitions.
	var where wire.HomeResponse
	if err := gen.roundTrip(ctx, &wire.HomeRequest{PartitionRef: *ref, Stay: true}, &where, false); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.homes.failed()
		return gen, nil
	}
	if cn, ok := b.homes.on(key, where.Shard); ok {
		return cn, nil
	}
	// One dial per shard at a time: the senders of a shard's other
	// partitions wait for it.
	wait, mine := b.homes.claim(where.Shard)
	if !mine {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if cn, ok := b.homes.on(key, where.Shard); ok {
			return cn, nil
		}
		return gen, nil
	}
	defer b.homes.unclaim(where.Shard, wait)
	h, err := c.dialHome(ctx, addr, ref)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.homes.failed()
		return gen, nil
	}
	cn := b.homes.add(key, h.shard, h.conn)
	if cn == nil {
		return nil, ErrClosed
	}
	return cn, nil
}

// homed is a new connection and the shard its Home answer named.
type homed struct {
	*conn
	shard uint16
}

// dialHome dials addr and sends Home for ref's partition on the new
// connection, before anything else is sent on it.
func (c *Client) dialHome(ctx context.Context, addr string, ref *wire.PartitionRef) (homed, error) {
	// The caller's wait and the client's life both end the dial.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	cn, err := dialConn(ctx, &c.cfg, addr)
	if err != nil {
		return homed{}, err
	}
	var resp wire.HomeResponse
	req := wire.HomeRequest{PartitionRef: *ref}
	if err := cn.roundTrip(ctx, &req, &resp, false); err != nil {
		cn.close(err)
		return homed{}, err
	}
	return homed{cn, resp.Shard}, nil
}
