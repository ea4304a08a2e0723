package transport

import (
	"context"
	"log/slog"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/tlsbridge"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// Transport is the network seam between this node and its peers: the
// replicas' consensus messages out, route announcements, leadership
// transfer and replica-move requests, and the liveness signal in. TCP
// (tcp.go, peerconn.go) is the real one; the whole-node simulator has
// its own. Everything a transport needs from the node comes in through
// Deps, and what it learns goes out through the ports Deps names, so
// neither side reads the other's fields.
type Transport interface {
	// Send queues a replica's messages (its Config.Send). REQUIRES: on
	// the replica's shard.
	Send(r *partition.Replica, msgs []raftlite.Message)
	// Announce queues the route of a partition this node leads.
	Announce(r peerwire.Route)
	// RequestTransfer asks node from, a peer, to start the transfer t.
	// REQUIRES: on shard routes.MetaShard.
	RequestTransfer(from int32, t peerwire.Transfer)
	// RequestReassign and AnswerReassign carry a replica move's step
	// request and its answer. REQUIRES: on shard routes.MetaShard.
	RequestReassign(to int32, m peerwire.Reassign)
	AnswerReassign(to int32, m peerwire.ReassignState)
	// SendTxnMarker asks node to, a partition's primary, to write a
	// transaction marker; AnswerTxnMarker answers one. REQUIRES: on
	// shard routes.MetaShard.
	SendTxnMarker(to int32, m peerwire.TxnMarker)
	AnswerTxnMarker(to int32, a peerwire.TxnMarkerAck)
	// RequestGroupsTopic asks node to, the metadata primary, to create
	// the consumer groups' internal topic. REQUIRES: on shard
	// routes.MetaShard.
	RequestGroupsTopic(to int32)
	// Propose asks node to, the metadata primary, to propose an encoded
	// metadata command for this node; AnswerPropose carries its answer
	// back. REQUIRES: on shard routes.MetaShard.
	Propose(to int32, m peerwire.Propose)
	AnswerPropose(to int32, m peerwire.Proposed)
	// AskEnds and AnswerEnds carry a question for the high watermarks
	// of partitions a peer leads and its answer. REQUIRES: on shard
	// routes.MetaShard.
	AskEnds(to int32, q peerwire.Ends)
	AnswerEnds(to int32, a peerwire.EndsAnswer)
	// Opened and Closed register and forget a consensus group hosted on
	// shard shardID, for incoming messages.
	Opened(g raftlite.GroupID, shardID int)
	Closed(g raftlite.GroupID)
	// Alive is the liveness signal: a frame came from node id lately.
	Alive(id int32) bool
	// Hops counts messages that crossed shards inside the transport.
	Hops() uint64
	// Shutdown closes every link and the listener.
	Shutdown(ctx context.Context) error
	// SetPeers dials the links of peers new to the roster nodes and
	// drops those of peers that left it. REQUIRES: on shard
	// routes.MetaShard.
	SetPeers(nodes []config.RosterNode)
	// Segments is the catch-up of learners by whole segments; nil on a
	// transport that copies them by appends only.
	Segments() SegmentLink
}

// SegmentLink carries the catch-up of learners by whole segments over
// the peer links: the replicas' Config.SendSegment and AnswerSegment, and
// the bytes sent so.
type SegmentLink interface {
	SendSegment(r *partition.Replica, c *partition.SegmentChunk)
	AnswerSegment(r *partition.Replica, to raftlite.NodeID, a partition.SegmentAnswer)
	SegmentBytes() int64
}

// Replicas is the replica host as a transport reaches it: what a peer's
// frames ask of this node's replicas.
type Replicas interface {
	// Step hands a peer's consensus message to its group on shard
	// shardID. Runs on that shard.
	Step(shardID int, m *raftlite.Message)
	// Transfer starts the leadership transfer a peer asked for.
	Transfer(t peerwire.Transfer)
	// Reassign takes the next step of a replica move a peer asked for.
	Reassign(m peerwire.Reassign)
	// TxnMarker writes the transaction marker a peer's coordinator
	// asked for, TxnMarkerAck hands its answer to the local coordinator's
	// request. Both run on any goroutine.
	TxnMarker(m peerwire.TxnMarker)
	TxnMarkerAck(a peerwire.TxnMarkerAck)
	// PeerDown is told, on shard routes.MetaShard, that a peer stopped
	// answering (the failover rule).
	PeerDown(id int32)
	// Replica finds group g's replica on shard shardID (running there),
	// or nil.
	Replica(shardID int, g raftlite.GroupID) *partition.Replica
}

// Routes is the route table as a transport reaches it: the routes peers
// announce go in, the routes this node leads come out. *routes.Table is
// one.
type Routes interface {
	Learn(key [20]byte, r routes.Route)
	LedBy(id int32) []peerwire.Route
}

// Metadata is the metadata controller as a transport reaches it.
type Metadata interface {
	// Applied is the controller's applied offset, sent in pings (-1:
	// none yet); Snapshot its latest snapshot, sent with a metadata
	// MsgReset. Both are called on shard routes.MetaShard.
	Applied() int64
	Snapshot() []byte
	// ReassignState hands a partition primary's answer to the local
	// reassigner. Runs on any goroutine.
	ReassignState(st peerwire.ReassignState)
	// GroupsTopicWanted is a peer's request that this node, when it is
	// the metadata primary, create the consumer groups' internal topic
	// (a group request reached that peer before the topic existed).
	// Runs on any goroutine.
	GroupsTopicWanted(from int32)
	// ProposeFor is a peer's Propose; Proposed the answer to one this
	// node sent. Both run on any goroutine.
	ProposeFor(from int32, m peerwire.Propose)
	Proposed(from int32, m peerwire.Proposed)
	// Cluster is the cluster id the data directory records (zero: not
	// learned yet), sent and checked in every handshake. Any goroutine.
	Cluster() [16]byte
}

// Ends is the node's side of the partition ends peers ask each other
// for (peerwire.Ends): it answers a peer's question and takes the
// answers to its own. Both run on any goroutine.
type Ends interface {
	// Asked answers q, from node from, with AnswerEnds.
	Asked(from int32, q peerwire.Ends)
	// Answered hands node from's answer to the question that waits for it.
	Answered(from int32, a peerwire.EndsAnswer)
}

// Deps is what a transport needs from the rest of the node: its
// identity, its shards, its clock and liveness detector, and the ports
// it calls (the replica host, the routes, the controller). A transport
// holds no pointer to the node and reads no other part's fields.
type Deps struct {
	Self int32
	// Version is the server version, checked in every handshake.
	Version string
	// Roster is the roster now (it changes at run time: SetPeers).
	Roster func() []config.RosterNode
	Log    *slog.Logger
	Group  *shard.Group
	Clock  clock.Clock
	Live   *Liveness
	// Heartbeat is cluster.heartbeat_interval_ms, the ping interval.
	Heartbeat time.Duration
	Stopped   func() bool
	Replicas  Replicas
	Routes    Routes
	Meta      Metadata
	// Ends answers peers' questions for partition ends and takes the
	// answers (nil: a question is dropped unanswered).
	Ends Ends
	// Liveness is told of each peer seen to go down or come back (the
	// node logs it).
	Liveness func(id int32, up bool)
	// TLS, when set, serves and dials the links over TLS.
	TLS *TLS
}

// TLS is the peer links' TLS: the replication listener's bridge and the
// one this node dials its peers through.
type TLS struct {
	Serve, Dial tlsbridge.Config
}
