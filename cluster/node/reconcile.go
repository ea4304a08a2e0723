package node

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// requestReconcile asks shard i to bring its replicas in line with the
// latest View. Reconciling reads the latest View when it runs, so
// requests coalesce: at most one pass is queued per shard. (Every
// metadata change publishes a View, thousands while a big topic's
// partitions elect their primaries; each used to queue a pass on every
// shard.) A full inbox is retried shortly from shard metaShard.
func (n *Node) requestReconcile(i int) {
	if n.stopped.Load() || n.reconcileQueued[i].Swap(true) {
		return
	}
	sh := n.group.Shard(i)
	if err := sh.Post(func() { n.reconcile(sh) }); err != nil {
		n.reconcileQueued[i].Store(false)
		if err != shard.ErrStopped {
			n.group.Shard(metaShard).AfterFunc(10*time.Millisecond, func() { n.requestReconcile(i) })
		}
	}
}

// reconcileBatch bounds the replicas one reconcile pass opens or closes.
// Opening one costs a few file creations and syncs (1-4 ms here); a
// topic of thousands of partitions opened in one pass kept its shard from
// its other work for seconds, shard 0's pings among them, and the peers
// declared the node down. The rest waits behind the work queued
// meanwhile. 32 a pass blocked the shard 50-130 ms at a time; 8 keeps a
// produce to another topic under ~120 ms while 10,000 partitions are
// created (p99.9 61-65 ms against 218-240 ms), in the same total time.
const reconcileBatch = 8

// reconcile opens the replicas this shard should host and closes (and
// deletes) those whose topic is gone, reconcileBatch at a time. Runs on
// the shard.
func (n *Node) reconcile(sh *shard.Shard) {
	// A View published from here on queues the next pass.
	n.reconcileQueued[sh.ID()].Store(false)
	h := n.hosts[sh.ID()]
	if h == nil {
		return
	}
	v := n.view.Load()
	want := map[[20]byte]bool{shardKey(metaTopicID, 0): true}
	budget := reconcileBatch
	now := n.clock.Now()
	for _, t := range v.Sorted {
		for p, reps := range t.Replicas {
			if !hosts(reps, n.self) || n.shardOf(t.ID, int32(p)) != sh.ID() {
				continue
			}
			key := shardKey(t.ID, int32(p))
			want[key] = true
			// A partition that failed to open waits for its back-off
			// (openfail.go), without taking a place in the batch.
			if h.Get(key) != nil || budget == 0 || !n.openErrs.due(key, now) {
				continue
			}
			budget--
			if err := n.openReplica(h, t, int32(p), reps); err != nil {
				n.openFailed(sh, key, t.Name, int32(p), err, now)
			} else if failures := n.openErrs.succeeded(key); failures > 0 {
				n.log.Info("partition opened after failing to", "topic", t.Name, "partition", p, "failed_attempts", failures)
			}
		}
	}
	n.logSuppressedOpenErrors(now)
	if next := n.openErrs.prune(sh.ID(), want); !next.IsZero() {
		n.armOpenRetry(sh, next)
	}
	var gone []*partition.Replica
	h.Each(func(r *partition.Replica) {
		if !want[r.Key()] && len(gone) < reconcileBatch {
			gone = append(gone, r)
		}
	})
	if budget == 0 || len(gone) == reconcileBatch {
		n.requestReconcile(sh.ID())
	}
	for _, r := range gone {
		cfg := r.Config()
		key := r.Key()
		// Its directory goes next: nothing of it needs to be durable.
		err := h.DropReplica(key, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %s (id %x) was deleted", cfg.Topic, cfg.TopicID))
		n.closed(key)
		if err != nil {
			n.log.Warn("closing a deleted partition", "topic", cfg.Topic, "partition", cfg.Partition, "err", err)
		}
		n.removeDir(cfg.Dir)
		n.log.Info("partition deleted", "topic", cfg.Topic, "partition", cfg.Partition)
	}
}

// armOpenRetry makes sure a reconcile pass runs on sh at next, when the
// first partition that failed to open is due again. One timer per shard:
// an armed timer that fires no later is kept. Runs on sh.
func (n *Node) armOpenRetry(sh *shard.Shard, next time.Time) {
	i := sh.ID()
	if at := n.openRetryAt[i]; !at.IsZero() && !at.After(next) {
		return
	}
	n.openRetryAt[i] = next
	sh.AfterFunc(max(clock.Until(n.clock, next), time.Millisecond), func() {
		if n.openRetryAt[i].Equal(next) {
			n.openRetryAt[i] = time.Time{}
		}
		n.requestReconcile(i)
	})
}

// sweepDeleted removes partition directories that a deletion renamed but
// a crash kept from removing.
func (n *Node) sweepDeleted() {
	dir := filepath.Join(n.dir, "partitions")
	names, err := n.fs.List(dir)
	if err != nil {
		return
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".deleted") {
			p := filepath.Join(dir, name)
			if err := removeTree(n.fs, p); err != nil {
				n.log.Warn("removing a deleted partition directory", "dir", p, "err", err)
			} else {
				n.log.Info("removed a deleted partition directory left by a crash", "dir", p)
			}
		}
	}
}

// removeDir renames a deleted partition's directory out of the way at once
// (so a recreated topic never sees it, and a crash leaves it for
// sweepDeleted) and queues it for the node's one background remover.
//
// One remover, not a goroutine per directory: deleting a topic of 10,000
// partitions started 10,000 removals whose directory removals held the
// partitions directory's lock in turn (each freeing blocks with a
// synchronous discard on this file system), and the shard's next rename
// waited behind all of them: a produce to another topic of the shard
// stalled for the whole deletion (9.8 s).
func (n *Node) removeDir(dir string) {
	tmp := dir + ".deleted"
	if err := n.fs.Rename(dir, tmp); err != nil {
		n.log.Warn("removing a partition directory", "dir", dir, "err", err)
		return
	}
	n.removeMu.Lock()
	defer n.removeMu.Unlock()
	n.removeQueue = append(n.removeQueue, tmp)
	if !n.removing {
		n.removing = true
		go n.removeQueued()
	}
}

// removeQueued removes the queued directories one at a time and exits
// when none is left.
func (n *Node) removeQueued() {
	for {
		n.removeMu.Lock()
		if len(n.removeQueue) == 0 {
			n.removing = false
			n.removeMu.Unlock()
			return
		}
		dir := n.removeQueue[0]
		n.removeQueue = n.removeQueue[1:]
		n.removeMu.Unlock()
		if err := removeTree(n.fs, dir); err != nil {
			n.log.Warn("removing a partition directory", "dir", dir, "err", err)
		}
	}
}

// removeTreeDepthMax bounds the directory depth removeTree descends (a
// partition directory is one level deep; the bound stops a loop).
const removeTreeDepthMax = 8

// removeTree removes dir and everything under it through fsys, as
// os.RemoveAll does; a missing dir is no error.
func removeTree(fsys vfs.FS, dir string) error {
	return removeTreeDepth(fsys, dir, removeTreeDepthMax)
}

func removeTreeDepth(fsys vfs.FS, dir string, depth int) error {
	fi, err := fsys.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if depth == 0 {
			return fmt.Errorf("node: %s: directories nested deeper than %d", dir, removeTreeDepthMax)
		}
		names, err := fsys.List(dir)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := removeTreeDepth(fsys, filepath.Join(dir, name), depth-1); err != nil {
				return err
			}
		}
	}
	if err := fsys.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (n *Node) openReplica(h *partition.Host, t *metadata.Topic, p int32, reps []metadata.NodeID) error {
	cfg := n.segmentConfig()
	if t.Config.RetentionMs != 0 {
		cfg.RetentionMs = t.Config.RetentionMs
	}
	if t.Config.RetentionBytes != 0 {
		cfg.RetentionBytes = t.Config.RetentionBytes
	}
	ids := make([]raftlite.NodeID, len(reps))
	for i, r := range reps {
		ids[i] = raftlite.NodeID(r)
	}
	r, err := h.Open(partition.Config{
		FS: n.fs, Dir: n.partitionDir(t.ID, p), Log: cfg,
		Topic: t.Name, TopicID: t.ID, Partition: p,
		Self: n.self, Replicas: ids, Limits: n.limits,
		Send: n.sendFn(), OnRoute: n.routeChanged, Alive: n.aliveFn(),
	})
	if err == nil {
		n.opened(r, h.Shard().ID())
	}
	return err
}

func hosts(reps []metadata.NodeID, self raftlite.NodeID) bool {
	for _, r := range reps {
		if raftlite.NodeID(r) == self {
			return true
		}
	}
	return false
}
