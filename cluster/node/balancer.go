package node

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/balance"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard"
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

// balancer is the metadata primary's mover; owned by shard metaShard.
type balancer struct {
	c        *controller
	inFlight *move
	// manual keeps moving until balanced after a Rebalance request, even
	// with auto_leader_rebalance off.
	manual bool
	// preferredOnly: the manual rebalance asked only for preferred
	// primaries back (rebalance --preferred).
	preferredOnly bool
	timer         *shard.Timer
}

func (c *controller) startBalancer() {
	b := &balancer{c: c}
	c.bal = b
	every := time.Duration(min(c.n.cfg.Cluster.LeaderBalanceIntervalMs, c.n.cfg.Cluster.LeaderImbalanceCheckIntervalMs)) * time.Millisecond
	var loop func()
	loop = func() {
		if c.n.stopped.Load() {
			return
		}
		if c.n.cfg.Cluster.AutoLeaderRebalance || b.manual {
			b.step()
		}
		c.sh.Reset(b.timer, every)
	}
	b.timer = c.sh.AfterFunc(every, loop)
}

// view builds what balance.Next looks at.
func (b *balancer) view() *balance.View {
	n := b.c.n
	v := &balance.View{MoveInFlight: b.inFlight != nil, NowMs: time.Now().UnixMilli(),
		ImbalancePercent: n.cfg.Cluster.LeaderImbalancePercent, MuteMs: balanceMuteMs,
		PreferredCheck: true, PreferredImbalancePercent: n.cfg.Cluster.LeaderImbalancePercentage, PreferredOnly: b.preferredOnly}
	if b.preferredOnly {
		v.PreferredImbalancePercent = 0 // on demand: every partition led away goes back
	}
	for _, m := range n.roster {
		v.Nodes = append(v.Nodes, balance.Node{ID: int32(m.ID), Alive: n.alive(int32(m.ID))})
	}
	for _, t := range n.view.Load().Sorted {
		for p, reps := range t.Replicas {
			bp := balance.Partition{Key: t.Name + "/" + strconv.Itoa(p), LastMovedMs: b.c.state.LastMovedMs(t.Name, int32(p))}
			for _, r := range reps {
				bp.Replicas = append(bp.Replicas, int32(r))
			}
			if rt, ok := n.routes.get(shardKey(t.ID, int32(p))); ok && rt.leader > 0 && n.alive(rt.leader) {
				bp.Primary = rt.leader
				bp.InSync = rt.inSync
			}
			v.Partitions = append(v.Partitions, bp)
		}
	}
	return v
}

// step starts the next move if none runs and one is needed.
func (b *balancer) step() {
	if b.inFlight != nil || !b.c.r.IsPrimary() {
		return
	}
	m, ok := balance.Next(b.view())
	if !ok {
		b.manual, b.preferredOnly = false, false
		b.c.n.rebalancing.Store(false)
		return
	}
	b.c.n.rebalancing.Store(true)
	if err := b.start(m, nil); err != nil {
		b.c.n.log.Warn("primary move not started", "partition", m.Key, "from", m.From, "to", m.To, "err", err)
	}
}

// start begins move m (done, when set, learns the outcome).
func (b *balancer) start(m balance.Move, done func(error)) error {
	n := b.c.n
	t, p, err := b.partitionOf(m.Key)
	if err != nil {
		return err
	}
	mv := &move{Move: m, topic: t, part: p, started: time.Now(), deadline: time.Now().Add(n.moveTimeout()), done: done}
	b.inFlight = mv
	n.balanceStats.Started.Add(1)
	n.log.Info("primary move started", "partition", m.Key, "from", m.From, "to", m.To, "why", m.Why)
	n.requestTransfer(t.ID, p, m.From, m.To)
	b.c.sh.AfterFunc(moveCheckEvery, func() { b.check(mv) })
	return nil
}

// check ends mv when its target leads, or fails it at its deadline.
func (b *balancer) check(mv *move) {
	n := b.c.n
	rt, _ := n.routes.get(shardKey(mv.topic.ID, mv.part))
	switch {
	case rt.leader == mv.To:
		d := time.Since(mv.started)
		n.balanceStats.Finished.Add(1)
		n.log.Info("primary move finished", "partition", mv.Key, "from", mv.From, "to", mv.To, "why", mv.Why, "duration", d)
		b.finish(mv, nil)
		cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpPrimaryMoved, Name: mv.topic.Name,
			ID: mv.topic.ID, Partition: mv.part, AtMs: time.Now().UnixMilli()}
		b.c.propose(cmd, adminTimeoutDefault, func(metadata.Result, error) {})
	case time.Now().After(mv.deadline):
		n.balanceStats.Failed.Add(1)
		n.log.Warn("primary move failed", "partition", mv.Key, "from", mv.From, "to", mv.To, "why", mv.Why,
			"duration", time.Since(mv.started), "primary_now", rt.leader)
		b.finish(mv, wire.Errorf(wire.ErrRequestTimedOut, "moving %s's primary from node %d to node %d did not finish within %v (primary now %d)",
			mv.Key, mv.From, mv.To, n.moveTimeout(), rt.leader))
	default:
		b.c.sh.AfterFunc(moveCheckEvery, func() { b.check(mv) })
	}
}

func (b *balancer) finish(mv *move, err error) {
	b.inFlight = nil
	if mv.done != nil {
		mv.done(err)
	}
	if b.manual || b.c.n.cfg.Cluster.AutoLeaderRebalance {
		b.c.sh.AfterFunc(nextMoveAfter, b.step)
	} else {
		b.c.n.rebalancing.Store(false)
	}
}

func (b *balancer) partitionOf(key string) (*metadata.Topic, int32, error) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			p, err := strconv.Atoi(key[i+1:])
			t := b.c.n.view.Load().Topics[key[:i]]
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

// requestTransfer asks the primary of partition p (node from) to hand
// leadership to node to: locally, or over the peer's link 0.
func (n *Node) requestTransfer(topicID [16]byte, p int32, from, to int32) {
	if from == int32(n.self) {
		n.transferLocal(topicID, p, to)
		return
	}
	if n.peers == nil {
		return
	}
	ps := n.peers.shards[n.peers.linkShard(0)]
	body := peerwire.AppendTransfer(nil, peerwire.Transfer{TopicID: topicID, Partition: p, Target: to})
	send := func() { ps.sendFrame(linkKey{peer: from, k: 0}, body) }
	if ps.sh == n.group.Shard(metaShard) {
		send()
		return
	}
	ps.sh.Post(send)
}

// transferLocal starts a leadership transfer on the local primary.
func (n *Node) transferLocal(topicID [16]byte, p int32, to int32) {
	key := shardKey(topicID, p)
	sh := n.group.Shard(n.shardOf(topicID, p))
	sh.Post(func() {
		r := n.hosts[sh.ID()].Get(key)
		if r == nil {
			return
		}
		if err := r.TransferLeadership(raftlite.NodeID(to)); err != nil && !errors.Is(err, partition.ErrClosed) {
			n.log.Warn("leadership transfer refused", "topic", r.Config().Topic, "partition", p, "to", to, "err", err)
		}
	})
}

// rebalance answers a Rebalance request: the plan, and unless a dry run,
// the start of its moves (one at a time, in the background).
func (c *controller) rebalance(req *wire.RebalanceRequest, done func(any)) {
	b := c.bal
	if b.inFlight != nil && !req.DryRun {
		done(wire.Errorf(wire.ErrRebalanceInProgress, "a primary move (%s from node %d to node %d) is running", b.inFlight.Key, b.inFlight.From, b.inFlight.To))
		return
	}
	movesMax := int(req.MovesMax)
	if movesMax == 0 {
		movesMax = wire.PartitionsPerTopicMax
	}
	v := b.view()
	v.PreferredOnly, v.PreferredImbalancePercent = req.Preferred, c.n.cfg.Cluster.LeaderImbalancePercentage
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
	n := c.n
	t := n.view.Load().Topics[req.Topic]
	if t == nil || req.Partition < 0 || int(req.Partition) >= t.Partitions() || (req.TopicID != wire.TopicID{} && [16]byte(req.TopicID) != [16]byte(t.ID)) {
		done(unknownPartition(req.Topic, req.Partition, t))
		return
	}
	key := shardKey(t.ID, req.Partition)
	rt, _ := n.routes.get(key)
	if !hosts(t.Replicas[req.Partition], raftlite.NodeID(req.TargetNodeID)) {
		done(wire.Errorf(wire.ErrNotReplica, "node %d holds no replica of %s/%d (replicas %v)", req.TargetNodeID, t.Name, req.Partition, t.Replicas[req.Partition]))
		return
	}
	if !n.alive(req.TargetNodeID) {
		done(wire.Errorf(wire.ErrNodeNotAvailable, "node %d is down", req.TargetNodeID))
		return
	}
	if rt.leader <= 0 || !n.alive(rt.leader) {
		done(wire.Errorf(wire.ErrPrimaryNotAvailable, "%s/%d has no primary to move right now", t.Name, req.Partition))
		return
	}
	if rt.leader == req.TargetNodeID {
		done(&wire.MovePrimaryResponse{PrimaryID: rt.leader, Generation: rt.term})
		return
	}
	if rt.inSync != nil && !containsID(rt.inSync, req.TargetNodeID) {
		done(wire.Errorf(wire.ErrNotInSyncReplica, "node %d is not an in-sync replica of %s/%d (in sync: %v)", req.TargetNodeID, t.Name, req.Partition, rt.inSync))
		return
	}
	if b.inFlight != nil {
		done(wire.Errorf(wire.ErrRebalanceInProgress, "a primary move (%s from node %d to node %d) is running", b.inFlight.Key, b.inFlight.From, b.inFlight.To))
		return
	}
	m := balance.Move{Key: t.Name + "/" + strconv.Itoa(int(req.Partition)), From: rt.leader, To: req.TargetNodeID, Why: "requested by an operator"}
	err := b.start(m, func(err error) {
		if err != nil {
			done(err)
			return
		}
		rt, _ := n.routes.get(key)
		done(&wire.MovePrimaryResponse{PrimaryID: rt.leader, Generation: rt.term})
	})
	if err != nil {
		done(wire.Errorf(wire.ErrInvalidRequest, "%v", err))
	}
}
