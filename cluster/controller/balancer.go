package controller

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/balance"
	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// The primary balancer runs on the metadata primary, on shard
// routes.MetaShard:
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

// BalancerDeps is what the balancer driver reads and does: it holds no
// pointer to the node or the controller, so the simulator runs the same
// driver over simulated routes, liveness, time and transfers.
type BalancerDeps struct {
	Clock clock.Clock
	// After arms a timer on the driver's owner (shard routes.MetaShard).
	After func(d time.Duration, fn func())
	Log   *slog.Logger
	// Roster lists every node id placement may use (it changes at run
	// time).
	Roster func() []int32
	// Alive is the liveness signal (a draining node counts as down);
	// Draining says which nodes are draining, for messages.
	Alive    func(id int32) bool
	Draining func(id int32) bool
	// Up is the liveness signal alone: an operator may move a primary
	// off a draining node that is up.
	Up func(id int32) bool
	// View is the applied metadata; Routes the route table.
	View   func() *routes.View
	Routes RouteReader
	// LastMovedMs is when the balancer last moved a partition (metadata).
	LastMovedMs func(topic string, p int32) int64
	// IsPrimary says this node leads the metadata group (only the
	// metadata primary moves primaries).
	IsPrimary func() bool
	// Transfer asks the primary of a partition (node from) to hand it to
	// node to.
	Transfer func(topicID [16]byte, p int32, from, to int32)
	// Propose records a finished move in the metadata (OpPrimaryMoved).
	Propose func(metadata.Command)
	// Stats and Rebalancing are what the metrics and ClusterStatus show.
	Stats       *BalanceStats
	Rebalancing *atomic.Bool
	// Every is the smaller of cluster.leader_balance_interval_ms and
	// cluster.leader_imbalance_check_interval_ms; Auto is
	// cluster.auto_leader_rebalance; ImbalancePercent is
	// cluster.leader_imbalance_percent (counts), PreferredPercent
	// cluster.leader_imbalance_percentage (preferred primaries);
	// MoveTimeout bounds one move.
	Every            time.Duration
	Auto             bool
	ImbalancePercent int
	PreferredPercent int
	MoveTimeout      time.Duration
}

// RouteReader is the route table as the drivers read it; *routes.Table
// is one.
type RouteReader interface {
	Get(key [20]byte) (routes.Route, bool)
}

// Balancer is the metadata primary's mover; owned by shard
// routes.MetaShard.
type Balancer struct {
	d        BalancerDeps
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

// NewBalancer starts the driver's loop: a step every d.Every, until
// stopped. REQUIRES: on shard routes.MetaShard.
func NewBalancer(d BalancerDeps, stopped func() bool) *Balancer {
	b := &Balancer{d: d, stopped: stopped}
	var loop func()
	loop = func() {
		if b.stopped() {
			return
		}
		if b.d.Auto || b.manual {
			b.step()
		}
		b.d.After(b.d.Every, loop)
	}
	b.d.After(b.d.Every, loop)
	return b
}

// View builds what balance.Next looks at. REQUIRES: on shard
// routes.MetaShard.
func (b *Balancer) View() *balance.View {
	d := &b.d
	v := &balance.View{MoveInFlight: b.inFlight != nil, NowMs: d.Clock.Now().UnixMilli(),
		ImbalancePercent: d.ImbalancePercent, MuteMs: balanceMuteMs,
		PreferredCheck: true, PreferredImbalancePercent: d.PreferredPercent, PreferredOnly: b.preferredOnly}
	if b.preferredOnly {
		v.PreferredImbalancePercent = 0 // on demand: every partition led away goes back
	}
	for _, id := range d.Roster() {
		v.Nodes = append(v.Nodes, balance.Node{ID: id, Alive: d.Alive(id)})
	}
	for _, t := range d.View().Sorted {
		for p, reps := range t.Replicas {
			bp := balance.Partition{Key: t.Name + "/" + strconv.Itoa(p), LastMovedMs: d.LastMovedMs(t.Name, int32(p))}
			for _, r := range reps {
				bp.Replicas = append(bp.Replicas, int32(r))
			}
			if rt, ok := d.Routes.Get(routes.Key(t.ID, int32(p))); ok && rt.Leader > 0 && d.Alive(rt.Leader) {
				bp.Primary = rt.Leader
				bp.InSync = rt.InSync
			}
			v.Partitions = append(v.Partitions, bp)
		}
	}
	return v
}

// step starts the next move if none runs and one is needed.
func (b *Balancer) step() {
	if b.inFlight != nil || !b.d.IsPrimary() {
		return
	}
	m, ok := balance.Next(b.View())
	if !ok {
		b.manual, b.preferredOnly = false, false
		b.d.Rebalancing.Store(false)
		return
	}
	b.d.Rebalancing.Store(true)
	if err := b.start(m, nil); err != nil {
		b.d.Log.Warn("primary move not started", "partition", m.Key, "from", m.From, "to", m.To, "err", err)
	}
}

// start begins move m (done, when set, learns the outcome).
func (b *Balancer) start(m balance.Move, done func(error)) error {
	t, p, err := b.partitionOf(m.Key)
	if err != nil {
		return err
	}
	now := b.d.Clock.Now()
	mv := &move{Move: m, topic: t, part: p, started: now, deadline: now.Add(b.d.MoveTimeout), done: done}
	b.inFlight = mv
	b.d.Stats.Started.Add(1)
	b.d.Log.Info("primary move started", "partition", m.Key, "from", m.From, "to", m.To, "why", m.Why)
	b.d.Transfer(t.ID, p, m.From, m.To)
	b.d.After(moveCheckEvery, func() { b.check(mv) })
	return nil
}

// check ends mv when its target leads, or fails it at its deadline.
func (b *Balancer) check(mv *move) {
	d := &b.d
	rt, _ := d.Routes.Get(routes.Key(mv.topic.ID, mv.part))
	now := d.Clock.Now()
	switch {
	case rt.Leader == mv.To:
		took := now.Sub(mv.started)
		d.Stats.Finished.Add(1)
		d.Log.Info("primary move finished", "partition", mv.Key, "from", mv.From, "to", mv.To, "why", mv.Why, "duration", took)
		b.finish(mv, nil)
		d.Propose(metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpPrimaryMoved, Name: mv.topic.Name,
			ID: mv.topic.ID, Partition: mv.part, AtMs: now.UnixMilli()})
	case now.After(mv.deadline):
		d.Stats.Failed.Add(1)
		d.Log.Warn("primary move failed", "partition", mv.Key, "from", mv.From, "to", mv.To, "why", mv.Why,
			"duration", now.Sub(mv.started), "primary_now", rt.Leader)
		b.finish(mv, service.Errorf(partition.ErrTimedOut, "moving %s's primary from node %d to node %d did not finish within %v (primary now %d)",
			mv.Key, mv.From, mv.To, d.MoveTimeout, rt.Leader))
	default:
		d.After(moveCheckEvery, func() { b.check(mv) })
	}
}

func (b *Balancer) finish(mv *move, err error) {
	b.inFlight = nil
	if mv.done != nil {
		mv.done(err)
	}
	if b.manual || b.d.Auto {
		b.d.After(nextMoveAfter, b.step)
	} else {
		b.d.Rebalancing.Store(false)
	}
}

func (b *Balancer) partitionOf(key string) (*metadata.Topic, int32, error) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			p, err := strconv.Atoi(key[i+1:])
			t := b.d.View().Topics[key[:i]]
			if err != nil || t == nil || p < 0 || p >= t.Partitions() {
				break
			}
			return t, int32(p), nil
		}
	}
	return nil, 0, fmt.Errorf("balancer: no partition %q", key)
}

// InFlight is the move running now (ok false: none). REQUIRES: on
// shard routes.MetaShard.
func (b *Balancer) InFlight() (m balance.Move, ok bool) {
	if b.inFlight == nil {
		return balance.Move{}, false
	}
	return b.inFlight.Move, true
}

// Rebalance answers a Rebalance request: the plan, and unless a dry run,
// the start of its moves (one at a time, in the background). REQUIRES:
// on shard routes.MetaShard.
func (b *Balancer) Rebalance(req *wire.RebalanceRequest, done func(any)) {
	if b.inFlight != nil && !req.DryRun {
		done(service.Errorf(service.ErrRebalanceInProgress, "a primary move (%s from node %d to node %d) is running", b.inFlight.Key, b.inFlight.From, b.inFlight.To))
		return
	}
	movesMax := int(req.MovesMax)
	if movesMax == 0 {
		movesMax = wire.PartitionsPerTopicMax
	}
	v := b.View()
	v.PreferredOnly, v.PreferredImbalancePercent = req.Preferred, b.d.PreferredPercent
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

// MovePrimary answers MovePrimary once the target leads (or fails).
// REQUIRES: on shard routes.MetaShard.
func (b *Balancer) MovePrimary(req *wire.MovePrimaryRequest, done func(any)) {
	d := &b.d
	t := d.View().Topics[req.Topic]
	if t == nil || req.Partition < 0 || int(req.Partition) >= t.Partitions() || (req.TopicID != wire.TopicID{} && [16]byte(req.TopicID) != [16]byte(t.ID)) {
		done(unknownPartition(req.Topic, req.Partition, t))
		return
	}
	key := routes.Key(t.ID, req.Partition)
	rt, _ := d.Routes.Get(key)
	if !slices.Contains(t.Replicas[req.Partition], metadata.NodeID(req.TargetNodeID)) {
		done(service.Errorf(service.ErrNotReplica, "node %d holds no replica of %s/%d (replicas %v)", req.TargetNodeID, t.Name, req.Partition, t.Replicas[req.Partition]))
		return
	}
	if !d.Alive(req.TargetNodeID) {
		why := "is down"
		if d.Draining != nil && d.Draining(req.TargetNodeID) {
			why = "is draining (node undrain it first)"
		}
		done(service.Errorf(service.ErrNodeNotAvailable, "node %d %s", req.TargetNodeID, why))
		return
	}
	if rt.Leader <= 0 || !d.Alive(rt.Leader) && (d.Draining == nil || !d.Draining(rt.Leader) || d.Up == nil || !d.Up(rt.Leader)) {
		done(service.Errorf(partition.ErrPrimaryNotAvailable, "%s/%d has no primary to move right now", t.Name, req.Partition))
		return
	}
	if rt.Leader == req.TargetNodeID {
		done(&wire.MovePrimaryResponse{PrimaryID: rt.Leader, Generation: rt.Term})
		return
	}
	if rt.InSync != nil && !slices.Contains(rt.InSync, req.TargetNodeID) {
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
		rt, _ := d.Routes.Get(key)
		done(&wire.MovePrimaryResponse{PrimaryID: rt.Leader, Generation: rt.Term})
	})
	if err != nil {
		done(service.Errorf(service.ErrInvalidRequest, "%v", err))
	}
}

// unknownPartition says which of name and p does not exist.
func unknownPartition(name string, p int32, t *metadata.Topic) error {
	if t == nil {
		return service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q has partitions 0..%d, not %d", name, t.Partitions()-1, p)
}
