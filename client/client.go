package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// Client is a connection to a corestream cluster: one pipelined connection
// per node, a metadata cache, and the routing and retry rules every request
// follows. It is safe for concurrent use; share one per process.
type Client struct {
	cfg Config
	// ctx lives until Close; background work (dials, refreshes) runs under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// brokers by address. Guarded by mu.
	brokers map[string]*broker
	// lastGood is the address whose metadata answer was last applied as
	// trusted (its node saw the metadata quorum). Guarded by mu.
	lastGood string
	// doubtful holds the addresses that failed or answered untrusted
	// metadata in the last refresh; the next refresh asks them last.
	// Guarded by mu; replaced, never modified.
	doubtful map[string]bool

	meta *metaCache

	refreshMu sync.Mutex
	// refreshing is non-nil while a metadata refresh runs and is closed
	// when it ends, after refreshErr is set. Guarded by refreshMu.
	refreshing chan struct{}
	refreshErr error
	// refreshStart is when the running refresh started, lastStart when the
	// last finished one did. Guarded by refreshMu.
	refreshStart, lastStart time.Time
	// kick asks the background refresher for a refresh (capacity 1).
	kick chan struct{}
	// coords remembers the consumer groups' coordinators (group_admin.go).
	coords coordCache
}

// Dial connects to a cluster through the given seed brokers (HOST:PORT)
// with the default configuration, and loads its metadata.
func Dial(ctx context.Context, brokers ...string) (*Client, error) {
	return DialConfig(ctx, Config{Brokers: brokers})
}

// DialConfig connects with cfg: it fills in defaults, reaches a seed,
// handshakes and loads the metadata, all within ctx (waiting while the
// seeds have not loaded the cluster metadata: METADATA_NOT_READY). It
// fails with an error wrapping ErrNoBrokers when no seed answered.
func DialConfig(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("%w: no seed broker given", ErrNoBrokers)
	}
	c := &Client{cfg: cfg.withDefaults(), brokers: map[string]*broker{}, meta: newMetaCache(), kick: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.cfg.SilentNodeCheck > 0 {
		c.cfg.onSilent = c.checkSilent
	}
	if err := c.bootstrap(ctx); err != nil {
		c.Close()
		return nil, err
	}
	c.wg.Add(1)
	go c.refresher()
	return c, nil
}

// bootstrap loads the first metadata. While the seeds answer
// METADATA_NOT_READY (a cluster restarting, no node has loaded the
// committed metadata yet) it asks again after a backoff, until ctx ends,
// and then returns that error; any other failure ends it at once.
func (c *Client) bootstrap(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := c.refreshMetadata(ctx)
		if err == nil || !errors.Is(err, wire.ErrMetadataNotReady) {
			return err
		}
		if sleepCtx(ctx, backoff(c.cfg.RetryBackoffMin, c.cfg.RetryBackoffMax, attempt)) != nil {
			return err
		}
	}
}

// Close closes every connection and stops background work. Requests in
// flight fail with an error wrapping ErrClosed. Producers and consumers
// built on the client should be closed first.
func (c *Client) Close() error {
	c.cancel()
	c.mu.Lock()
	brokers := make([]*broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		brokers = append(brokers, b)
	}
	c.mu.Unlock()
	c.wg.Wait() // no dial can start after cancel: get checks isClosed
	for _, b := range brokers {
		b.close(ErrClosed)
	}
	return nil
}

func (c *Client) isClosed() bool { return c.ctx.Err() != nil }

// broker returns the holder of addr's connection.
func (c *Client) broker(addr string) *broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.brokers[addr]
	if b == nil {
		b = &broker{cl: c, addr: addr}
		c.brokers[addr] = b
	}
	return b
}

// connTo returns a live connection to addr.
func (c *Client) connTo(ctx context.Context, addr string) (*conn, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	return c.broker(addr).get(ctx)
}

// refresher refreshes the metadata every MetadataMaxAge and whenever kicked.
func (c *Client) refresher() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.MetadataMaxAge)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		c.refreshMetadata(c.ctx)
	}
}
