package node

import (
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerauth"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/transport"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// Transport is the peer transport as the node holds it: the port of
// cluster/transport (the TCP one, or the simulator's). nil on a single
// node.
type Transport = transport.Transport

// startPeers builds the TCP transport over the replication listener ln
// (bound by preflight) and wires it to the node's parts.
func (n *Node) startPeers(ln *netio.Listener) error {
	p, err := transport.NewTCP(n.peerDeps(), n.cfg.Cluster.Coordinator.ReplicaConnectionsPerPeer,
		peerauth.Secrets{Cluster: []byte(n.cfg.Cluster.Secret), HTTP: []byte(n.cfg.HTTP.JWTSecret)}, n.cfg.Network, ln)
	if err != nil {
		return err
	}
	n.peers = p
	return nil
}

// peerDeps wires a transport to the node's parts: the replica host, the
// route table and the controller as its ports, and the liveness it keeps
// (every transport, the TCP one and the simulator's, takes the same).
func (n *Node) peerDeps() transport.Deps {
	timeout := time.Duration(n.cfg.Cluster.ElectionTimeoutMs) * time.Millisecond
	return transport.Deps{
		Self: int32(n.self), Version: Version, Roster: n.roster.nodes, Log: n.log, Group: n.group, Clock: n.clock,
		Live:      transport.NewLiveness(n.clock, timeout),
		Heartbeat: time.Duration(n.cfg.Cluster.HeartbeatIntervalMs) * time.Millisecond,
		Stopped:   n.stopped.Load,
		Replicas:  n.replicas,
		Routes:    &n.routes,
		Meta:      n.metaPort(),
		Ends:      endsPort{n},
		Liveness:  n.logNodeLiveness,
		TLS:       n.peerTLS(),
	}
}

// metaPort is the controller's port for the transports.
func (n *Node) metaPort() metaPort {
	parts := n.cfg.Cluster.GroupsPartitions
	if parts <= 0 {
		parts = config.GroupsPartitionsDefault // a config made without config.Default
	}
	return metaPort{ctrl: &n.ctrl, cluster: &n.cluster, group: n.group, groupsPartitions: parts}
}

// reassignObserved hands a partition primary's answer to the local
// reassigner (the replica host's, for this node's own primaries). Runs
// on any goroutine.
func (n *Node) reassignObserved(st peerwire.ReassignState) { n.metaPort().ReassignState(st) }

// metaPort is the controller as the transport reaches it
// (transport.Metadata): the controller once the composition root built
// it (it starts after the transport), and the cluster id the data
// directory records.
type metaPort struct {
	ctrl    **controller
	cluster *atomic.Pointer[metadata.ClusterID]
	group   *shard.Group
	// groupsPartitions is cluster.groups_partitions, the partitions of
	// the groups topic this node creates when a peer asks.
	groupsPartitions int
}

// Applied is the controller's applied offset (-1: no controller yet).
// REQUIRES: on shard metaShard.
func (m metaPort) Applied() int64 {
	if c := *m.ctrl; c != nil {
		return c.Applied()
	}
	return -1
}

// Snapshot is the controller's latest snapshot (nil: none). REQUIRES: on
// shard metaShard.
func (m metaPort) Snapshot() []byte {
	if c := *m.ctrl; c != nil {
		return c.snapshot
	}
	return nil
}

// ReassignState hands a partition primary's answer to the local
// reassigner. Runs on any goroutine.
func (m metaPort) ReassignState(st peerwire.ReassignState) {
	m.group.Shard(metaShard).Post(func() {
		if c := *m.ctrl; c != nil && c.reas != nil {
			c.reas.Observe(st)
		}
	})
}

// GroupsTopicWanted creates the consumer groups' internal topic for a
// peer that a group request reached before the topic existed, when this
// node is the metadata primary: only the primary proposes, so every
// other node asks it (groupshost.Deps.AskCreate). A node that is not
// the primary, or not ready, drops the request: the asker's client
// retries and the asker asks again, of the primary it learns by then.
// A request while one create is in flight is dropped too. Runs on any
// goroutine.
func (m metaPort) GroupsTopicWanted(from int32) {
	m.group.Shard(metaShard).Post(func() {
		c := *m.ctrl
		if c == nil || c.creatingGroups || c.admit(true) != nil {
			return
		}
		if c.State().Topic(metadata.GroupsTopic) != nil {
			return
		}
		c.creatingGroups = true
		c.createGroupsTopic(m.groupsPartitions, func(err error) {
			c.creatingGroups = false
			if err != nil {
				c.d.log.Info("groups: creating the internal topic a peer asked for failed", "topic", metadata.GroupsTopic, "peer", from, "err", err)
				return
			}
			c.d.log.Info("groups: created the internal topic a peer asked for", "topic", metadata.GroupsTopic, "peer", from)
		})
	})
}

// ProposeFor hands a peer's proposal to the controller (the metadata
// primary proposes it; propose_remote.go). Runs on any goroutine.
func (m metaPort) ProposeFor(from int32, p peerwire.Propose) {
	m.group.Shard(metaShard).Post(func() {
		if c := *m.ctrl; c != nil {
			c.proposeFor(from, p)
		}
	})
}

// Proposed hands the metadata primary's answer to one of this node's
// proposals to the controller. Runs on any goroutine.
func (m metaPort) Proposed(_ int32, p peerwire.Proposed) {
	m.group.Shard(metaShard).Post(func() {
		if c := *m.ctrl; c != nil {
			c.proposed(p)
		}
	})
}

// Cluster is the cluster id the data directory records (zero: none yet).
// Any goroutine.
func (m metaPort) Cluster() [16]byte {
	if p := m.cluster.Load(); p != nil {
		return *p
	}
	return metadata.ClusterID{}
}

// appendsOnly turns catch-up by whole segments off: a seam for the
// figures that compare it with appends (BENCHMARKS.md).
var appendsOnly = false

// segmentFns are the replicas' Config.SendSegment and AnswerSegment:
// catch-up of learners by whole segments over the peer links (nil on a
// single node).
func (n *Node) segmentFns() (func(*partition.Replica, *partition.SegmentChunk), func(*partition.Replica, raftlite.NodeID, partition.SegmentAnswer)) {
	if n.peers == nil || appendsOnly {
		return nil, nil
	}
	s := n.peers.Segments()
	if s == nil {
		return nil, nil // a transport that copies by appends only (the simulator)
	}
	return s.SendSegment, s.AnswerSegment
}

// SegmentBytesSent is how many bytes this node's primaries sent to
// learners as whole segments.
func (n *Node) SegmentBytesSent() int64 {
	if n.peers == nil {
		return 0
	}
	if s := n.peers.Segments(); s != nil {
		return s.SegmentBytes()
	}
	return 0
}

// ReplicationHops is the number of cross-shard hops replication messages
// took on this node (0 when K equals the shard counts).
func (n *Node) ReplicationHops() uint64 {
	if n.peers == nil {
		return 0
	}
	return n.peers.Hops()
}

func (n *Node) clustered() bool { return len(n.cfg.Roster()) > 1 }
