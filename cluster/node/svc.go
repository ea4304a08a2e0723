package node

import (
	"errors"
	"fmt"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// nodeService is this node's implementation of the typed service
// (cluster/service) that every front end calls: the native protocol
// (handler.go), the HTTP API (http*.go) and the Kafka listener. It holds
// no *Node: what it reads of the other parts (the published View, the
// route table, liveness, the controller, the replicas' shards) comes in
// as the values and small interfaces of svcDeps, wired once in
// newService, the only place that reads the Node.
type nodeService struct {
	svcDeps
	// followerReads counts fetches served by this node as a follower
	// (any goroutine; read by the metrics).
	followerReads atomic.Int64
}

var _ service.Service = (*nodeService)(nil)

// svcDeps is what the service needs of the rest of the node.
type svcDeps struct {
	self raftlite.NodeID
	// clusterID names the cluster in handshakes and Kafka metadata.
	clusterID func() string
	storage   config.Storage
	// roster is the roster now (roster.go: it changes at run time).
	roster func() []config.RosterNode
	// addrOf and httpAddrOf are a node's advertised client and HTTP
	// addresses ("" when the roster has none).
	addrOf     func(id int32) string
	httpAddrOf func(id int32) string
	// kafkaAddrOf is a node's advertised Kafka address ("" when none).
	kafkaAddrOf func(id int32) string
	// group and hosts are the shards and their replica hosts; hosts[i]
	// is read only on shard i.
	group *shard.Group
	hosts []*partition.Host
	// shardOf is the shard that owns partition p of topic id.
	shardOf func(id [16]byte, p int32) int
	// view is the published metadata (any goroutine).
	view func() *View
	// routes is the route table (any goroutine).
	routes routeReader
	// alive says whether a node is believed up (any goroutine).
	alive func(id int32) bool
	// ready is nil once the committed metadata is loaded (ready.go).
	ready func() error
	// metaRoute is the metadata group's primary and term.
	metaRoute func() (int32, int32)
	// rebalancing says a balancer move is running; stopping that the
	// node is stopping (no new long polls).
	rebalancing func() bool
	stopping    func() bool
	// openFailed is the error for a partition that could not be opened
	// here, nil when it did not fail (openfail.go).
	openFailed func(key [20]byte, topic string, p int32) error
	// caughtUp is when follower id of the partition key last caught up,
	// in ms (insync.go); now is the node's clock.
	caughtUp func(key [20]byte, id raftlite.NodeID) int64
	now      func() time.Time
	pids     *producerIDs
	// admin is the metadata controller (nil until it starts); its calls
	// run on shard metaShard.
	admin func() metadataAdmin
	// meter counts and times the calls (svc_metrics.go; nil: not
	// metered).
	meter *svcMeter
	// groups is the consumer group coordinator (svc_groups.go); nil: the
	// group calls answer ErrCoordinatorNotAvailable.
	groups *groupsHost
}

// routeReader reads the route table (view.go).
type routeReader interface {
	Get(key [20]byte) (routes.Route, bool)
}

// metadataAdmin is what the service asks of the metadata controller.
// Every method runs on shard metaShard and calls done exactly once there.
type metadataAdmin interface {
	// admit is nil when the controller can serve an admin call now:
	// its group is open, it is the metadata primary (when needPrimary),
	// and it has applied its term's first entry.
	admit(needPrimary bool) error
	createTopic(req *service.CreateTopicRequest, done func(service.CreateTopicResult, error))
	deleteTopic(req *service.DeleteTopicRequest, done func(metadata.TopicID, error))
	addPartitions(req *service.AddPartitionsRequest, done func(int32, error))
	alterTopicConfig(req *service.AlterTopicConfigRequest, done func(metadata.TopicConfig, error))
	commitOffsets(req *service.CommitOffsetsRequest, done func([]error, error))
	fetchOffsets(req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error))
	// deleteOffsets drops consumer's offsets of parts, or all of them
	// when parts is empty (svc_groups_store.go).
	deleteOffsets(consumer string, parts []service.TopicPartition, done func(struct{}, error))
	svcMovePrimary(req *service.MovePrimaryRequest, done func(service.MovePrimaryResult, error))
	svcRebalance(req *service.RebalanceRequest, done func(service.RebalanceResult, error))
	changeUser(cmd metadata.Command, timeout time.Duration, done func(*metadata.User, error))
	svcReassign(req *service.ReassignRequest, done func(service.ReassignResult, error))
	changeRoster(req *service.RosterRequest, done func(service.RosterResult, error))
}

// newService wires the service to n's parts. REQUIRES: n's shards are
// started (n.group, n.hosts set).
func newService(n *Node) *nodeService {
	return &nodeService{svcDeps: svcDeps{
		self: n.self, clusterID: n.clusterName, storage: n.cfg.Storage, roster: n.roster.nodes,
		addrOf: n.addrOf, httpAddrOf: n.httpAddrOf, kafkaAddrOf: n.kafkaAddrOf,
		group: n.group, hosts: n.hosts, shardOf: n.shardOf,
		view: n.view.Load, routes: &n.routes, alive: n.alive, ready: n.metadataReady, metaRoute: n.metaRoute,
		rebalancing: n.rebalancing.Load, stopping: n.stopped.Load,
		openFailed: func(key [20]byte, topic string, p int32) error {
			if f, failed := n.openErrs.get(key); failed {
				return n.openErr(topic, p, f)
			}
			return nil
		},
		caughtUp: n.lags.CaughtUp, now: n.clock.Now, pids: n.pids, meter: newSvcMeter(n.clock), groups: n.groups,
		admin: func() metadataAdmin {
			if n.ctrl == nil {
				return nil
			}
			return n.ctrl
		},
	}}
}

// clusterID names the cluster in handshakes: its roster's size.
func (n *Node) clusterID() string {
	return fmt.Sprintf("corestream-%d", len(n.cfg.Roster()))
}

// svcErr turns any error met while serving into the service's *Error:
// a replica's *partition.Error keeps its kind (its hint gains the
// address); the node's parts (ready.go, controller.go, balancer.go,
// openfail.go, reconcile.go) answer in the service's kinds already, so no
// front end's code table is read backwards; anything else is ErrInternal
// with its text.
func (s *nodeService) svcErr(err error) error {
	if err == nil {
		return nil
	}
	var se *service.Error
	var pe *partition.Error
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &pe):
		e := &service.Error{Kind: pe.Kind, Message: pe.Message, RetryAfterMs: pe.RetryAfterMs}
		if pe.Leader > 0 {
			e.Hint = &service.Hint{NodeID: pe.Leader, Generation: pe.Generation, ClientAddr: s.addrOf(pe.Leader)}
		}
		return e
	}
	return service.Errorf(service.ErrInternal, "%v", err)
}

// busy is the answer when a shard cannot take a call now.
func busy(err error) error {
	if errors.Is(err, shard.ErrStopped) {
		return service.Errorf(service.ErrNodeNotAvailable, "the node is shutting down")
	}
	e := service.Errorf(partition.ErrBusy, "the node is overloaded (%v); retry shortly", err)
	e.RetryAfterMs = 5
	return e
}

// outcome carries a call's result and error across shards.
type outcome[R any] struct {
	v   R
	err error
}

// runOn runs fn on shard to and calls done with its outcome exactly
// once: on from, or on to when from is nil. fn runs inline when to is
// from; detach (when not nil) is called first when it does not, so the
// request can stop borrowing the caller's buffers.
func runOn[R any](from, to *shard.Shard, detach func(), fn func(sh *shard.Shard, reply func(R, error)), done func(R, error)) {
	if to == from {
		fn(to, done)
		return
	}
	if detach != nil {
		detach()
	}
	call := func(sh *shard.Shard, reply func(outcome[R])) {
		fn(sh, func(v R, err error) { reply(outcome[R]{v, err}) })
	}
	finish := func(o outcome[R]) { done(o.v, o.err) }
	var err error
	if from == nil {
		err = to.Post(func() { call(to, finish) })
	} else {
		err = shard.CallAsync(from, to, call, finish)
	}
	if err != nil {
		var zero R
		done(zero, busy(err))
	}
}

// adminCall runs fn on the controller's shard once the controller admits
// the call, and answers through done on from (on the controller's shard
// when from is nil).
func adminCall[R any](s *nodeService, from *shard.Shard, needPrimary bool, fn func(c metadataAdmin, reply func(R, error)), done func(R, error)) {
	runOn(from, s.group.Shard(metaShard), nil, func(_ *shard.Shard, reply func(R, error)) {
		var zero R
		c := s.admin()
		if c == nil {
			reply(zero, service.Errorf(service.ErrNodeNotAvailable, "the metadata group is not open on this node"))
			return
		}
		if err := c.admit(needPrimary); err != nil {
			reply(zero, s.svcErr(err))
			return
		}
		fn(c, func(v R, err error) { reply(v, s.svcErr(err)) })
	}, done)
}

// ownerShard is the shard that owns partition p of topic, -1 when the
// View has no such partition.
func (n *Node) ownerShard(topic string, p int32) int {
	t := n.view.Load().Topics[topic]
	if t == nil || p < 0 || int(p) >= t.Partitions() {
		return -1
	}
	return n.shardOf(t.ID, p)
}

// alive reports whether node id is believed up.
func (n *Node) alive(id int32) bool { return id == int32(n.self) || n.peerAlive(id) }

// liveSignal is the liveness signal handed to the parts: this node is
// alive, a peer while the transport heard from it lately (no transport:
// a single node).
type liveSignal struct {
	self  int32
	peers Transport
}

// Alive reports whether node id is believed up.
func (l liveSignal) Alive(id int32) bool {
	return id == l.self || (l.peers != nil && l.peers.alive(id))
}

// peerAlive reports whether peer id was heard from recently.
func (n *Node) peerAlive(id int32) bool { return n.peers != nil && n.peers.alive(id) }

// wireError is the native table's conversion (wirecode.Error): what a
// native client or the HTTP API (which names its errors by the native
// codes) is answered for a service error.
var wireError = wirecode.Error
