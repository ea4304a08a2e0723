package node

import (
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/shard/partition"
)

// storageFullEvery bounds the node's warnings of a full disk: one every
// so often, with the count of those left out, however many partitions
// meet it (every write of every partition does while the disk is full).
const storageFullEvery = 10 * time.Second

// storageLog is the node's record of its disk warnings: one a kind
// every storageFullEvery at most.
type storageLog struct {
	full, failed rateLimited
}

// rateLimited is one kind's last warning and the count left out since.
type rateLimited struct {
	lastMs     atomic.Int64
	suppressed atomic.Int64
}

// allow reports whether a warning may be logged at nowMs, and the count
// left out since the last one; otherwise it counts this one out.
func (l *rateLimited) allow(nowMs int64) (bool, int64) {
	last := l.lastMs.Load()
	if nowMs-last < storageFullEvery.Milliseconds() || !l.lastMs.CompareAndSwap(last, nowMs) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}

// storageFull is the replicas' OnStorageFull: a warning that names the
// partition, the data directory and the cause, at most one per
// storageFullEvery. Called on the replica's shard.
func (n *Node) storageFull(r *partition.Replica, cause error) {
	ok, more := n.disk.full.allow(n.clock.Now().UnixMilli())
	if !ok {
		return
	}
	c := r.Config()
	n.log.Warn("no space left on the data directory's disk: writes are refused until space is freed",
		"topic", c.Topic, "partition", c.Partition, "data_dir", n.dir, "cause", cause,
		"more_since_last_warning", more)
}

// storageFailed is the replicas' OnStorageFailed: an error that names
// the partition, the data directory and the cause (a failed write or
// flush: the disk is failing), at most one per storageFullEvery. Called
// on the replica's shard.
func (n *Node) storageFailed(r *partition.Replica, cause error) {
	ok, more := n.disk.failed.allow(n.clock.Now().UnixMilli())
	if !ok {
		return
	}
	c := r.Config()
	n.log.Error("the data directory's disk failed a write or a flush: the replica stopped acknowledging and restarts from what is on disk; "+
		"its partitions are led elsewhere meanwhile; check the disk",
		"topic", c.Topic, "partition", c.Partition, "data_dir", n.dir, "cause", cause,
		"more_since_last_error", more)
}
