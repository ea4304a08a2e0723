package node

import (
	"fmt"
	"github.com/corestream/corestream/cluster/routes"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// partSeams are what the composition root takes from outside the node's
// own code when it builds the parts: how the shards run, which engine
// writes their files, and the peer transport. Start passes the real
// ones (threads pinned to cores, io_uring or pwrite, TCP); the whole-node
// simulator passes a stepped shard group on its clock, the pwrite engine
// over an in-memory FS and a simulated network, and so runs the node's
// composition unchanged (simnode_test.go). The clock and the FS are the
// node's own fields (setClock, fs), set before Start.
type partSeams struct {
	// startShards builds and starts the shard group of c (OnStart runs
	// on each shard as it boots).
	startShards func(c shard.Config) (*shard.Group, error)
	// engine is the engine of a shard's files on fsys; why says why not
	// the preferred one (nil when chosen).
	engine func(fsys vfs.FS) (e segment.Engine, why error)
	// transport builds the peer transport and sets n.peers; called only
	// on a clustered node, once the replica host exists.
	transport func() error
}

// startParts builds and wires the parts on the node's data directory:
// identity, producer ids, the shards and their replica hosts, the replica
// host part, reconciliation, the transport, the router, the metadata
// controller (which starts the balancer driver and the reassigner) and
// the typed service, and arms the shards' periodic work. REQUIRES: the
// data directory exists (and is locked, on a real node).
func (n *Node) startParts(s partSeams) error {
	cid, err := recordIdentity(n.fs, n.dir, int32(n.self))
	if err != nil {
		return err
	}
	if err := n.loadRoster(); err != nil {
		return err
	}
	n.cluster.Store(&cid)
	pids, err := openProducerIDs(n.fs, n.dir, int32(n.self))
	if err != nil {
		return err
	}
	n.pids = pids
	// The logs closed at the last graceful stop open without a scan.
	if n.stopRec, err = segment.LoadStopRecord(n.fs, n.dir); err != nil {
		return err
	}
	count := n.cfg.Shards()
	n.hosts = make([]*partition.Host, count)
	tick := time.Duration(n.cfg.Cluster.HeartbeatIntervalMs) * time.Millisecond
	var flushEvery time.Duration
	if n.cfg.Storage.Fsync == "interval" {
		flushEvery = time.Duration(n.cfg.Storage.FsyncIntervalMs) * time.Millisecond
	}
	// Every shard keeps its replicas' terms and votes in one journal; a
	// replica starts from the newest state any journal holds for it.
	states, err := partition.LoadHardStates(n.fs, n.dir)
	if err != nil {
		return err
	}
	var hostErr atomic.Pointer[error]
	g, err := s.startShards(shard.Config{
		Count: count, PinCores: n.cfg.Shard.PinCores, InboxDepth: n.cfg.Shard.InboxDepth,
		CallsInFlightMax: 1 << 16,
		OnStart: func(sh *shard.Shard) {
			eng, why := s.engine(n.fs)
			if sh.ID() == 0 {
				n.engineNote = eng.Name()
				if why != nil {
					n.engineNote += " (" + why.Error() + ")"
				}
			}
			h, err := partition.NewHost(sh, eng, tick, flushEvery)
			if err == nil {
				err = h.UseJournal(n.fs, n.dir, states)
			}
			if err != nil {
				hostErr.Store(&err)
				return
			}
			n.hosts[sh.ID()] = h
		},
		Logf: func(format string, args ...any) { n.log.Warn(fmt.Sprintf(format, args...)) },
	})
	if err != nil {
		return err
	}
	n.group = g
	if p := hostErr.Load(); p != nil {
		n.stopShards()
		return *p
	}
	n.replicas = &replicaHost{d: replicaDeps{
		self: n.self, log: n.log, group: g, hosts: n.hosts, shardOf: n.shardOf, alive: n.alive,
		heartbeat: tick, reconcile: n.requestReconcile,
		transport: func() Transport { return n.peers }, observed: n.reassignObserved,
		txnMarker: n.peerTxnMarker, txnMarkerAck: n.peerTxnMarkerAck,
		observeMeta: func(r *partition.Replica, m *raftlite.Message) {
			if n.ctrl != nil {
				n.ctrl.observe(r, m)
			}
		},
	}}
	// Reconciliation opens partitions only once the controller publishes
	// a View (below); what a crash left half-deleted goes first.
	n.rec = newReconciler(reconcileDeps{
		self: n.self, group: g, host: func(i int) *partition.Host { return n.hosts[i] }, view: n.view.Load,
		clock: n.clock, fs: n.fs, dir: n.dir, log: n.log, stopped: n.stopped.Load,
		open: n.openReplica, closed: n.closed, movedOff: n.movedOff, configure: n.configureReplica,
	}, &n.openErrs, count)
	n.rec.sweepDeleted()
	n.log.Info("shards started", "shards", count, "engine", n.engineNote)
	if n.clustered() {
		if err := s.transport(); err != nil {
			n.stopShards()
			return err
		}
	}
	n.router = &routes.Router{Self: n.self, Routes: &n.routes, Lags: &n.lags, Clock: n.clock, Live: liveSignal{self: int32(n.self), peers: n.peers},
		Window: time.Duration(n.cfg.Cluster.ReplicaLagTimeMaxMs) * time.Millisecond, Log: n.log, Stopped: &n.stopped}
	if n.peers != nil {
		n.router.Peers = n.peers
	}
	if err := n.startController(); err != nil {
		n.stopShards()
		return err
	}
	n.groups = n.newGroups()
	n.txns = n.newTxns()
	n.svc = newService(n)
	n.groups.Start(n.svc)
	n.txns.Start(n.svc)
	for i := 0; i < g.Len(); i++ {
		sh := g.Shard(i)
		every := time.Duration(n.cfg.Storage.RetentionCheckIntervalMs) * time.Millisecond
		sh.Post(func() { sh.AfterFunc(every, func() { n.retentionLoop(sh, every) }) })
		// The cleaner has a loop of its own: retention looks once a
		// minute, the cleaner's bounded steps need a finer beat.
		clean := time.Duration(n.cfg.Storage.CleanerIntervalMs) * time.Millisecond
		sh.Post(func() { sh.AfterFunc(clean, func() { n.cleanerLoop(sh, clean) }) })
		if n.clustered() {
			sh.Post(func() { n.router.InSyncLoop(sh, func() *partition.Host { return n.hosts[i] }) })
		}
	}
	return nil
}
