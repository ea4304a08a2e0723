package node

import (
	"errors"
	"fmt"
	ctl "github.com/corestream/corestream/cluster/controller"
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
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// metaTopicID names the metadata group's log (routes.MetaTopicID).
var metaTopicID = routes.MetaTopicID

const (
	// metaShard hosts the metadata group and the controller
	// (routes.MetaShard).
	metaShard = routes.MetaShard
	// adminTimeoutDefault bounds an admin request that gives no timeout
	// (the drivers' ProposeTimeout).
	adminTimeoutDefault = ctl.ProposeTimeout
)

// controller runs the metadata group on shard metaShard: it proposes
// commands, reads committed ones from the metadata log into its pure core
// (ctl.Core: typed commands in, applied state and Views out) and hands
// each new View to the rest of the node through ctrlDeps.publish. All of
// its fields are owned by shard metaShard.
type controller struct {
	*ctl.Core
	d  ctrlDeps
	sh *shard.Shard
	r  *partition.Replica
	// bal drives primary moves (cluster/controller).
	bal *ctl.Balancer
	// adm answers the service's topic and offset calls
	// (cluster/controller).
	adm *ctl.Admin
	// reas drives replica moves (cluster/controller).
	reas *ctl.Reassigner
	// snapshot is the latest metadata snapshot (ctl.EncodeSnapshot) and
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
	// rd drives roster changes (cluster/controller; nil until the
	// metadata group is open).
	rd *ctl.RosterDriver
	// minting says the cluster id's command is in flight (identity.go).
	minting bool
	// creatingGroups says the groups topic's create that a peer asked
	// for is in flight (metaPort.GroupsTopicWanted).
	creatingGroups bool
	// remote holds this node's proposals waiting for the metadata
	// primary's answer, by id (propose_remote.go); remoteNext is the
	// last id given. Invariant: at most remoteProposalsMax entries.
	remote     map[uint64]*remoteProposal
	remoteNext uint64
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
	// What the controller's own calls and the groups topic's creation
	// read: the roster and who is up, the readiness latch's answer
	// (ready.go), and cluster.default_replication_factor. The topic and
	// offset calls have their own deps (ctl.AdminDeps, drivers.go).
	roster    func() []config.RosterNode
	alive     func(id int32) bool
	ready     func() error
	defaultRF config.ReplicationFactor
	// recordedCluster is the cluster id the data directory records
	// (identity.go), proposed as the cluster's when the metadata has none.
	recordedCluster func() metadata.ClusterID
	// self, metaRoute and peers carry the proposals this node hands to
	// the metadata primary (propose_remote.go): the node's id, the
	// metadata primary it knows, and the peer transport (*peers nil on
	// a node without peers; read on shard metaShard).
	self      int32
	metaRoute func() (int32, int32)
	peers     *Transport
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
		core := ctl.NewCore(n.log)
		core.Changed = n.logMetadataChange
		c := &controller{Core: core, sh: sh, snapshotAt: -1, d: ctrlDeps{
			log: n.log, clock: n.clock, topicID: n.topicID, fs: n.fs, dir: n.dir, loaded: &n.metaLoaded, metaErr: n.metaErr,
			roster: n.roster.active, alive: n.alive, ready: n.metadataReady, defaultRF: n.cfg.Cluster.DefaultReplicationFactor,
			recordedCluster: n.clusterRecorded, self: int32(n.self), metaRoute: n.metaRoute, peers: &n.peers,
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
		c.adm = n.newAdmin(c)
		hasSnap, err := c.loadSnapshot()
		if err == nil {
			err = n.checkSnapshotCluster(c.State().ClusterID())
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
			Send: n.sendFn(), OnCommit: c.onCommit, OnRoute: n.routeChanged, Alive: n.aliveFn(), OnStorageFull: n.storageFull, OnStorageFailed: n.storageFailed,
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
		if start := r.Log().LogStartOffset(); start > c.Applied()+1 {
			r.Close(nil)
			done <- fmt.Errorf("node: the metadata log starts at %d but the snapshot (present: %v) covers only up to %d: metadata is missing", start, hasSnap, c.Applied())
			return
		}
		if hasSnap {
			l := r.Log()
			c.Restored(func(off int64) (int32, error) {
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
	for c.Applied() < commit {
		spans, err := r.Log().Read(c.Applied()+1, 16<<20, commit)
		if err != nil || len(spans) == 0 {
			c.d.log.Error("metadata: reading committed entries", "from", c.Applied()+1, "commit", commit, "written", r.Log().WrittenOffset(), "leo", r.Log().LogEndOffset(), "err", err)
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
		ch, err := c.ApplyData(data, last)
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
	for len(c.parked) > 0 && c.parked[0].offset <= c.Applied() {
		p := c.parked[0]
		c.parked = c.parked[1:]
		c.Answer(p.offset, p.done)
	}
}

// publish hands a new View to the node.
func (c *controller) publish() { c.d.publish(c.View()) }

// propose appends cmd to the metadata log and calls done on shard
// metaShard with the outcome once it is applied (or failed), at the
// latest when timeout passes. done may propose again: the replica's
// produce waiters leave their queue before their reply runs.
func (c *controller) propose(cmd metadata.Command, timeout time.Duration, done func(metadata.Result, error)) {
	data, err := ctl.EncodeCommand(cmd, c.d.clock.Now().UnixMilli())
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
		if off := pr.Produced.BaseOffset; off > c.Applied() {
			// The followers made it durable, and so committed it, before
			// this node's own write of it completed; onCommit applies it
			// (and answers) when the write does.
			c.parked = append(c.parked, parkedProposal{off, done})
			return
		}
		c.Answer(pr.Produced.BaseOffset, done)
	})
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
