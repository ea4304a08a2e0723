package client

import (
	"context"
	"fmt"
)

// A node that is paused (SIGSTOP, a frozen VM, a stuck disk) or cut off
// keeps its connections open and answers nothing; the requests on them
// would wait for the whole RequestTimeout while the cluster has already
// elected new primaries for its partitions. A connection's watchdog calls
// checkSilent when it has received nothing for Config.SilentNodeCheck
// with requests outstanding; it asks the other nodes (a metadata refresh:
// a silent node's own answer is hedged past) and fails the connection
// only when one of the partitions routed to its node has a primary
// elsewhere at a newer generation. A node that is merely slow keeps its
// connection.

// silentRefreshChecks bounds a check's metadata refresh, in checks.
const silentRefreshChecks = 4

// checkSilent is Config.onSilent: it fails cn when a partition routed to
// its node, or one of the requests waiting on it is for, has a newer
// primary elsewhere.
func (c *Client) checkSilent(cn *conn) {
	// The partitions routed to the node now, and those of the requests
	// waiting on it at the generation they were sent at (a refresh caused
	// by another request may already route them elsewhere).
	led := c.meta.ledBy(cn.nodeID)
	for k, gen := range cn.pendingParts() {
		if g, ok := led[k]; !ok || gen < g {
			led[k] = gen
		}
	}
	if len(led) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, silentRefreshChecks*c.cfg.SilentNodeCheck)
	defer cancel()
	if err := c.refreshMetadata(ctx); err != nil {
		return
	}
	if m, ok := c.meta.movedFrom(cn.nodeID, led); ok {
		cn.close(fmt.Errorf("%w: node %d answered nothing for %v with requests outstanding, and %s/%d has primary %d at generation %d (was %d)",
			ErrNodeSilent, cn.nodeID, c.cfg.SilentNodeCheck, m.topic, m.partition, m.primary, m.gen, led[m.partKey]))
	}
}

// moved is a partition that moved to another primary.
type moved struct {
	partKey
	primary, gen int32
}

// ledBy returns the generation of every partition the cache routes to
// node.
func (m *metaCache) ledBy(node int32) map[partKey]int32 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[partKey]int32{}
	for name, t := range m.topics {
		for i := range t.parts {
			if p := &t.parts[i]; p.primary == node {
				out[partKey{name, int32(i)}] = p.gen
			}
		}
	}
	return out
}

// movedFrom returns a partition of led (ledBy(node), earlier) that the
// cache now routes to another node at a newer generation.
func (m *metaCache) movedFrom(node int32, led map[partKey]int32) (moved, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for k, gen := range led {
		t := m.topics[k.topic]
		if t == nil || int(k.partition) >= len(t.parts) {
			continue
		}
		if p := &t.parts[k.partition]; p.primary != node && p.primary > 0 && p.gen > gen {
			return moved{k, p.primary, p.gen}, true
		}
	}
	return moved{}, false
}
