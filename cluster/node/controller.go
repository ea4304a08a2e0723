package node

import (
	"errors"
	"fmt"
	"github.com/corestream/corestream/cluster/routes"
	"log/slog"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// metaTopicID names the metadata group's log; no client topic can have it
// (topic ids are random version-4 UUIDs, whose version nibble is 4).
var metaTopicID = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

const (
	// metaShard hosts the metadata group and the controller.
	metaShard = 0
	// resultsMax bounds the apply results kept for proposers.
	resultsMax = 4096
	// adminTimeoutDefault bounds an admin request that gives no timeout.
	adminTimeoutDefault = 30 * time.Second
)

// applied is the outcome of one metadata command, kept for its proposer.
type applied struct {
	res metadata.Result
	err error
}

// controller runs the metadata group on shard metaShard: it proposes
// commands, reads committed ones from the metadata log into its pure core
// (metaCore: typed commands in, applied state and Views out) and hands
// each new View to the rest of the node through ctrlDeps.publish. All of
// its fields are owned by shard metaShard.
type controller struct {
	*metaCore
	d  ctrlDeps
	sh *shard.Shard
	r  *partition.Replica
	// n is for the admin front end (api_admin.go) only, until it calls
	// the service; the controller's own code reaches the node through d.
	bal *balancer
	// reas drives replica moves (reassign.go).
	reas *reassigner
	// snapshot is the latest metadata snapshot (encodeSnapshot) and
	// snapshotAt the offset it covers (-1: none); a leader sends it to a
	// follower that needs entries the log no longer holds.
	snapshot   []byte
	snapshotAt int64
	// installed counts snapshots received from a leader.
	installed int
	// parked holds proposers whose command committed before this node
	// had applied it, in offset order; onCommit answers them.
	parked []parkedProposal
	// bootstrap is the administrator of security.admin_user, created
	// when this node leads a metadata group that has no user yet (nil:
	// auth is none); bootstrapping says its command is in flight.
	bootstrap     *metadata.User
	bootstrapping bool
	// rd drives roster changes (roster.go).
	rd rosterDriver
	// minting says the cluster id's command is in flight (identity.go).
	minting bool
}

// ctrlDeps is what the controller needs from the rest of the node.
type ctrlDeps struct {
	log   *slog.Logger
	clock clock.Clock
	// topicID draws a new topic's id; nil: the metadata's own (a random
	// UUID). The whole-node simulator draws them from its seed.
	topicID func() metadata.TopicID
	// fs and dir hold the snapshot file.
	fs  vfs.FS
	dir string
	// publish hands a new View to its readers and asks every shard to
	// reconcile with it.
	publish func(*View)
	// loaded is the readiness latch (ready.go), set here once.
	loaded *atomic.Bool
	// metaErr turns a metadata replica's error into the one clients see.
	metaErr func(error) error
	// What the admin calls (api_admin.go) read: this node, the roster
	// and who is up, the readiness latch's answer (ready.go), the
	// published View, the routes, the partitions that failed to open
	// here, and cluster.default_replication_factor.
	self       raftlite.NodeID
	roster     func() []config.RosterNode
	alive      func(id int32) bool
	ready      func() error
	view       func() *View
	route      func(key [20]byte) (routes.Route, bool)
	openFailed func(key [20]byte) (openFailure, bool)
	defaultRF  config.ReplicationFactor
	// recordedCluster is the cluster id the data directory records
	// (identity.go), proposed as the cluster's when the metadata has none.
	recordedCluster func() metadata.ClusterID
}

// metaCore is the controller's pure core: committed metadata log
// entries in (RecordBatch bytes, one command per record), the applied
// state, the proposers' results and the readiness rule out. It reads no
// log, clock, shard or file, so the simulator applies the metadata
// through the very same code.
type metaCore struct {
	state   *metadata.State
	applied int64
	// appliedTerm is the term of the entry at applied (0: none applied
	// since the start); resetAt and resetTerm are the end of a snapshot
	// the primary sent and its term (0: none). They decide when the
	// metadata is loaded (ready.go).
	appliedTerm int32
	resetAt     int64
	resetTerm   int32
	// results holds apply outcomes by log offset for proposers;
	// resultOrder evicts the oldest past resultsMax.
	results     map[int64]applied
	resultOrder []int64
	iter        batch.Records
	log         *slog.Logger
	// changed, when set, is told of each command applied (the node logs
	// metadata changes with it; the simulator leaves it nil).
	changed func(cmd metadata.Command, res metadata.Result, offset int64, generation int32)
}

func newMetaCore(log *slog.Logger) *metaCore {
	return &metaCore{state: metadata.New(), applied: -1, results: map[int64]applied{}, log: log}
}

// applyData applies data, whole batches read from the metadata log in
// order, the last ending at offset last; entries at or below applied are
// skipped. It reports whether the state changed. A batch it cannot
// decode stops it with an error, applied left at the last good batch.
func (m *metaCore) applyData(data []byte, last int64) (changed bool, err error) {
	for len(data) > 0 {
		h, err := batch.ReadHeader(data)
		if err != nil || h.Size() > len(data) {
			if err == nil {
				err = fmt.Errorf("a batch of %d bytes where %d remain", h.Size(), len(data))
			}
			return changed, fmt.Errorf("node: bad batch in the metadata log at offset %d: %w", m.applied+1, err)
		}
		b := data[:h.Size()]
		data = data[h.Size():]
		m.appliedTerm = h.PartitionLeaderEpoch
		if h.IsControl() || h.LastOffset() <= m.applied {
			continue
		}
		changed = m.applyBatch(b) || changed
	}
	m.applied = max(m.applied, last)
	return changed, nil
}

// applyBatch applies the commands of one batch (one record each).
func (m *metaCore) applyBatch(b []byte) bool {
	if err := m.iter.Reset(b); err != nil {
		m.log.Error("metadata: corrupt batch", "err", err)
		return false
	}
	changed := false
	for m.iter.Next() {
		rec := m.iter.Record()
		cmd, err := metadata.DecodeCommand(rec.Value)
		var res metadata.Result
		if err == nil {
			res, err = m.state.Apply(cmd)
			changed = changed || err == nil
			if err == nil && m.changed != nil {
				m.changed(cmd, res, rec.Offset, m.appliedTerm)
			}
		}
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) && !errors.Is(err, metadata.ErrUnknownTopic) {
			m.log.Warn("metadata: command refused", "offset", rec.Offset, "op", cmd.Op, "err", err)
		}
		m.keep(rec.Offset, applied{res, err})
	}
	return changed
}

func (m *metaCore) keep(off int64, a applied) {
	m.results[off] = a
	m.resultOrder = append(m.resultOrder, off)
	for len(m.resultOrder) > resultsMax {
		delete(m.results, m.resultOrder[0])
		m.resultOrder = m.resultOrder[1:]
	}
}

// answer gives the proposer of the command at off, applied, its result.
func (m *metaCore) answer(off int64, done func(metadata.Result, error)) {
	a, ok := m.results[off]
	if !ok {
		done(metadata.Result{}, service.Errorf(service.ErrInternal, "metadata command at offset %d committed but its result is gone", off))
		return
	}
	delete(m.results, off)
	done(a.res, a.err)
}

// view is the applied state as a View.
func (m *metaCore) view() *View { return routes.NewView(m.state, m.applied) }

// encodeCommand is cmd as the metadata log holds it: a batch of one
// record stamped atMs.
func encodeCommand(cmd metadata.Command, atMs int64) ([]byte, error) {
	b, err := batch.NewBuilder(batch.Options{})
	if err == nil {
		err = b.AppendKV(atMs, nil, cmd.Encode())
	}
	if err != nil {
		return nil, err
	}
	return b.Build()
}

// parkedProposal is a proposer waiting for its committed command to be
// applied here.
type parkedProposal struct {
	offset int64
	done   func(metadata.Result, error)
}

// startController opens the metadata group and waits until the local
// metadata is replayed (a single node: elected and caught up).
func (n *Node) startController() error {
	admin, err := bootstrapUser(n.cfg.Security)
	if err != nil {
		return fmt.Errorf("node: security.admin_password: %w", err)
	}
	done := make(chan error, 1)
	sh := n.group.Shard(metaShard)
	err = sh.Do(func(sh *shard.Shard) {
		core := newMetaCore(n.log)
		core.changed = n.logMetadataChange
		c := &controller{metaCore: core, sh: sh, snapshotAt: -1, d: ctrlDeps{
			log: n.log, clock: n.clock, topicID: n.topicID, fs: n.fs, dir: n.dir, loaded: &n.metaLoaded, metaErr: n.metaErr,
			self: n.self, roster: n.roster.active, alive: n.alive, ready: n.metadataReady, view: n.view.Load,
			route: n.routes.Get, openFailed: n.openErrs.get, defaultRF: n.cfg.Cluster.DefaultReplicationFactor,
			recordedCluster: n.clusterRecorded,
			publish: func(v *View) {
				n.learnRoster(v)
				n.view.Store(v)
				n.learnCluster(v.ClusterID)
				n.setThrottle(v)
				for i := range n.hosts {
					n.requestReconcile(i)
				}
			},
		}}
		c.bootstrap = admin
		hasSnap, err := c.loadSnapshot()
		if err == nil {
			err = n.checkSnapshotCluster(c.state.ClusterID())
		}
		if err != nil {
			done <- err
			return
		}
		var reps []raftlite.NodeID
		for _, m := range n.cfg.Roster() {
			reps = append(reps, raftlite.NodeID(m.ID))
		}
		reps, learners := metaMembers(reps, n.self, n.cfg.Cluster.Join)
		sort.Slice(reps, func(i, j int) bool { return reps[i] < reps[j] })
		cfg := n.segmentConfig()
		// Compaction, not retention, shortens the metadata log: a
		// retention pass (ApplyRetention up to a snapshot's offset)
		// deletes every whole segment the snapshot covers.
		cfg.RetentionBytes, cfg.RetentionMs = 1, -1 // 0 would mean the default
		cfg.SegmentBytes = min(cfg.SegmentBytes, 8<<20)
		r, err := n.hosts[metaShard].Open(partition.Config{
			FS: n.fs, Dir: filepath.Join(n.dir, metadata.MetaTopic), Log: cfg,
			Topic: metadata.MetaTopic, TopicID: metaTopicID, Partition: 0,
			Self: n.self, Replicas: reps, Learners: learners, Limits: n.limits,
			Send: n.sendFn(), OnCommit: c.onCommit, OnRoute: n.routeChanged, Alive: n.aliveFn(),
			OnReset: c.onReset,
			// The snapshot holds what the log applied: a fenced
			// replica's snapshot may hold what its group lost.
			FenceAlsoRemove: []string{filepath.Join(n.dir, metaSnapshotFile)},
		})
		if errors.Is(err, partition.ErrFenced) {
			// docs/operations.md, "What each fsync policy survives".
			done <- fmt.Errorf("node: this node's metadata replica is fenced and the node cannot start; "+
				"remove (or move away) %s and %s, then start the node again: its metadata replica starts empty and copies "+
				"the cluster's metadata from its peers (the other nodes keep serving meanwhile): %w",
				filepath.Join(n.dir, metadata.MetaTopic), filepath.Join(n.dir, metaSnapshotFile), err)
			return
		}
		if err != nil {
			done <- fmt.Errorf("node: metadata log: %w", err)
			return
		}
		if start := r.Log().LogStartOffset(); start > c.applied+1 {
			r.Close(nil)
			done <- fmt.Errorf("node: the metadata log starts at %d but the snapshot (present: %v) covers only up to %d: metadata is missing", start, hasSnap, c.applied)
			return
		}
		if hasSnap {
			l := r.Log()
			c.restored(func(off int64) (int32, error) {
				if off == l.LogStartOffset()-1 {
					return l.EpochBeforeStart(), nil
				}
				return l.TermAt(off)
			})
			c.publish()
		}
		n.opened(r, metaShard)
		c.r = r
		n.ctrl = c
		n.startBalancer(c)
		n.startReassigner(c)
		n.startRosterDriver(c)
		done <- nil
	})
	if err != nil {
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	// A single node elects itself and replays at once; wait for it so the
	// node starts with its topics open. In a cluster the metadata arrives
	// when a quorum forms; until then the node answers metadata reads with
	// METADATA_NOT_READY (ready.go) and the rest with retriable errors.
	if len(n.cfg.Roster()) == 1 {
		deadline := n.clock.Now().Add(30 * time.Second)
		for n.clock.Now().Before(deadline) {
			if n.metaLoaded.Load() {
				return nil
			}
			time.Sleep(2 * time.Millisecond)
		}
		return errors.New("node: the metadata log did not replay within 30 s")
	}
	return nil
}

// metaRoute is the metadata primary and generation (-1 when unknown).
func (n *Node) metaRoute() (int32, int32) {
	rt, ok := n.routes.Get(shardKey(metaTopicID, 0))
	if !ok {
		return -1, -1
	}
	return rt.Leader, rt.Term
}

func (c *controller) stop() {}

// onCommit applies every committed command up to commit.
//
// A follower may learn a commit before its own copy of the entries is
// written (its append is still in the kernel): it applies what is
// readable now, and the rest when the write completes (the replica calls
// OnCommit again on log progress).
func (c *controller) onCommit(r *partition.Replica, commit int64) {
	changed := false
	commit = min(commit, r.Log().WrittenOffset())
	for c.applied < commit {
		spans, err := r.Log().Read(c.applied+1, 16<<20, commit)
		if err != nil || len(spans) == 0 {
			c.d.log.Error("metadata: reading committed entries", "from", c.applied+1, "commit", commit, "written", r.Log().WrittenOffset(), "leo", r.Log().LogEndOffset(), "err", err)
			segment.ReleaseSpans(spans)
			return
		}
		var data []byte
		for _, sp := range spans {
			if data, err = sp.AppendTo(data); err != nil {
				break
			}
		}
		last := spans[len(spans)-1].LastOffset
		segment.ReleaseSpans(spans)
		if err != nil {
			c.d.log.Error("metadata: reading committed entries", "err", err)
			return
		}
		ch, err := c.applyData(data, last)
		changed = changed || ch
		if err != nil {
			c.d.log.Error("metadata: applying committed entries", "err", err)
			return
		}
	}
	if changed {
		c.publish()
	}
	c.maybeSnapshot()
	c.checkLoaded()
	c.maybeBootstrap()
	c.driveRoster()
	c.maybeMintCluster()
	for len(c.parked) > 0 && c.parked[0].offset <= c.applied {
		p := c.parked[0]
		c.parked = c.parked[1:]
		c.answer(p.offset, p.done)
	}
}

// publish hands a new View to the node.
func (c *controller) publish() { c.d.publish(c.view()) }

// propose appends cmd to the metadata log and calls done on shard
// metaShard with the outcome once it is applied (or failed), at the
// latest when timeout passes. done may propose again: the replica's
// produce waiters leave their queue before their reply runs.
func (c *controller) propose(cmd metadata.Command, timeout time.Duration, done func(metadata.Result, error)) {
	data, err := encodeCommand(cmd, c.d.clock.Now().UnixMilli())
	if err != nil {
		done(metadata.Result{}, service.Errorf(service.ErrInvalidRequest, "metadata command: %v", err))
		return
	}
	req := &partition.ProduceArgs{Generation: partition.GenerationUnknown, Timeout: timeout, Records: data}
	c.r.Produce(req, func(pr partition.ProduceResult) {
		if pr.Err != nil {
			done(metadata.Result{}, c.d.metaErr(pr.Err))
			return
		}
		if off := pr.Produced.BaseOffset; off > c.applied {
			// The followers made it durable, and so committed it, before
			// this node's own write of it completed; onCommit applies it
			// (and answers) when the write does.
			c.parked = append(c.parked, parkedProposal{off, done})
			return
		}
		c.answer(pr.Produced.BaseOffset, done)
	})
}

// answer gives the proposer of the command at off, applied, its result.
func (c *controller) answer(off int64, done func(metadata.Result, error)) {
	a, ok := c.results[off]
	if !ok {
		done(metadata.Result{}, service.Errorf(service.ErrInternal, "metadata command at offset %d committed but its result is gone", off))
		return
	}
	delete(c.results, off)
	done(a.res, a.err)
}

// metaErr turns a metadata replica's ErrNotPrimary into
// ErrNotMetadataPrimary with the metadata primary's address; the
// replica's other errors keep their kind (the service adds addresses to
// their hints).
func (n *Node) metaErr(err error) error {
	var pe *partition.Error
	if errors.As(err, &pe) && pe.Kind == partition.ErrNotPrimary {
		e := service.Errorf(service.ErrNotMetadataPrimary, "node %d is not the metadata primary", n.self)
		if pe.Leader > 0 {
			e.Hint = &service.Hint{NodeID: pe.Leader, ClientAddr: n.addrOf(pe.Leader), Generation: pe.Generation}
		}
		return e
	}
	return err
}

// requireMetaPrimary returns NOT_METADATA_PRIMARY unless this node leads
// the metadata group.
func (c *controller) requireMetaPrimary() error {
	if c.r.IsPrimary() {
		return nil
	}
	return c.d.metaErr(c.r.CheckRoute(partition.GenerationUnknown))
}

func shardKey(id [16]byte, p int32) [20]byte { return routes.Key(id, p) }

// View is the applied metadata every shard reads (routes.View), named
// here for the node's files that predate the routes package.
type View = routes.View
