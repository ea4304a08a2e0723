package node

import (
	"time"

	"github.com/corestream/corestream/cluster/config"
	ctl "github.com/corestream/corestream/cluster/controller"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// The composition root's wiring of the metadata controller's drivers
// (cluster/controller): the primary balancer's driver and the
// reassigner, started with the controller on shard metaShard. The
// controller is their Metadata port; its admin calls for them answer
// through them.

// The controller is the drivers' Metadata port (State is its core's).
var _ ctl.Metadata = (*controller)(nil)

// IsPrimary says this node leads the metadata group. REQUIRES: on shard
// metaShard, once the group is open.
func (c *controller) IsPrimary() bool { return c.r.IsPrimary() }

// Propose proposes cmd (propose). REQUIRES: on shard metaShard.
func (c *controller) Propose(cmd metadata.Command, timeout time.Duration, done func(metadata.Result, error)) {
	c.propose(cmd, timeout, done)
}

// rebalance, movePrimary and svcReassign are the admin calls the
// drivers answer. REQUIRES: on shard metaShard.
func (c *controller) rebalance(req *wire.RebalanceRequest, done func(any)) {
	c.bal.Rebalance(req, done)
}

func (c *controller) movePrimary(req *wire.MovePrimaryRequest, done func(any)) {
	c.bal.MovePrimary(req, done)
}

func (c *controller) svcReassign(req *service.ReassignRequest, done func(service.ReassignResult, error)) {
	c.reas.Serve(req, done)
}

// The topic and offset calls the admin part answers. REQUIRES: on shard
// metaShard, admitted (admit).
func (c *controller) createTopic(req *service.CreateTopicRequest, done func(service.CreateTopicResult, error)) {
	c.adm.CreateTopic(req, done)
}

func (c *controller) deleteTopic(req *service.DeleteTopicRequest, done func(metadata.TopicID, error)) {
	c.adm.DeleteTopic(req, done)
}

func (c *controller) addPartitions(req *service.AddPartitionsRequest, done func(int32, error)) {
	c.adm.AddPartitions(req, done)
}

func (c *controller) commitOffsets(req *service.CommitOffsetsRequest, done func([]error, error)) {
	c.adm.CommitOffsets(req, done)
}

func (c *controller) fetchOffsets(req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error)) {
	c.adm.FetchOffsets(req, done)
}

// newAdmin wires controller c's admin calls to the node's parts.
// REQUIRES: on shard metaShard.
func (n *Node) newAdmin(c *controller) *ctl.Admin {
	return ctl.NewAdmin(ctl.AdminDeps{
		Meta: c, Clock: n.clock,
		After: func(d time.Duration, fn func()) { c.sh.AfterFunc(d, fn) },
		Self:  n.self, Roster: n.roster.active, Alive: n.alive, Routes: &n.routes,
		OpenFailed: func(key [20]byte) (string, error, bool) {
			f, ok := n.openErrs.get(key)
			return f.kind, f.err, ok
		},
		OpenRetryMax: openBackoffMax,
		DefaultRF:    n.cfg.Cluster.DefaultReplicationFactor,
		TopicID:      n.topicID,
	})
}

// changeRoster is the admin call the roster driver answers. REQUIRES: on
// shard metaShard.
func (c *controller) changeRoster(req *service.RosterRequest, done func(service.RosterResult, error)) {
	c.rd.ChangeRoster(req, done)
}

// driveRoster takes the roster change's next step (after each commit),
// once the roster driver runs. REQUIRES: on shard metaShard.
func (c *controller) driveRoster() {
	if c.rd != nil {
		c.rd.Drive()
	}
}

// startRosterDriver starts controller c's roster driver. REQUIRES: on
// shard metaShard, with c the started controller.
func (n *Node) startRosterDriver(c *controller) {
	c.rd = ctl.NewRosterDriver(ctl.RosterDeps{
		Log: n.log, Meta: c, Group: c.r, Ready: c.d.ready, Alive: c.d.alive, RequirePrimary: c.requireMetaPrimary,
		Seed: n.cfg.Roster(), Clustered: n.clustered(),
		After:   func(d time.Duration, fn func()) { c.sh.AfterFunc(d, fn) },
		Stopped: n.stopped.Load,
	})
}

// startBalancer wires controller c's balancer driver to the node's
// parts. REQUIRES: on shard metaShard, with c the started controller.
func (n *Node) startBalancer(c *controller) {
	c.bal = ctl.NewBalancer(ctl.BalancerDeps{
		Clock: n.clock,
		After: func(d time.Duration, fn func()) { c.sh.AfterFunc(d, fn) },
		Log:   n.log, Roster: func() []int32 { return rosterIDs(n.roster.active()) },
		// A draining node counts as down: no primary goes to it, by
		// count or by preference (cluster/controller's drains).
		Alive:    func(id int32) bool { return n.alive(id) && !n.draining(id) },
		Draining: n.draining, Up: n.alive,
		View: n.view.Load, Routes: &n.routes,
		// c.State() is replaced when a snapshot is installed: read it late.
		LastMovedMs: func(topic string, p int32) int64 { return c.State().LastMovedMs(topic, p) },
		IsPrimary:   c.IsPrimary,
		Transfer:    n.replicas.requestTransfer,
		Propose: func(cmd metadata.Command) {
			c.propose(cmd, adminTimeoutDefault, func(metadata.Result, error) {})
		},
		Stats: &n.balanceStats, Rebalancing: &n.rebalancing,
		Every:            time.Duration(min(n.cfg.Cluster.LeaderBalanceIntervalMs, n.cfg.Cluster.LeaderImbalanceCheckIntervalMs)) * time.Millisecond,
		Auto:             n.cfg.Cluster.AutoLeaderRebalance,
		ImbalancePercent: n.cfg.Cluster.LeaderImbalancePercent,
		PreferredPercent: n.cfg.Cluster.LeaderImbalancePercentage,
		MoveTimeout:      n.moveTimeout(),
	}, n.stopped.Load)
}

// moveTimeout bounds one primary move: the transfer gives up after an
// election timeout, and the new primary's announcement takes a heartbeat
// or two to arrive.
func (n *Node) moveTimeout() time.Duration {
	return 2*time.Duration(n.cfg.Cluster.ElectionTimeoutMs)*time.Millisecond + time.Second
}

func rosterIDs(roster []config.RosterNode) []int32 {
	out := make([]int32, len(roster))
	for i, m := range roster {
		out[i] = int32(m.ID)
	}
	return out
}

// startReassigner wires controller c's reassigner to the node's parts.
// REQUIRES: on shard metaShard, with c the started controller.
func (n *Node) startReassigner(c *controller) {
	c.reas = ctl.NewReassigner(ctl.ReassignDeps{
		Clock: n.clock,
		After: func(d time.Duration, fn func()) { c.sh.AfterFunc(d, fn) },
		Log:   n.log, Self: int32(n.self),
		View: n.view.Load, Routes: &n.routes,
		Meta: c,
		Ask: func(to int32, m peerwire.Reassign) {
			if to == int32(n.self) {
				n.replicas.Reassign(m)
			} else if n.peers != nil {
				n.peers.RequestReassign(to, m)
			}
		},
		Concurrency: max(1, n.cfg.Cluster.ReassignConcurrency),
		Stopped:     n.stopped.Load,
		Roster:      func() []int32 { return rosterIDs(n.roster.active()) },
		Racks:       func() map[int32]string { return ctl.RacksOf(n.roster.active()) },
		Alive:       n.alive,
		Transfer:    n.replicas.requestTransfer,
	})
}

// draining reports whether node id is marked draining in the published
// metadata. Any goroutine.
func (n *Node) draining(id int32) bool {
	v := n.view.Load()
	return v != nil && v.Drains[id] != nil
}

// setThrottle applies the rate v's moves ask for (ctl.ThrottleRate).
// Runs on shard metaShard with each new View.
func (n *Node) setThrottle(v *View) {
	n.throttle.SetRate(ctl.ThrottleRate(v.Moves, n.cfg.Cluster.ReassignThrottleBytesPerSecond))
}

// movedOff forgets a replica that a move took off this node: its group
// and its lag state, but not its route, which this node goes on serving
// to clients (a dropped route would answer PRIMARY_NOT_AVAILABLE until
// the partition's primary changed again).
func (n *Node) movedOff(key [20]byte) {
	if n.peers != nil {
		n.peers.Closed(partition.GroupID(key))
	}
	n.router.Lags.Drop(key)
}
