package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// Follower reads (Kafka's KIP-392): a consumer with a Rack sends it with
// every fetch. The primary may answer with a preferred read replica, an
// in-sync replica in that rack, instead of records; the fetcher then
// fetches from that node until it fails, and goes back to the primary at
// once on any error there (the follower left the in-sync set, lost its
// primary, is behind the consumer's position, or is unreachable). A
// follower's OFFSET_OUT_OF_RANGE never resets the position: the primary
// decides that.

// followerRetryAfter is how long a partition keeps fetching from its
// primary after its read replica failed, before it follows a preferred
// read replica again: a replica the primary still names but that cannot
// serve (its report of the in-sync set is late) would otherwise bounce
// every fetch between the two.
const followerRetryAfter = time.Second

// readReplicaOf is the node a fetcher reads from instead of the primary
// (0: the primary). Guarded by cs.mu.
func (f *fetcher) readReplicaOf() int32 {
	f.cs.mu.Lock()
	defer f.cs.mu.Unlock()
	return f.readReplica
}

func (f *fetcher) setReadReplica(id int32) {
	f.cs.mu.Lock()
	f.readReplica = id
	f.cs.mu.Unlock()
}

// rack is the rack to send with a fetch: the consumer's, except within
// followerRetryAfter of a read replica's failure, when the primary is
// asked for records rather than for a replica.
func (f *fetcher) rack() string {
	if time.Since(f.replicaFailedAt) < followerRetryAfter {
		return ""
	}
	return f.cs.cfg.Rack
}

// replicaFailed takes what a failed read replica said of the primary: a
// NOT_PRIMARY or STALE_GENERATION hint (the replica may have become the
// primary itself, or heard of a newer one) updates the cached route, so
// that the fetch falls back to the primary as it is now, not to the one
// cached (paused or cut off, perhaps, which is why the group moved on).
func (f *fetcher) replicaFailed(err error) {
	var er *wire.ErrorResponse
	if errors.As(err, &er) && (errors.Is(er, wire.ErrNotPrimary) || errors.Is(er, wire.ErrStaleGeneration)) {
		if f.cs.c.meta.applyHint(f.topic, f.partition, er.Hint) {
			f.cs.c.kickRefresh()
		}
	}
}

// fetchFromReplica sends req to node id, the partition's read replica,
// with the route the metadata has now (the generation and topic id the
// follower checks).
func (f *fetcher) fetchFromReplica(id int32, req *wire.FetchRequest, resp *wire.FetchResponse) error {
	c := f.cs.c
	rt, err := c.routeOf(f.ctx, f.topic, f.partition)
	if err != nil {
		return err
	}
	if !f.topicID.IsZero() && rt.ref.TopicID != f.topicID {
		return fmt.Errorf("%w: %s now has id %s, not %s", ErrTopicRecreated, f.topic, rt.ref.TopicID, f.topicID)
	}
	c.meta.mu.RLock()
	n, ok := c.meta.nodes[id]
	c.meta.mu.RUnlock()
	if !ok || n.ClientAddr == "" {
		return fmt.Errorf("client: read replica %d of %s/%d is not in the metadata", id, f.topic, f.partition)
	}
	cn, err := c.connTo(f.ctx, n.ClientAddr)
	if err != nil {
		return err
	}
	req.PartitionRef = rt.ref
	return cn.roundTrip(f.ctx, req, resp, true)
}

// ReadReplica returns the node topic/partition is being read from when
// that is a follower of the consumer's rack, 0 while it is read from its
// primary.
func (cs *Consumer) ReadReplica(topic string, partition int32) (int32, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	f := cs.fetchers[partKey{topic, partition}]
	if f == nil {
		return 0, ErrNotAssigned
	}
	return f.readReplica, nil
}
