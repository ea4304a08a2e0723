package node

import (
	"context"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/transport"
	"time"

	"github.com/corestream/corestream/cluster/peerauth"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard/partition"
)

// Transport is the network seam between this node and its peers: the
// replicas' consensus messages out, route announcements, leadership
// transfer requests, and the liveness signal in. peers (peers.go,
// peerconn.go) is the TCP one; everything it needs from the node comes in
// through peerDeps, and what it learns goes out through those upcalls, so
// neither side reads the other's fields. nil on a single node.
type Transport interface {
	// send queues a replica's messages (its Config.Send). REQUIRES: on
	// the replica's shard.
	send(r *partition.Replica, msgs []raftlite.Message)
	// Announce queues the route of a partition this node leads.
	Announce(r peerwire.Route)
	// requestTransfer asks node from, a peer, to start the transfer t.
	requestTransfer(from int32, t peerwire.Transfer)
	// requestReassign and answerReassign carry a replica move's step
	// request and its answer (reassign.go).
	requestReassign(to int32, m peerwire.Reassign)
	answerReassign(to int32, m peerwire.ReassignState)
	// opened and closed register and forget a consensus group hosted on
	// shard shardID, for incoming messages.
	opened(g raftlite.GroupID, shardID int)
	closed(g raftlite.GroupID)
	// alive is the liveness signal: a frame came from node id lately.
	alive(id int32) bool
	// hops counts messages that crossed shards inside the transport.
	hops() uint64
	// shutdown closes every link and the listener.
	shutdown(ctx context.Context) error
	// setPeers dials the links of peers new to the roster nodes and
	// drops those of peers that left it (roster.go).
	setPeers(nodes []config.RosterNode)
	// segments is the catch-up of learners by whole segments; nil on a
	// transport that copies them by appends only.
	segments() segmentLink
}

// segmentLink carries the catch-up of learners by whole segments over
// the peer links: the replicas' Config.SendSegment and AnswerSegment, and
// the bytes sent so.
type segmentLink interface {
	sendSegment(r *partition.Replica, c *partition.SegmentChunk)
	answerSegment(r *partition.Replica, to raftlite.NodeID, a partition.SegmentAnswer)
	segmentBytes() int64
}

// segments is the TCP transport itself: it sends whole segments.
func (p *peers) segments() segmentLink { return p }

func (p *peers) segmentBytes() int64 { return p.SegmentBytes.Load() }

var _ Transport = (*peers)(nil)

// startPeers builds the TCP transport over the replication listener ln
// (bound by preflight) and wires it to the node's parts.
func (n *Node) startPeers(ln *netio.Listener) error {
	p, err := newPeers(n.peerDeps(), n.cfg.Cluster.Coordinator.ReplicaConnectionsPerPeer,
		peerauth.Secrets{Cluster: []byte(n.cfg.Cluster.Secret), HTTP: []byte(n.cfg.HTTP.JWTSecret)}, n.cfg.Network, ln)
	if err != nil {
		return err
	}
	n.peers = p
	return nil
}

// peerDeps wires a transport to the node's parts: what it hands the
// replicas, the routes, the replica host and the controller, and the
// liveness it keeps (every transport, the TCP one and the simulator's,
// takes the same).
func (n *Node) peerDeps() peerDeps {
	timeout := time.Duration(n.cfg.Cluster.ElectionTimeoutMs) * time.Millisecond
	return peerDeps{
		self: int32(n.self), roster: n.roster.nodes, log: n.log, group: n.group, clock: n.clock,
		live:      transport.NewLiveness(n.clock, timeout),
		heartbeat: time.Duration(n.cfg.Cluster.HeartbeatIntervalMs) * time.Millisecond,
		stopped:   n.stopped.Load,
		step:      n.replicas.step,
		learnRoute: func(r peerwire.Route) {
			n.routes.Learn(shardKey(r.TopicID, r.Partition), routes.Route{Leader: r.Leader, Term: r.Term, InSync: maskIDs(r.InSync)})
		},
		transfer:      func(t peerwire.Transfer) { n.replicas.transfer(t.TopicID, t.Partition, t.Target) },
		reassign:      n.replicas.reassign,
		cluster:       func() [16]byte { return n.clusterRecorded() },
		reassignState: n.reassignObserved,
		peerDown:      func(id int32) { n.replicas.peerDown(raftlite.NodeID(id)) },
		liveness:      n.logNodeLiveness,
		metaApplied: func() int64 {
			if n.ctrl == nil {
				return -1
			}
			return n.ctrl.applied
		},
		metaSnapshot: func() []byte {
			if n.ctrl == nil {
				return nil
			}
			return n.ctrl.snapshot
		},
		ledRoutes: func() []peerwire.Route { return n.routes.LedBy(int32(n.self)) },
		replica: func(shardID int, g raftlite.GroupID) *partition.Replica {
			if h := n.replicas.d.hosts[shardID]; h != nil {
				return h.Group(g)
			}
			return nil
		},
		tls: n.peerTLS(),
	}
}

// requestTransfer sends t to node from over its link 0. REQUIRES: on
// shard metaShard, which owns link 0 (the balancer's shard).
func (p *peers) requestTransfer(from int32, t peerwire.Transfer) {
	ps := p.shards[p.linkShard(0)]
	ps.sendFrame(linkKey{peer: from, k: 0}, peerwire.AppendTransfer(nil, t))
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
	s := n.peers.segments()
	if s == nil {
		return nil, nil // a transport that copies by appends only (the simulator)
	}
	return s.sendSegment, s.answerSegment
}

// SegmentBytesSent is how many bytes this node's primaries sent to
// learners as whole segments.
func (n *Node) SegmentBytesSent() int64 {
	if n.peers == nil {
		return 0
	}
	if s := n.peers.segments(); s != nil {
		return s.segmentBytes()
	}
	return 0
}
