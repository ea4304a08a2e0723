// Package node assembles a corestream node: the shards and their replica
// hosts, the client listener, the metadata controller and the request
// handlers. It owns no partition state itself: partitions live on their
// shards (shard/partition) and are reached only through those shards.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
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
	view   atomic.Pointer[View]
	routes routes
	pids   *producerIDs
	limits *raftlite.Limits
	self   raftlite.NodeID
	roster []config.RosterNode
	lockFd int
	// engineNote says which write engine the shards use and why.
	engineNote string
	stopped    atomic.Bool
	// rebalancing says a primary move planned by the balancer is running.
	rebalancing atomic.Bool
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
		self: raftlite.NodeID(cfg.Node.ID), roster: cfg.Roster(), lockFd: -1}
	lim := raftlite.DefaultLimits()
	lim.ElectionTicks = int32(cfg.Cluster.ElectionTimeoutMs / cfg.Cluster.HeartbeatIntervalMs)
	lim.HeartbeatTicks = 1
	lim.EntryBytesMax = int32(cfg.Storage.MaxBatchBytes)
	n.limits = lim
	n.view.Store(&View{Applied: -1, Topics: nil})
	return n, nil
}

// Start opens the data directory, starts the shards, recovers the
// metadata and every local partition, and listens for clients.
func (n *Node) Start() error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("node: data directory: %w", err)
	}
	if err := n.lockDir(); err != nil {
		return err
	}
	pids, err := openProducerIDs(n.fs, n.dir, int32(n.self))
	if err != nil {
		return err
	}
	n.pids = pids
	count := n.cfg.Shards()
	n.hosts = make([]*partition.Host, count)
	tick := time.Duration(n.cfg.Cluster.HeartbeatIntervalMs) * time.Millisecond
	var flushEvery time.Duration
	if n.cfg.Storage.Fsync == "interval" {
		flushEvery = time.Duration(n.cfg.Storage.FsyncIntervalMs) * time.Millisecond
	}
	var hostErr atomic.Pointer[error]
	g, err := shard.NewGroup(shard.Config{
		Count: count, PinCores: n.cfg.Shard.PinCores, InboxDepth: n.cfg.Shard.InboxDepth,
		CallsInFlightMax: 1 << 16,
		OnStart: func(sh *shard.Shard) {
			eng, why := segment.DefaultEngine(n.fs)
			if sh.ID() == 0 {
				n.engineNote = eng.Name()
				if why != nil {
					n.engineNote += " (" + why.Error() + ")"
				}
			}
			h, err := partition.NewHost(sh, eng, tick, flushEvery)
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
	if err := g.Start(); err != nil {
		return err
	}
	n.group = g
	if p := hostErr.Load(); p != nil {
		n.stopShards()
		return *p
	}
	n.log.Info("shards started", "shards", count, "engine", n.engineNote)
	if err := n.startController(); err != nil {
		n.stopShards()
		return err
	}
	srv, err := netio.NewServer(g, netio.Config{
		MaxFrameBytes: n.cfg.Network.MaxFrameBytes, MaxInflightPerConn: n.cfg.Network.MaxInflightPerConn,
		MaxConnections: n.cfg.Network.MaxConnections, OutboundBytesMax: int64(n.cfg.Network.OutboundBytesMax),
		Logf: func(format string, args ...any) { n.log.Info(fmt.Sprintf(format, args...)) },
	}, &handler{n: n})
	if err != nil {
		n.stopShards()
		return err
	}
	if err := srv.Listen(n.cfg.Node.ClientAddr); err != nil {
		n.stopShards()
		return fmt.Errorf("node: node.client_addr %s: %w", n.cfg.Node.ClientAddr, err)
	}
	n.server = srv
	n.log.Info("listening", "client_addr", srv.Addr().String(), "node", n.self, "data_dir", n.dir)
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
	var first error
	if n.server != nil {
		if err := n.server.Shutdown(ctx); err != nil {
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

func (n *Node) stopShards() error {
	if n.group == nil {
		return nil
	}
	var first error
	for i := 0; i < n.group.Len(); i++ {
		sh := n.group.Shard(i)
		if err := sh.Do(func(*shard.Shard) {
			if i == 0 && n.ctrl != nil {
				n.ctrl.stop()
			}
			if h := n.hosts[i]; h != nil {
				if err := h.Close(nil); err != nil && first == nil {
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

// shardOf returns the shard that owns partition p of topic id.
func (n *Node) shardOf(id [16]byte, p int32) int {
	return shard.ShardForPartition(id, uint32(p), len(n.hosts))
}

// addrOf returns node id's advertised client address ("" when unknown).
func (n *Node) addrOf(id int32) string {
	for _, r := range n.roster {
		if int32(r.ID) == id {
			return r.ClientAddr
		}
	}
	return ""
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
		BatchBytesMax: s.MaxBatchBytes, RetentionBytes: s.RetentionBytes, RetentionMs: s.RetentionMs}
}
