// Package node assembles a corestream node: the shards and their replica
// hosts, the client listener, the metadata controller and the request
// handlers. It owns no partition state itself: partitions live on their
// shards (shard/partition) and are reached only through those shards.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/corestream/corestream/cluster/routes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/config"
	ctl "github.com/corestream/corestream/cluster/controller"
	"github.com/corestream/corestream/cluster/httpapi"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/native"
	"github.com/corestream/corestream/cluster/node/groupshost"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/node/txnshost"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
	"golang.org/x/sys/unix"
)

// Version is the server version; every node of a cluster must run the same.
const Version = "0.1.0"

// Node is one running corestream node.
type Node struct {
	cfg    config.Config
	log    *slog.Logger
	fs     vfs.FS
	dir    string
	group  *shard.Group
	hosts  []*partition.Host
	server *netio.Server
	ctrl   *controller
	// replicas hands the transport's and the balancer's requests to the
	// shards' replicas and applies the failover rule (replicas.go).
	replicas *replicaHost
	view     atomic.Pointer[View]
	routes   routes.Table
	pids     *producerIDs
	limits   *raftlite.Limits
	self     raftlite.NodeID
	// roster is the roster this node acts on (roster.go): cluster.nodes
	// until the metadata records one, then the committed roster.
	roster *rosterBook
	// boundAddr is the client listener's bound address, advertised for
	// this node when node.client_addr asks for port 0 (the roster then
	// holds an address no client can dial). Set once Listen returns.
	boundAddr atomic.Pointer[string]
	lockFd    int
	// engineNote says which write engine the shards use and why.
	engineNote string
	stopped    atomic.Bool
	// cluster is the cluster id the data directory records (identity.go;
	// nil or zero: not learned yet); clusterWarned says a mismatch was
	// logged (owned by shard metaShard).
	cluster       atomic.Pointer[metadata.ClusterID]
	clusterWarned bool
	// throttle bounds the catch-up bytes this node's primaries send to
	// learners (cluster/controller/reassign_throttle.go); shared by every shard.
	throttle *partition.Throttle
	// svc is the typed service every front end calls (nodesvc, wired
	// in svc.go); built once the shards run.
	svc *nodesvc.Service
	// http is the HTTP API (nil when node.http_addr is empty).
	http *httpapi.API
	// kafka is the Kafka protocol's server (nil when node.kafka_addr is
	// empty); kafkaBound its bound address when it asked for port 0.
	kafka      *netio.Server
	kafkaBound atomic.Pointer[string]
	// groups coordinates consumer groups (groupshost) for every front
	// end; started with the service.
	groups *groupshost.Host
	// txns are the transaction coordinators (txns.go).
	txns *txnshost.Host
	// markers are the transaction markers this node's coordinators
	// asked other nodes to write (txns.go); touched on metaShard only.
	markers markerCalls
	// groupsScans find, per __groups replica, the newest complete
	// checkpoint below which its retention deletes.
	groupsScans groupshost.Scans
	// peers is the replication transport (nil on a single node).
	peers Transport
	// ends pairs the questions for partition ends this node asked its
	// peers with their answers (ends.go).
	ends endsWaits
	// metaLoaded latches once the View holds everything committed this
	// node could know of (ready.go); metadata reads wait for it.
	metaLoaded atomic.Bool
	// openSum sums up opened partitions for the log (logsummary.go).
	openSum openSummary
	// rebalancing says a primary move planned by the balancer is running.
	rebalancing atomic.Bool
	// migrations counts client connections moved to the shard their
	// requests go to.
	migrations atomic.Uint64
	// crossShard counts native data requests served by a shard other
	// than their connection's; kafkaMigrations and kafkaCrossShard count
	// the same for the Kafka listener's connections.
	crossShard                       atomic.Uint64
	kafkaMigrations, kafkaCrossShard atomic.Uint64
	balanceStats                     ctl.BalanceStats
	// cleaner counts the log cleaner's work on every shard (compaction.go).
	cleaner cleanerStats
	// rec is the reconciliation part (reconcile.go), built at Start;
	// openErrs records the partitions that failed to open (openfail.go),
	// kept by rec and read by the front ends.
	rec      *reconciler
	openErrs openFailures
	// clock is the node's time seam (clock.Real unless a test or the
	// simulator gives another before Start); every part reads time
	// through it.
	clock clock.Clock
	// topicID draws new topics' ids (nil: random UUIDs); the whole-node
	// simulator sets it before Start so that a seed replays.
	topicID func() metadata.TopicID
	// lags holds, per partition this node leads, when each follower last
	// caught up (insync.go); router writes it and the routes.
	lags   routes.LagTable
	router *routes.Router
	// stopRec is the clean-stop record of the previous graceful stop,
	// read at Start; every partition's log takes its entry when it opens.
	stopRec *segment.StopRecord
	// logins limits failed logins per address on every listener
	// (security.go).
	logins *security.Limiter
	// certs and clientTLS are the HTTP API's TLS (nil: plain HTTP).
	certs     *security.CertStore
	clientTLS *tls.Config
	// disk rate-limits the warnings of a full or failing disk
	// (storagefull.go).
	disk storageLog
	// tls is the client, Kafka and replication listeners' TLS and its
	// counters (tlsbridge.go).
	tls *nodeTLS
}

// New validates cfg and prepares a node; Start runs it.
func New(cfg config.Config, logger *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	n := &Node{cfg: cfg, log: logger, fs: vfs.OS(), dir: cfg.Node.DataDir,
		self: raftlite.NodeID(cfg.Node.ID), roster: newRosterBook(cfg.Roster()), lockFd: -1}
	n.setClock(clock.Real())
	n.logins = newLoginLimiter(cfg.Security)
	if err := n.loadTLS(); err != nil {
		return nil, err
	}
	lim := raftlite.DefaultLimits()
	lim.ElectionTicks = int32(cfg.Cluster.ElectionTimeoutMs / cfg.Cluster.HeartbeatIntervalMs)
	lim.HeartbeatTicks = 1
	// A topic's max.message.bytes may exceed storage.max_batch_bytes
	// (maxMessageBytes); produce checks the bound, consensus only the
	// format's.
	lim.EntryBytesMax = batch.BatchBytesMax
	// Idle groups stop heartbeating once every follower is caught up;
	// the per-peer pings (cluster/transport) wake them when a member's node dies.
	lim.Quiesce = len(cfg.Roster()) > 1
	n.limits = lim
	n.throttle = partition.NewThrottle(func() time.Time { return n.clock.Now() }) // setClock may replace the clock
	n.throttle.SetRate(cfg.Cluster.ReassignThrottleBytesPerSecond)
	n.view.Store(&View{Applied: -1, Topics: nil})
	return n, nil
}

// setClock makes c the node's clock. REQUIRES: before Start.
func (n *Node) setClock(c clock.Clock) {
	n.clock = c
}

// Start opens the data directory, starts the shards, recovers the
// metadata and every local partition, and listens for clients.
func (n *Node) Start() error {
	// Every port and the data directory are checked before anything is
	// written or opened (preflight.go).
	ls, err := n.preflight()
	if err != nil {
		return err
	}
	started := false
	defer func() {
		if !started {
			ls.closeUnserved()
		}
	}()
	if err := n.fs.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("node: data directory: %w", err)
	}
	if err := n.lockDir(); err != nil {
		return err
	}
	err = n.startParts(partSeams{
		startShards: func(c shard.Config) (*shard.Group, error) {
			g, err := shard.NewGroup(c)
			if err != nil {
				return nil, err
			}
			return g, g.Start()
		},
		engine: diskEngine,
		transport: func() error {
			if err := n.startPeers(ls.replication); err != nil {
				return fmt.Errorf("node: node.replication_addr %s: %w", n.cfg.Node.ReplicationAddr, err)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	g := n.group
	srv, err := netio.NewServer(g, netio.Config{
		MaxFrameBytes: n.cfg.Network.MaxFrameBytes, MaxInflightPerConn: n.cfg.Network.MaxInflightPerConn,
		MaxConnections: n.cfg.Network.MaxConnections, OutboundBytesMax: int64(n.cfg.Network.OutboundBytesMax),
		RetransmitBackoffMax: time.Duration(n.cfg.Network.TCPRetransmitMaxMs) * time.Millisecond,
		Logf:                 func(format string, args ...any) { n.log.Info(fmt.Sprintf(format, args...)) },
	}, n.guardPlain(native.New(native.Config{Service: n.svc, Log: n.log, MaxFrameBytes: n.cfg.Network.MaxFrameBytes, Group: g,
		OwnerShard: n.ownerShard, Migrations: &n.migrations, CrossShard: &n.crossShard, Auth: n.nativeAuth()}), config.ListenerClient))
	if err != nil {
		n.stopShards()
		return err
	}
	if err := n.serveListener(srv, ls.client, config.ListenerClient); err != nil {
		n.stopShards()
		return fmt.Errorf("node: node.client_addr %s: %w", n.cfg.Node.ClientAddr, err)
	}
	n.server = srv
	if _, port, err := net.SplitHostPort(n.cfg.Node.ClientAddr); err == nil && port == "0" {
		bound := srv.Addr().String()
		n.boundAddr.Store(&bound)
	}
	n.log.Info("listening", "client_addr", srv.Addr().String(), "node", n.self, "data_dir", n.dir, "auth", n.cfg.Security.Auth)
	n.warnUnauthenticated(map[string]string{"node.client_addr": n.cfg.Node.ClientAddr, "node.http_addr": n.cfg.Node.HTTPAddr, "node.kafka_addr": n.cfg.Node.KafkaAddr})
	if ls.kafka != nil {
		if err := n.startKafka(ls.kafka); err != nil {
			n.server.Shutdown(context.Background())
			n.stopShards()
			return fmt.Errorf("node: node.kafka_addr %s: %w", n.cfg.Node.KafkaAddr, err)
		}
	}
	if ls.http != nil {
		n.startHTTP(ls.http)
		ls.http = nil
	}
	started = true
	return nil
}

// ClientAddr is the address the client listener bound.
func (n *Node) ClientAddr() string {
	if n.server == nil {
		return ""
	}
	return n.server.Addr().String()
}

// Stop stops accepting, answers what is in flight, closes every partition
// cleanly (their logs write a clean-shutdown record) and stops the shards.
func (n *Node) Stop(ctx context.Context) error {
	if n.stopped.Swap(true) {
		return nil
	}
	start, partitions := n.clock.Now(), n.partitionsHosted()
	var first error
	defer func() { n.logStopped(partitions, clock.Since(n.clock, start), first) }()
	// A parked long poll is a request in flight: answer them now (and
	// later ones at once, in the service's Fetch) rather than hold the
	// stop until the connections are cut.
	n.answerFetches()
	// The coordinators resign first, as a Kafka broker's do at a
	// controlled shutdown: the group and transaction calls they hold (a
	// JoinGroup parked for a rebalance waits up to its rebalance timeout)
	// are answered NOT_COORDINATOR, and later ones too, so that draining
	// the front ends does not wait them out and their clients go to the
	// next coordinator.
	n.groups.Stop()
	n.txns.Stop()
	if n.http != nil {
		if err := n.http.Stop(ctx); err != nil {
			first = err
		}
	}
	if n.server != nil {
		if err := n.server.Shutdown(ctx); err != nil {
			first = err
		}
	}
	if n.kafka != nil {
		if err := n.kafka.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	if n.peers != nil {
		if err := n.peers.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	if err := n.stopShards(); err != nil && first == nil {
		first = err
	}
	if n.lockFd >= 0 {
		unix.Close(n.lockFd)
		n.lockFd = -1
	}
	return first
}

// answerFetches answers every parked long poll with what is there now.
func (n *Node) answerFetches() {
	if n.group == nil {
		return
	}
	for i := 0; i < n.group.Len(); i++ {
		_ = n.group.Shard(i).Do(func(*shard.Shard) {
			if h := n.hosts[i]; h != nil {
				h.AnswerFetches()
			}
		})
	}
}

func (n *Node) stopShards() error {
	n.groups.Stop() // idempotent; here too for the failed starts
	n.txns.Stop()
	if n.group == nil {
		return nil
	}
	var first error
	// Every partition's log is closed into one record, made durable with
	// one file-system sync rather than several syncs per partition.
	rec := segment.NewStopRecord(n.dir)
	for i := 0; i < n.group.Len(); i++ {
		sh := n.group.Shard(i)
		if err := sh.Do(func(*shard.Shard) {
			if i == 0 && n.ctrl != nil {
				n.ctrl.stop()
			}
			if h := n.hosts[i]; h != nil {
				if err := h.Stop(rec); err != nil && first == nil {
					first = err
				}
			}
		}); err != nil && first == nil {
			first = err
		}
	}
	if err := n.group.Stop(); err != nil && first == nil {
		first = err
	}
	n.group = nil
	if rec.Len() > 0 {
		if err := rec.Commit(n.fs); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// lockDir takes an exclusive lock on the data directory, so two nodes can
// never share one by mistake.
func (n *Node) lockDir() error {
	fd, err := unix.Open(filepath.Join(n.dir, ".lock"), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("node: lock file: %w", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("node: node.data_dir %s is in use by another process", n.dir)
		}
		return fmt.Errorf("node: locking %s: %w", n.dir, err)
	}
	n.lockFd = fd
	return nil
}

// sendFn is the replicas' transport: nil on a single node.
func (n *Node) sendFn() func(*partition.Replica, []raftlite.Message) {
	if n.peers == nil {
		return nil
	}
	return n.peers.Send
}

// aliveFn is the replicas' liveness oracle: nil on a single node.
func (n *Node) aliveFn() func(raftlite.NodeID) bool {
	if n.peers == nil {
		return nil
	}
	return func(id raftlite.NodeID) bool { return n.alive(int32(id)) }
}

// opened registers a replica's consensus group for incoming messages and
// logs what opening its log found: after a graceful stop every log says
// clean=true (no recovery scan); after a crash it says what was scanned
// and dropped (docs/operations.md).
func (n *Node) opened(r *partition.Replica, shardID int) {
	if n.peers != nil {
		n.peers.Opened(partition.GroupID(r.Key()), shardID)
	}
	cfg := r.Config()
	n.logPartitionOpened(cfg.Topic, cfg.Partition, shardID, r.Log().Recovery())
}

// closed forgets a replica's consensus group.
func (n *Node) closed(key [20]byte) {
	if n.peers != nil {
		n.peers.Closed(partition.GroupID(key))
	}
	n.router.Drop(key)
}

// routeChanged records a replica's primary and generation, and announces
// it to the peers when this node is the primary (the router).
func (n *Node) routeChanged(r *partition.Replica) { n.router.Changed(r) }

// retentionLoop deletes, on shard sh, old segments of its replicas.
func (n *Node) retentionLoop(sh *shard.Shard, every time.Duration) {
	if n.stopped.Load() {
		return
	}
	if h := n.hosts[sh.ID()]; h != nil {
		h.Each(func(r *partition.Replica) {
			if r.Key() == shardKey(metaTopicID, 0) {
				return // compacted after snapshots (snapshot.go), not by retention
			}
			var res segment.RetentionResult
			var err error
			if r.Config().Topic == metadata.GroupsTopic {
				res, err = n.groupsScans.Retention(r) // below its newest checkpoint (groupshost/checkpoint.go)
			} else {
				res, err = r.ApplyRetention()
			}
			switch {
			case err != nil && !errors.Is(err, partition.ErrClosed):
				n.log.Warn("retention", "topic", r.Config().Topic, "partition", r.Config().Partition, "err", err)
			case res.Segments > 0:
				n.log.Info("retention deleted segments", "topic", r.Config().Topic, "partition", r.Config().Partition,
					"segments", res.Segments, "bytes", res.Bytes, "log_start", res.LogStartOffset)
			}
		})
	}
	sh.AfterFunc(every, func() { n.retentionLoop(sh, every) })
}

// shardOf returns the shard that owns partition p of topic id.
func (n *Node) shardOf(id [16]byte, p int32) int {
	return shard.ShardForPartition(id, uint32(p), len(n.hosts))
}

// addrOf returns node id's advertised client address ("" when unknown).
func (n *Node) addrOf(id int32) string {
	for _, r := range n.roster.nodes() {
		if int32(r.ID) == id {
			return n.advertised(r)
		}
	}
	return ""
}

// advertised is roster node r's client address as clients must see it:
// this node's bound address when it listens on a port picked at start-up.
func (n *Node) advertised(r config.RosterNode) string {
	if raftlite.NodeID(r.ID) == n.self {
		if a := n.boundAddr.Load(); a != nil {
			return *a
		}
	}
	return r.ClientAddr
}

// partitionDir is where partition p of topic id keeps its files.
func (n *Node) partitionDir(id [16]byte, p int32) string {
	return filepath.Join(n.dir, "partitions", fmt.Sprintf("%x-%d", id, p))
}

// segmentConfig is the log configuration of every partition.
func (n *Node) segmentConfig() segment.Config {
	s := n.cfg.Storage
	pol, _ := segment.ParseFsyncPolicy(s.Fsync)
	return segment.Config{SegmentBytes: s.SegmentBytes, SegmentMs: s.SegmentMs, IndexIntervalBytes: int64(s.IndexIntervalBytes),
		Fsync: pol, FsyncIntervalMs: int64(s.FsyncIntervalMs), FsyncMessages: int64(s.FsyncMessages),
		BatchBytesMax: s.MaxBatchBytes, RetentionBytes: s.RetentionBytes, RetentionMs: s.RetentionMs,
		WritebackBytes: s.WritebackBytes, Stopped: n.stopRec}
}

// diskEngine is the engine for a shard's files on fsys: io_uring when the
// kernel allows it and fsys hands out descriptors, else pwrite; why says
// why not io_uring (for the operator's log), nil when it was chosen.
func diskEngine(fsys vfs.FS) (e segment.Engine, why error) {
	u, err := uring.ForFS(fsys)
	if err != nil {
		return segment.NewPwriteEngine(), err
	}
	return u, nil
}
