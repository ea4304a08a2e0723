package node

import (
	"fmt"
	"github.com/corestream/corestream/cluster/routes"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/balance"
	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard/partition"
)

// The primary balancer runs on the metadata primary, on shard metaShard:
// every cluster.leader_balance_interval_ms it builds a balance.View from
// the metadata and the route table, asks balance.Next for one move, and
// carries it out as a leadership transfer on the partition's primary,
// waiting until the target leads or the move times out before the next.
// A manual rebalance and MovePrimary use the same single slot, so moves
// never overlap.

// Bounds of the balancer.
const (
	// moveCheckEvery is how often a running move looks at the routes.
	moveCheckEvery = 20 * time.Millisecond
	// balanceMuteMs keeps a moved partition where it is for a while.
	balanceMuteMs = 60_000
	// nextMoveAfter is the pause between moves of one rebalance.
	nextMoveAfter = 100 * time.Millisecond
)

// BalanceStats count the balancer's moves on this node.
type BalanceStats struct {
	Started, Finished, Failed atomic.Uint64
}

// move is one primary move in progress.
type move struct {
	balance.Move
	topic    *metadata.Topic
	part     int32
	started  time.Time
	deadline time.Time
	done     func(error)
}

// balancerDeps is what the balancer driver reads and does: it holds no
// pointer to the node or the controller, so the simulator runs the same
// driver over simulated routes, liveness, time and transfers.
type balancerDeps struct {
	clock clock.Clock
	// after arms a timer on the driver's owner (shard metaShard).
	after func(d time.Duration, fn func())
	log   *slog.Logger
	// roster lists every node id placement may use (it changes at run
	// time: roster.go).
	roster func() []int32
	// alive is the liveness signal (a draining node counts as down);
	// draining says which nodes are draining, for messages.
	alive    func(id int32) bool
	draining func(id int32) bool
	// up is the liveness signal alone: an operator may move a primary
	// off a draining node that is up.
	up func(id int32) bool
	// view is the applied metadata; route the route table.
	view  func() *View
	route func(key [20]byte) (routes.Route, bool)
	// lastMovedMs is when the balancer last moved a partition (metadata).
	lastMovedMs func(topic string, p int32) int64
	// isPrimary says this node leads the metadata group (only the
	// metadata primary moves primaries).
	isPrimary func() bool
	// transfer asks the primary of a partition (node from) to hand it to
	// node to.
	transfer func(topicID [16]byte, p int32, from, to int32)
	// propose records a finished move in the metadata (OpPrimaryMoved).
	propose func(metadata.Command)
	// stats and rebalancing are what the metrics and ClusterStatus show.
	stats       *BalanceStats
	rebalancing *atomic.Bool
	// every is the smaller of cluster.leader_balance_interval_ms and
	// cluster.leader_imbalance_check_interval_ms; auto is
	// cluster.auto_leader_rebalance; imbalancePercent is
	// cluster.leader_imbalance_percent (counts), preferredPercent
	// cluster.leader_imbalance_percentage (preferred primaries);
	// moveTimeout bounds one move.
	every            time.Duration
	auto             bool
	imbalancePercent int
	preferredPercent int
	moveTimeout      time.Duration
}

// balancer is the metadata primary's mover; owned by shard metaShard.
type balancer struct {
	d        balancerDeps
	inFlight *move
	// manual keeps moving until balanced after a Rebalance request, even
	// with auto_leader_rebalance off.
	manual bool
	// preferredOnly: the manual rebalance asked only for preferred
	// primaries back (rebalance --preferred).
	preferredOnly bool
	// stopped ends the loop (the node stops).
	stopped func() bool
}

// newBalancer starts the driver's loop: a step every d.every.
func newBalancer(d balancerDeps, stopped func() bool) *balancer {
	b := &balancer{d: d, stopped: stopped}
	var loop func()
	loop = func() {
		if b.stopped() {
			return
		}
		if b.d.auto || b.manual {
			b.step()
		}
		b.d.after(b.d.every, loop)
	}
	b.d.after(b.d.every, loop)
	return b
}

// startBalancer wires controller c's balancer driver to the node's
// parts (composition root glue). REQUIRES: on shard metaShard, with c
// the started controller.
func (n *Node) startBalancer(c *controller) {
	c.bal = newBalancer(balancerDeps{
		clock: n.clock,
		after: func(d time.Duration, fn func()) { c.sh.AfterFunc(d, fn) },
		log:   n.log, roster: func() []int32 { return rosterIDs(n.roster.active()) },
		// A draining node counts as down: no primary goes to it, by
		// count or by preference (reassign_drain.go).
		alive:    func(id int32) bool { return n.alive(id) && !n.draining(id) },
		draining: n.draining, up: n.alive,
		view: n.view.Load, route: n.routes.Get,
		// c.state is replaced when a snapshot is installed: read it late.
		lastMovedMs: func(topic string, p int32) int64 { return c.state.LastMovedMs(topic, p) },
		isPrimary:   func() bool { return c.r.IsPrimary() },
		transfer:    n.replicas.requestTransfer,
		propose: func(cmd metadata.Command) {
			c.propose(cmd, adminTimeoutDefault, func(metadata.Result, error) {})
		},
		stats: &n.balanceStats, rebalancing: &n.rebalancing,
		every:            time.Duration(min(n.cfg.Cluster.LeaderBalanceIntervalMs, n.cfg.Cluster.LeaderImbalanceCheckIntervalMs)) * time.Millisecond,
		auto:             n.cfg.Cluster.AutoLeaderRebalance,
		imbalancePercent: n.cfg.Cluster.LeaderImbalancePercent,
		preferredPercent: n.cfg.Cluster.LeaderImbalancePercentage,
		moveTimeout:      n.moveTimeout(),
	}, n.stopped.Load)
}

func rosterIDs(roster []config.RosterNode) []int32 {
	out := make([]int32, len(roster))
	for i, m := range roster {
		out[i] = int32(m.ID)
	}
	return out
}

// view builds what balance.Next looks at.
func (b *balancer) view() *balance.View {
	d := &b.d
	v := &balance.View{MoveInFlight: b.inFlight != nil, NowMs: d.clock.Now().UnixMilli(),
		ImbalancePercent: d.imbalancePercent, MuteMs: balanceMuteMs,
		PreferredCheck: true, PreferredImbalancePercent: d.preferredPercent, PreferredOnly: b.preferredOnly}
	if b.preferredOnly {
		v.PreferredImbalancePercent = 0 // on demand: every partition led away goes back
	}
	for _, id := range d.roster() {
		v.Nodes = append(v.Nodes, balance.Node{ID: id, Alive: d.alive(id)})
	}
	for _, t := range d.view().Sorted {
		for p, reps := range t.Replicas {
			bp := balance.Partition{Key: t.Name + "/" + strconv.Itoa(p), LastMovedMs: d.lastMovedMs(t.Name, int32(p))}
			for _, r := range reps {
				bp.Replicas = append(bp.Replicas, int32(r))
			}
			if rt, ok := d.route(shardKey(t.ID, int32(p))); ok && rt.Leader > 0 && d.alive(rt.Leader) {
				bp.Primary = rt.Leader
				bp.InSync = rt.InSync
			}
			v.Partitions = append(v.Partitions, bp)
		}
	}
	return v
}

// step starts the next move if none runs and one is needed.
func (b *balancer) step() {
	if b.inFlight != nil || !b.d.isPrimary() {
		return
	}
	m, ok := balance.Next(b.view())
	if !ok {
		b.manual, b.preferredOnly = false, false
		b.d.rebalancing.Store(false)
		return
	}
	b.d.rebalancing.Store(true)
	if err := b.start(m, nil); err != nil {
		b.d.log.Warn("primary move not started", "partition", m.Key, "from", m.From, "to", m.To, "err", err)
	}
}

// start begins move m (done, when set, learns the outcome).
func (b *balancer) start(m balance.Move, done func(error)) error {
	t, p, err := b.partitionOf(m.Key)
	if err != nil {
		return err
	}
	now := b.d.clock.Now()
	mv := &move{Move: m, topic: t, part: p, started: now, deadline: now.Add(b.d.moveTimeout), done: done}
	b.inFlight = mv
	b.d.stats.Started.Add(1)
	b.d.log.Info("primary move started", "partition", m.Key, "from", m.From, "to", m.To, "why", m.Why)
	b.d.transfer(t.ID, p, m.From, m.To)
	b.d.after(moveCheckEvery, func() { b.check(mv) })
	return nil
}

// check ends mv when its target leads, or fails it at its deadline.
func (b *balancer) check(mv *move) {
	d := &b.d
	rt, _ := d.route(shardKey(mv.topic.ID, mv.part))
	now := d.clock.Now()
	switch {
	case rt.Leader == mv.To:
		took := now.Sub(mv.started)
		d.stats.Finished.Add(1)
		d.log.Info("primary move finished", "partition", mv.Key, "from", mv.From, "to", mv.To, "why", mv.Why, "duration", took)
		b.finish(mv, nil)
		d.propose(metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpPrimaryMoved, Name: mv.topic.Name,
			ID: mv.topic.ID, Partition: mv.part, AtMs: now.UnixMilli()})
	case now.After(mv.deadline):
		d.stats.Failed.Add(1)
		d.log.Warn("primary move failed", "partition", mv.Key, "from", mv.From, "to", mv.To, "why", mv.Why,
			"duration", now.Sub(mv.started), "primary_now", rt.Leader)
		b.finish(mv, service.Errorf(partition.ErrTimedOut, "moving %s's primary from node %d to node %d did not finish within %v (primary now %d)",
			mv.Key, mv.From, mv.To, d.moveTimeout, rt.Leader))
	default:
		d.after(moveCheckEvery, func() { b.check(mv) })
	}
}

func (b *balancer) finish(mv *move, err error) {
	b.inFlight = nil
	if mv.done != nil {
		mv.done(err)
	}
	if b.manual || b.d.auto {
		b.d.after(nextMoveAfter, b.step)
	} else {
		b.d.rebalancing.Store(false)
	}
}

func (b *balancer) partitionOf(key string) (*metadata.Topic, int32, error) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			p, err := strconv.Atoi(key[i+1:])
			t := b.d.view().Topics[key[:i]]
			if err != nil || t == nil || p < 0 || p >= t.Partitions() {
				break
			}
			return t, int32(p), nil
		}
	}
	return nil, 0, fmt.Errorf("balancer: no partition %q", key)
}

// moveTimeout bounds one primary move: the transfer gives up after an
// election timeout, and the new primary's announcement takes a heartbeat
// or two to arrive.
func (n *Node) moveTimeout() time.Duration {
	return 2*time.Duration(n.cfg.Cluster.ElectionTimeoutMs)*time.Millisecond + time.Second
}

// rebalance answers a Rebalance request: the plan, and unless a dry run,
// the start of its moves (one at a time, in the background).
func (c *controller) rebalance(req *wire.RebalanceRequest, done func(any)) {
	b := c.bal
	if b.inFlight != nil && !req.DryRun {
		done(service.Errorf(service.ErrRebalanceInProgress, "a primary move (%s from node %d to node %d) is running", b.inFlight.Key, b.inFlight.From, b.inFlight.To))
		return
	}
	movesMax := int(req.MovesMax)
	if movesMax == 0 {
		movesMax = wire.PartitionsPerTopicMax
	}
	v := b.view()
	v.PreferredOnly, v.PreferredImbalancePercent = req.Preferred, b.d.preferredPercent
	if req.Preferred {
		v.PreferredImbalancePercent = 0 // on demand: every partition led away goes back
	}
	plan := balance.Plan(*v, movesMax)
	resp := &wire.RebalanceResponse{}
	for _, m := range plan {
		t, p, err := b.partitionOf(m.Key)
		if err != nil {
			continue
		}
		resp.Moves = append(resp.Moves, wire.PrimaryMove{Topic: t.Name, TopicID: wire.TopicID(t.ID), Partition: p, FromNode: m.From, ToNode: m.To})
	}
	if !req.DryRun && len(plan) > 0 {
		b.manual, b.preferredOnly, resp.Started = true, req.Preferred, true
		b.step()
	}
	done(resp)
}

// movePrimary answers MovePrimary once the target leads (or fails).
func (c *controller) movePrimary(req *wire.MovePrimaryRequest, done func(any)) {
	b := c.bal
	d := &b.d
	t := d.view().Topics[req.Topic]
	if t == nil || req.Partition < 0 || int(req.Partition) >= t.Partitions() || (req.TopicID != wire.TopicID{} && [16]byte(req.TopicID) != [16]byte(t.ID)) {
		done(unknownPartition(req.Topic, req.Partition, t))
		return
	}
	key := shardKey(t.ID, req.Partition)
	rt, _ := d.route(key)
	if !hosts(t.Replicas[req.Partition], raftlite.NodeID(req.TargetNodeID)) {
		done(service.Errorf(service.ErrNotReplica, "node %d holds no replica of %s/%d (replicas %v)", req.TargetNodeID, t.Name, req.Partition, t.Replicas[req.Partition]))
		return
	}
	if !d.alive(req.TargetNodeID) {
		why := "is down"
		if d.draining != nil && d.draining(req.TargetNodeID) {
			why = "is draining (node undrain it first)"
		}
		done(service.Errorf(service.ErrNodeNotAvailable, "node %d %s", req.TargetNodeID, why))
		return
	}
	if rt.Leader <= 0 || !d.alive(rt.Leader) && (d.draining == nil || !d.draining(rt.Leader) || d.up == nil || !d.up(rt.Leader)) {
		done(service.Errorf(partition.ErrPrimaryNotAvailable, "%s/%d has no primary to move right now", t.Name, req.Partition))
		return
	}
	if rt.Leader == req.TargetNodeID {
		done(&wire.MovePrimaryResponse{PrimaryID: rt.Leader, Generation: rt.Term})
		return
	}
	if rt.InSync != nil && !containsID(rt.InSync, req.TargetNodeID) {
		done(service.Errorf(service.ErrNotInSyncReplica, "node %d is not an in-sync replica of %s/%d (in sync: %v)", req.TargetNodeID, t.Name, req.Partition, rt.InSync))
		return
	}
	if b.inFlight != nil {
		done(service.Errorf(service.ErrRebalanceInProgress, "a primary move (%s from node %d to node %d) is running", b.inFlight.Key, b.inFlight.From, b.inFlight.To))
		return
	}
	m := balance.Move{Key: t.Name + "/" + strconv.Itoa(int(req.Partition)), From: rt.Leader, To: req.TargetNodeID, Why: "requested by an operator"}
	err := b.start(m, func(err error) {
		if err != nil {
			done(err)
			return
		}
		rt, _ := d.route(key)
		done(&wire.MovePrimaryResponse{PrimaryID: rt.Leader, Generation: rt.Term})
	})
	if err != nil {
		done(service.Errorf(service.ErrInvalidRequest, "%v", err))
	}
}
