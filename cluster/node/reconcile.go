package node

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// reconciler is the part that brings every shard's replicas in line with
// the published View: it opens the partitions this node should host,
// closes and deletes those whose topic is gone, retries the ones that
// failed to open with back-off (openfail.go), and removes deleted
// partitions' directories in the background. It reads the View and the
// shards' hosts through reconcileDeps and holds no pointer to the Node.
type reconciler struct {
	d reconcileDeps
	// errs records the partitions that failed to open; the front ends read
	// it too (the node's openErrs).
	errs *openFailures
	// queued[i] says a pass is queued on shard i; retryAt[i] is when shard
	// i's timer for the next retry of failed opens fires (zero: none
	// armed), owned by shard i.
	queued  []atomic.Bool
	retryAt []time.Time
	// removeQueue holds deleted partitions' directories (renamed to
	// .deleted) for the one background remover, running while removing.
	// removeMu guards both.
	removeMu    sync.Mutex
	removeQueue []string
	removing    bool
}

// reconcileDeps is what reconciliation needs from the rest of the node.
type reconcileDeps struct {
	self  raftlite.NodeID
	group *shard.Group
	// host is shard i's replica host (nil before it started).
	host func(i int) *partition.Host
	// view is the latest published View.
	view    func() *View
	clock   clock.Clock
	fs      vfs.FS
	dir     string
	log     *slog.Logger
	stopped func() bool
	// open opens the replica of partition p of t on host h and wires it
	// to the transport and routes; closed forgets a dropped one there.
	open   func(h *partition.Host, t *metadata.Topic, p int32, reps []metadata.NodeID) error
	closed func(key [20]byte)
	// configure brings an open replica's settings in line with its
	// topic's config (a change applied at run time); nil: none.
	configure func(r *partition.Replica, t *metadata.Topic)
	// movedOff forgets a replica closed because a move took it off this
	// node: the partition lives on elsewhere, so its route stays.
	movedOff func(key [20]byte)
}

func newReconciler(d reconcileDeps, errs *openFailures, shards int) *reconciler {
	return &reconciler{d: d, errs: errs, queued: make([]atomic.Bool, shards), retryAt: make([]time.Time, shards)}
}

// requestReconcile asks shard i to reconcile (reconciler.request).
func (n *Node) requestReconcile(i int) {
	if n.rec != nil {
		n.rec.request(i)
	}
}

// request asks shard i to bring its replicas in line with the
// latest View. Reconciling reads the latest View when it runs, so
// requests coalesce: at most one pass is queued per shard. (Every
// metadata change publishes a View, thousands while a big topic's
// partitions elect their primaries; each used to queue a pass on every
// shard.) A full inbox is retried shortly from shard metaShard.
func (rc *reconciler) request(i int) {
	if rc.d.stopped() || rc.queued[i].Swap(true) {
		return
	}
	sh := rc.d.group.Shard(i)
	if err := sh.Post(func() { rc.reconcile(sh) }); err != nil {
		rc.queued[i].Store(false)
		if err != shard.ErrStopped {
			rc.d.group.Shard(metaShard).AfterFunc(10*time.Millisecond, func() { rc.request(i) })
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
func (rc *reconciler) reconcile(sh *shard.Shard) {
	// A View published from here on queues the next pass.
	rc.queued[sh.ID()].Store(false)
	h := rc.d.host(sh.ID())
	if h == nil {
		return
	}
	v := rc.d.view()
	want := map[[20]byte]bool{shardKey(metaTopicID, 0): true}
	budget := reconcileBatch
	now := rc.d.clock.Now()
	for _, t := range v.Sorted {
		for p, reps := range t.Replicas {
			key := shardKey(t.ID, int32(p))
			// A move's target node hosts the replica from the move's start
			// (it joins as a learner); an old node until it completes.
			mv := v.Moving[key]
			if !hosts(reps, rc.d.self) && (mv == nil || !hosts(mv.Target, rc.d.self)) ||
				shard.ShardForPartition(t.ID, uint32(p), rc.d.group.Len()) != sh.ID() {
				continue
			}
			want[key] = true
			if r := h.Get(key); r != nil {
				if rc.d.configure != nil {
					rc.d.configure(r, t)
				}
				continue
			}
			// A partition that failed to open waits for its back-off
			// (openfail.go), without taking a place in the batch.
			if budget == 0 || !rc.errs.due(key, now) {
				continue
			}
			budget--
			if err := rc.d.open(h, t, int32(p), reps); err != nil {
				rc.openFailed(sh, key, t.Name, int32(p), err, now)
			} else if failures := rc.errs.succeeded(key); failures > 0 {
				rc.d.log.Info("partition opened after failing to", "topic", t.Name, "partition", p, "failed_attempts", failures)
			}
		}
	}
	rc.logSuppressedOpenErrors(now)
	if next := rc.errs.prune(sh.ID(), want); !next.IsZero() {
		rc.armOpenRetry(sh, next)
	}
	var gone []*partition.Replica
	h.Each(func(r *partition.Replica) {
		if !want[r.Key()] && len(gone) < reconcileBatch {
			gone = append(gone, r)
		}
	})
	if budget == 0 || len(gone) == reconcileBatch {
		rc.request(sh.ID())
	}
	for _, r := range gone {
		cfg := r.Config()
		key := r.Key()
		// Its directory goes next: nothing of it needs to be durable.
		why := service.Errorf(service.ErrUnknownTopicOrPartition, "topic %s (id %x) was deleted", cfg.Topic, cfg.TopicID)
		t := v.ByID[cfg.TopicID]
		if t != nil {
			why = service.Errorf(service.ErrNotReplica, "%s/%d moved off node %d (replicas now %v)", cfg.Topic, cfg.Partition, rc.d.self, t.Replicas[cfg.Partition])
		}
		err := h.DropReplica(key, why)
		if t != nil && rc.d.movedOff != nil {
			rc.d.movedOff(key)
		} else {
			rc.d.closed(key)
		}
		if err != nil {
			rc.d.log.Warn("closing a deleted partition", "topic", cfg.Topic, "partition", cfg.Partition, "err", err)
		}
		rc.removeDir(cfg.Dir)
		rc.d.log.Info("partition deleted", "topic", cfg.Topic, "partition", cfg.Partition)
	}
}

// armOpenRetry makes sure a reconcile pass runs on sh at next, when the
// first partition that failed to open is due again. One timer per shard:
// an armed timer that fires no later is kept. Runs on sh.
func (rc *reconciler) armOpenRetry(sh *shard.Shard, next time.Time) {
	i := sh.ID()
	if at := rc.retryAt[i]; !at.IsZero() && !at.After(next) {
		return
	}
	rc.retryAt[i] = next
	sh.AfterFunc(max(clock.Until(rc.d.clock, next), time.Millisecond), func() {
		if rc.retryAt[i].Equal(next) {
			rc.retryAt[i] = time.Time{}
		}
		rc.request(i)
	})
}

// sweepDeleted removes partition directories that a deletion renamed but
// a crash kept from removing.
func (rc *reconciler) sweepDeleted() {
	dir := filepath.Join(rc.d.dir, "partitions")
	names, err := rc.d.fs.List(dir)
	if err != nil {
		return
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".deleted") {
			p := filepath.Join(dir, name)
			if err := removeTree(rc.d.fs, p); err != nil {
				rc.d.log.Warn("removing a deleted partition directory", "dir", p, "err", err)
			} else {
				rc.d.log.Info("removed a deleted partition directory left by a crash", "dir", p)
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
func (rc *reconciler) removeDir(dir string) {
	tmp := dir + ".deleted"
	if err := rc.d.fs.Rename(dir, tmp); err != nil {
		rc.d.log.Warn("removing a partition directory", "dir", dir, "err", err)
		return
	}
	rc.removeMu.Lock()
	defer rc.removeMu.Unlock()
	rc.removeQueue = append(rc.removeQueue, tmp)
	if !rc.removing {
		rc.removing = true
		go rc.removeQueued()
	}
}

// removeQueued removes the queued directories one at a time and exits
// when none is left.
func (rc *reconciler) removeQueued() {
	for {
		rc.removeMu.Lock()
		if len(rc.removeQueue) == 0 {
			rc.removing = false
			rc.removeMu.Unlock()
			return
		}
		dir := rc.removeQueue[0]
		rc.removeQueue = rc.removeQueue[1:]
		rc.removeMu.Unlock()
		if err := removeTree(rc.d.fs, dir); err != nil {
			rc.d.log.Warn("removing a partition directory", "dir", dir, "err", err)
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
	cfg.RetentionBytes, cfg.RetentionMs = topicRetention(cfg, t)
	cfg.SegmentBytes, cfg.SegmentMs = topicSegmentRoll(cfg, t)
	// The produce bound is the topic's (maxMessageBytes); the log takes
	// any batch the format allows, so that a topic's max.message.bytes
	// may rise above storage.max_batch_bytes without reopening, and a
	// follower whose metadata lags its primary's still appends.
	cfg.BatchBytesMax = batch.BatchBytesMax
	ids := make([]raftlite.NodeID, len(reps))
	for i, r := range reps {
		ids[i] = raftlite.NodeID(r)
	}
	// A replica on a node that is not (yet) in the list joins as a
	// learner of a move (cluster/controller/reassign.go): the list is the
	// voters it starts from, until its log holds the configuration.
	var learners []raftlite.NodeID
	if !hosts(reps, n.self) {
		learners = []raftlite.NodeID{n.self}
	}
	sendSeg, answerSeg := n.segmentFns()
	r, err := h.Open(partition.Config{
		FS: n.fs, Dir: n.partitionDir(t.ID, p), Log: cfg,
		// Clients' partitions get dense offsets; the groups' internal
		// partitions are read by the node in raft offsets.
		DenseOffsets: !metadata.IsInternalTopic(t.Name),
		Topic:        t.Name, TopicID: t.ID, Partition: p, MaxMessageBytes: n.maxMessageBytes(t),
		Self: n.self, Replicas: ids, Learners: learners, Limits: n.limits,
		Send: n.sendFn(), OnRoute: n.routeChanged, Alive: n.aliveFn(), OnStorageFull: n.storageFull, OnStorageFailed: n.storageFailed,
		Throttle: n.throttle, SendSegment: sendSeg, AnswerSegment: answerSeg,
	})
	if err == nil {
		r.SetCleaner(n.cleanerConfig(t))
		r.SetRecordsStart(t.LogStart(p))
		n.opened(r, h.Shard().ID())
	}
	return err
}

// topicRetention is t's retention bounds (bytes, ms): its overrides, else
// the node's (cfg's); none (-1, -1) under cleanup.policy=compact.
func topicRetention(cfg segment.Config, t *metadata.Topic) (bytes, ms int64) {
	bytes, ms = cfg.RetentionBytes, cfg.RetentionMs
	if t.Config.RetentionMs != 0 {
		ms = t.Config.RetentionMs
	}
	if t.Config.RetentionBytes != 0 {
		bytes = t.Config.RetentionBytes
	}
	if !t.Config.Deletes() {
		return -1, -1 // cleanup.policy=compact: the cleaner bounds the log, not retention
	}
	return bytes, ms
}

// topicSegmentRoll is when t's active segments roll (bytes, ms): its
// segment.bytes and segment.ms, else the node's (cfg's).
func topicSegmentRoll(cfg segment.Config, t *metadata.Topic) (bytes, ms int64) {
	bytes, ms = cfg.SegmentBytes, cfg.SegmentMs
	if t.Config.SegmentBytes != 0 {
		bytes = t.Config.SegmentBytes
	}
	if t.Config.SegmentMs != 0 {
		ms = t.Config.SegmentMs
	}
	// A compacted topic's records become cleanable within
	// max.compaction.lag.ms only if their segment is sealed by then.
	if lag := t.Config.MaxCompactionLagMs; t.Config.Compacted() && lag > 0 && (ms <= 0 || lag < ms) {
		ms = lag
	}
	return bytes, ms
}

// maxMessageBytes is the largest batch a producer may write to t: its
// max.message.bytes, else the node's storage.max_batch_bytes. Either is
// at most batch.BatchBytesMax (16 MiB, the record format's bound and the
// hard cap of the topic config), and a request carrying it must still fit
// network.max_frame_bytes (default 16 MiB + 64 KiB).
func (n *Node) maxMessageBytes(t *metadata.Topic) int {
	if t.Config.MaxMessageBytes > 0 {
		return int(t.Config.MaxMessageBytes)
	}
	return n.cfg.Storage.MaxBatchBytes
}

// configureReplica gives an open replica its topic's retention, segment
// roll, cleaner settings and max.message.bytes, which an alter_config command may have changed since
// it opened, and the log start a delete_records command set. Runs on the replica's shard.
func (n *Node) configureReplica(r *partition.Replica, t *metadata.Topic) {
	if m := n.maxMessageBytes(t); r.Config().MaxMessageBytes != m {
		r.SetMaxMessageBytes(m)
	}
	bytes, ms := topicRetention(n.segmentConfig(), t)
	if l := r.Config().Log; l.RetentionBytes != bytes || l.RetentionMs != ms {
		r.SetRetention(bytes, ms)
	}
	bytes, ms = topicSegmentRoll(n.segmentConfig(), t)
	if l := r.Config().Log; l.SegmentBytes != bytes || l.SegmentMs != ms {
		if err := r.SetSegmentRoll(bytes, ms); err != nil {
			// metadata.TopicConfig.Check keeps a topic's values in range.
			n.log.Error("topic segment roll not applied", "topic", t.Name, "err", err)
		}
	}
	r.SetCleaner(n.cleanerConfig(t))
	r.SetRecordsStart(t.LogStart(r.Config().Partition))
}

func hosts(reps []metadata.NodeID, self raftlite.NodeID) bool {
	for _, r := range reps {
		if raftlite.NodeID(r) == self {
			return true
		}
	}
	return false
}
