package node

import (
	"fmt"
	"github.com/corestream/corestream/cluster/routes"
	"log/slog"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard/partition"
)

// Replica reassignment (issue 16; docs/design/consensus.md, "Wiring").
//
// A move is a metadata command (metadata.OpReassignStart) that records the
// target list beside the current one. The reassigner, on the metadata
// primary like the balancer driver, asks each moving partition's primary,
// every reassignCheckEvery, for the next membership step towards the
// target (peerwire.Reassign); the primary takes it (reassignNext: add a
// learner, promote it once caught up, remove an old member) and answers
// with its configuration and the learner's lag (peerwire.ReassignState).
// The reassigner records each step it sees as a metadata command, for the
// operator, and completes the move (the replica list becomes the target)
// once the committed configuration holds exactly the target's voters.
//
// Everything the reassigner decides is read again from the metadata and
// the partition's own configuration, so a new metadata primary resumes a
// move where it stands, and a new partition primary (which reads its
// configuration from its log) continues it. The group changes one member
// at a time and adds before it removes: it never has fewer voters than
// the topic's factor. The reconciler opens the replica on a target node
// as a learner, and closes an old node's replica only once the move
// completed, which is after its removal committed.

// Bounds of the reassigner.
const (
	// reassignCheckEvery is how often the reassigner asks each moving
	// partition's primary for its next step.
	reassignCheckEvery = 200 * time.Millisecond
	// reassignPromoteWait is how long a primary waits for a learner's
	// acknowledgement to reach the commit before it gives up a promotion
	// (the next ask proposes it again).
	reassignPromoteWait = 5 * time.Second
)

// reassignNext is the next membership change that brings conf towards
// target, one member at a time, adding before removing; ok false when
// none is due: conf is the target, or a change waits for its commit. An
// old member to remove is another node before the primary (self), which
// is removed last and hands over itself. Pure.
func reassignNext(conf raftlite.Membership, committed bool, target raftlite.ReplicaSet, self raftlite.NodeID) (raftlite.ConfChange, bool) {
	if !committed || conf.IsZero() {
		return raftlite.ConfChange{}, false
	}
	for _, id := range conf.Learners.IDs() {
		if target.Has(id) {
			return raftlite.ConfChange{Type: raftlite.ConfPromote, Node: id}, true
		}
		return raftlite.ConfChange{Type: raftlite.ConfRemove, Node: id}, true // a cancelled move's learner
	}
	if conf.Voters.Len() <= target.Len() {
		for _, id := range target.IDs() {
			if !conf.Voters.Has(id) {
				return raftlite.ConfChange{Type: raftlite.ConfAddLearner, Node: id}, true
			}
		}
	}
	removeSelf := false
	for _, id := range conf.Voters.IDs() {
		if target.Has(id) {
			continue
		}
		if id == self {
			removeSelf = true
			continue
		}
		return raftlite.ConfChange{Type: raftlite.ConfRemove, Node: id}, true
	}
	if removeSelf {
		return raftlite.ConfChange{Type: raftlite.ConfRemove, Node: self}, true
	}
	return raftlite.ConfChange{}, false
}

// movedOff forgets a replica that a move took off this node: its group
// and its lag state, but not its route, which this node goes on serving
// to clients (a dropped route would answer PRIMARY_NOT_AVAILABLE until
// the partition's primary changed again).
func (n *Node) movedOff(key [20]byte) {
	if n.peers != nil {
		n.peers.closed(partition.GroupID(key))
	}
	n.router.Lags.Drop(key)
}

// reassignObserved hands a partition primary's answer to the local
// reassigner. Runs on any goroutine.
func (n *Node) reassignObserved(st peerwire.ReassignState) {
	n.group.Shard(metaShard).Post(func() {
		if c := n.ctrl; c != nil && c.reas != nil {
			c.reas.observe(st)
		}
	})
}

// requestReassign sends m to node to over link 0. REQUIRES: on shard
// metaShard, which owns link 0.
func (p *peers) requestReassign(to int32, m peerwire.Reassign) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendReassign(nil, m))
}

// answerReassign sends st to node to over link 0. REQUIRES: on shard
// metaShard.
func (p *peers) answerReassign(to int32, st peerwire.ReassignState) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendReassignState(nil, st))
}

// receiveReassign decodes a Reassign or ReassignState frame from a peer.
func (p *peers) receiveReassign(from int32, body []byte) {
	if body[0] == peerwire.KindReassign {
		m, err := peerwire.DecodeReassign(body)
		if err != nil || m.From != from {
			p.d.log.Error("replication: bad reassign", "peer", from, "err", err, "from", m.From)
			return
		}
		p.d.reassign(m)
		return
	}
	st, err := peerwire.DecodeReassignState(body)
	if err != nil {
		p.d.log.Error("replication: bad reassign state", "peer", from, "err", err)
		return
	}
	p.d.reassignState(st)
}

// reassignDeps is what the reassigner reads and does.
type reassignDeps struct {
	clock clock.Clock
	// after arms a timer on shard metaShard.
	after func(d time.Duration, fn func())
	log   *slog.Logger
	self  int32
	// view is the applied metadata; route the route table.
	view  func() *View
	route func(key [20]byte) (routes.Route, bool)
	// isPrimary says this node leads the metadata group.
	isPrimary func() bool
	// ask sends a step request to a partition's primary (this node
	// included).
	ask func(to int32, m peerwire.Reassign)
	// propose records a step or the completion; done learns the outcome.
	propose func(cmd metadata.Command, done func(error))
	// concurrency is cluster.reassign_concurrency: how many moves are
	// driven at once (the others wait, in topic and partition order).
	concurrency int
	stopped     func() bool
	// roster, racks and alive are the nodes a drain may move replicas
	// to (the roster's active members, read when used: it changes at run
	// time); transfer asks a partition's primary (node from) to hand it
	// to node to (reassign_drain.go).
	roster   func() []int32
	racks    func() map[int32]string
	alive    func(id int32) bool
	transfer func(topicID [16]byte, p int32, from, to int32)
}

// reassignProgress is the latest answer of a moving partition's primary.
type reassignProgress struct {
	state peerwire.ReassignState
	at    time.Time
	// moved sums how far the learners' lag shrank between answers;
	// rateBps is its recent rate (bytes/s, smoothed; 0: unknown).
	moved   int64
	rateBps float64
}

// reassignRateWeight is the weight of the newest sample in the smoothed
// catch-up rate.
const reassignRateWeight = 0.3

// next is p updated with the answer st received at now.
func (p reassignProgress) next(st peerwire.ReassignState, now time.Time) reassignProgress {
	out := reassignProgress{state: st, at: now, moved: p.moved, rateBps: p.rateBps}
	if p.at.IsZero() {
		return out
	}
	d := p.state.BytesBehind - st.BytesBehind
	dt := now.Sub(p.at).Seconds()
	if d > 0 {
		out.moved += d
	}
	if dt > 0 && st.BytesBehind > 0 {
		inst := float64(max(d, 0)) / dt
		if out.rateBps == 0 {
			out.rateBps = inst
		} else {
			out.rateBps = reassignRateWeight*inst + (1-reassignRateWeight)*out.rateBps
		}
	}
	return out
}

// etaMs is the time left for the current learner at the recent rate: 0
// when it is caught up, -1 when no rate is known yet.
func (p reassignProgress) etaMs() int64 {
	switch {
	case p.state.BytesBehind <= 0:
		return 0
	case p.rateBps <= 0:
		return -1
	}
	return int64(float64(p.state.BytesBehind) / p.rateBps * 1000)
}

// reassigner drives the moves recorded in the metadata; owned by shard
// metaShard.
type reassigner struct {
	d reassignDeps
	// progress holds each driven move's latest answer (for the operator);
	// proposing the moves with a metadata command in flight (propose
	// answers every command, at the latest at its timeout).
	progress  map[[20]byte]reassignProgress
	proposing map[[20]byte]bool
	// seen is when this node first drove each move (to log its duration).
	seen map[[20]byte]time.Time
	// drainSeen is when this node first drove each drain; transferred
	// when it last asked for a partition's primary to leave a draining
	// node; starting says a drain's move start is in flight
	// (reassign_drain.go).
	drainSeen   map[int32]time.Time
	transferred map[[20]byte]time.Time
	starting    bool
}

func newReassigner(d reassignDeps) *reassigner {
	ra := &reassigner{d: d, progress: map[[20]byte]reassignProgress{}, proposing: map[[20]byte]bool{}, seen: map[[20]byte]time.Time{},
		drainSeen: map[int32]time.Time{}, transferred: map[[20]byte]time.Time{}}
	var loop func()
	loop = func() {
		if ra.d.stopped() {
			return
		}
		ra.step()
		ra.d.after(reassignCheckEvery, loop)
	}
	ra.d.after(reassignCheckEvery, loop)
	return ra
}

// startReassigner wires controller c's reassigner to the node's parts.
// REQUIRES: on shard metaShard, with c the started controller.
func (n *Node) startReassigner(c *controller) {
	c.reas = newReassigner(reassignDeps{
		clock: n.clock,
		after: func(d time.Duration, fn func()) { c.sh.AfterFunc(d, fn) },
		log:   n.log, self: int32(n.self),
		view: n.view.Load, route: n.routes.Get,
		isPrimary: func() bool { return c.r.IsPrimary() },
		ask: func(to int32, m peerwire.Reassign) {
			if to == int32(n.self) {
				n.replicas.reassign(m)
			} else if n.peers != nil {
				n.peers.requestReassign(to, m)
			}
		},
		propose: func(cmd metadata.Command, done func(error)) {
			c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) { done(err) })
		},
		concurrency: max(1, n.cfg.Cluster.ReassignConcurrency),
		stopped:     n.stopped.Load,
		roster:      func() []int32 { return rosterIDs(n.roster.active()) },
		racks:       func() map[int32]string { return racksOf(n.roster.active()) },
		alive:       n.alive,
		transfer:    n.replicas.requestTransfer,
	})
}

// driven returns the moves driven now: the first concurrency of them.
func (ra *reassigner) driven(v *View) []*metadata.Reassignment {
	moves := v.Moves
	if len(moves) > ra.d.concurrency {
		moves = moves[:ra.d.concurrency]
	}
	return moves
}

// step asks the primary of every driven move for its next step.
func (ra *reassigner) step() {
	if !ra.d.isPrimary() {
		clear(ra.progress)
		clear(ra.seen)
		clear(ra.drainSeen)
		clear(ra.transferred)
		return
	}
	v := ra.d.view()
	now := ra.d.clock.Now()
	// Forget moves that ended (bounded by the moves recorded).
	for k := range ra.seen {
		if v.Moving[k] == nil {
			delete(ra.progress, k)
			delete(ra.seen, k)
			delete(ra.proposing, k)
		}
	}
	for _, mv := range ra.driven(v) {
		key := shardKey(mv.TopicID, mv.Partition)
		if _, ok := ra.seen[key]; !ok {
			ra.seen[key] = now
			ra.d.log.Info("replica move driven", "topic", mv.Topic, "partition", mv.Partition, "from", mv.From, "to", mv.Target, "cancelled", mv.Cancelled)
		}
		rt, ok := ra.d.route(key)
		if !ok || rt.Leader <= 0 {
			continue
		}
		ra.d.ask(rt.Leader, peerwire.Reassign{TopicID: mv.TopicID, Partition: mv.Partition, From: ra.d.self, Target: replicaSet(mv.Target)})
	}
	ra.planDrains(v, now)
}

func replicaSet(ids []metadata.NodeID) raftlite.ReplicaSet {
	var s raftlite.ReplicaSet
	for _, id := range ids {
		s = s.Add(raftlite.NodeID(id))
	}
	return s
}

// observe records what a partition primary answered: the steps it shows
// that the metadata lacks, one command at a time, and the completion.
func (ra *reassigner) observe(st peerwire.ReassignState) {
	if !ra.d.isPrimary() {
		return
	}
	key := shardKey(st.TopicID, st.Partition)
	mv := ra.d.view().Moving[key]
	if mv == nil {
		return
	}
	now := ra.d.clock.Now()
	ra.progress[key] = ra.progress[key].next(st, now)
	if ra.proposing[key] {
		return
	}
	cmd, ok := reassignRecord(mv, st)
	if !ok {
		return
	}
	cmd.AtMs = now.UnixMilli()
	ra.proposing[key] = true
	ra.d.propose(cmd, func(err error) {
		delete(ra.proposing, key)
		if err != nil {
			ra.d.log.Warn("replica move not recorded", "topic", mv.Topic, "partition", mv.Partition, "op", cmd.Op, "step", cmd.Step, "node", cmd.Node, "err", err)
			return
		}
		if cmd.Op == metadata.OpReassignComplete {
			took := ra.d.clock.Now().Sub(ra.seen[key])
			ra.d.log.Info("replica move finished", "topic", mv.Topic, "partition", mv.Partition, "from", mv.From, "to", mv.Target,
				"cancelled", mv.Cancelled, "duration", took)
		}
	})
}

// reassignRecord is the metadata command that records what st shows of
// move mv and the metadata lacks: a step, or the completion once the
// committed configuration is the target's voters alone. Pure.
func reassignRecord(mv *metadata.Reassignment, st peerwire.ReassignState) (metadata.Command, bool) {
	recorded := func(step string, id raftlite.NodeID) bool {
		for _, s := range mv.Steps {
			if s.Step == step && raftlite.NodeID(s.Node) == id {
				return true
			}
		}
		return false
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpReassignStep, Name: mv.Topic, ID: mv.TopicID, Partition: mv.Partition}
	from := replicaSet(mv.From)
	for _, id := range st.Conf.Learners.IDs() {
		if !recorded(metadata.StepLearnerAdded, id) {
			cmd.Step, cmd.Node = metadata.StepLearnerAdded, metadata.NodeID(id)
			return cmd, true
		}
	}
	for _, id := range st.Conf.Voters.IDs() {
		if !from.Has(id) && !recorded(metadata.StepPromoted, id) {
			cmd.Step, cmd.Node = metadata.StepPromoted, metadata.NodeID(id)
			return cmd, true
		}
	}
	for _, id := range from.IDs() {
		if !st.Conf.Members().Has(id) && !recorded(metadata.StepRemoved, id) {
			cmd.Step, cmd.Node = metadata.StepRemoved, metadata.NodeID(id)
			return cmd, true
		}
	}
	if st.Committed && st.Conf.Learners == 0 && st.Conf.Voters == replicaSet(mv.Target) {
		cmd.Op, cmd.Target = metadata.OpReassignComplete, mv.Target
		return cmd, true
	}
	return metadata.Command{}, false
}

// reassignPartition starts a move of partition p of topic to target (the
// preferred primary first), or with dryRun only checks it; done learns
// the outcome (nil once the move is recorded: it runs in the background).
// REQUIRES: on shard metaShard.
func (c *controller) reassignPartition(topic string, p int32, target []metadata.NodeID, throttleBps int64, dryRun bool, done func(error)) {
	t := c.state.Topic(topic)
	if t == nil {
		done(metaKindErr(fmt.Errorf("%w: %q does not exist", metadata.ErrUnknownTopic, topic)))
		return
	}
	roster, _ := c.rosterIDs()
	if err := metadata.CheckReassignment(t, p, target, roster); err != nil {
		done(metaKindErr(err))
		return
	}
	if mv := c.state.Reassignment(topic, p); mv != nil {
		done(metaKindErr(fmt.Errorf("%w: %s/%d is moving from %v to %v", metadata.ErrReassignmentInProgress, topic, p, mv.From, mv.Target)))
		return
	}
	if dryRun {
		done(nil)
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpReassignStart, Name: t.Name, ID: t.ID, Partition: p,
		Target: target, Roster: roster, AtMs: c.d.clock.Now().UnixMilli(), ThrottleBytesPerSecond: throttleBps}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		if err != nil {
			err = metaKindErr(err)
		}
		done(err)
	})
}

// cancelReassign turns the move of partition p of topic back to the
// replicas it started from. REQUIRES: on shard metaShard.
func (c *controller) cancelReassign(topic string, p int32, done func(error)) {
	t := c.state.Topic(topic)
	if t == nil || c.state.Reassignment(topic, p) == nil {
		done(metaKindErr(fmt.Errorf("%w: %s/%d", metadata.ErrNoReassignment, topic, p)))
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpReassignCancel, Name: t.Name, ID: t.ID, Partition: p}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		if err != nil {
			err = metaKindErr(err)
		}
		done(err)
	})
}

// ReassignStatus is one move as the operator sees it.
type ReassignStatus struct {
	Topic     string
	Partition int32
	From      []int32
	Target    []int32
	Cancelled bool
	// Steps lists the recorded steps as "learner_added 4".
	Steps []string
	// EntriesBehind and BytesBehind are the learner's lag at the last
	// answer of the partition's primary (0: no learner, or not driven
	// yet); Driven says the move is among the cluster.reassign_concurrency
	// driven now.
	EntriesBehind, BytesBehind int64
	Driven                     bool
	// BytesMoved and EtaMs: see reassignProgress (EtaMs -1: unknown).
	BytesMoved, EtaMs int64
}

// reassignments lists the moves in progress. REQUIRES: on shard
// metaShard.
func (c *controller) reassignments() []ReassignStatus {
	v := c.d.view()
	driven := map[[20]byte]bool{}
	if c.reas != nil {
		for _, mv := range c.reas.driven(v) {
			driven[shardKey(mv.TopicID, mv.Partition)] = true
		}
	}
	var out []ReassignStatus
	for _, mv := range c.state.Reassignments() {
		key := shardKey(mv.TopicID, mv.Partition)
		st := ReassignStatus{Topic: mv.Topic, Partition: mv.Partition, From: int32s(mv.From), Target: int32s(mv.Target),
			Cancelled: mv.Cancelled, Driven: driven[key]}
		for _, s := range mv.Steps {
			st.Steps = append(st.Steps, fmt.Sprintf("%s %d", s.Step, s.Node))
		}
		if c.reas != nil {
			if pr, ok := c.reas.progress[key]; ok {
				st.EntriesBehind, st.BytesBehind = pr.state.EntriesBehind, pr.state.BytesBehind
				st.BytesMoved, st.EtaMs = pr.moved, pr.etaMs()
			} else {
				st.EtaMs = -1
			}
		}
		out = append(out, st)
	}
	return out
}

func int32s(ids []metadata.NodeID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// svcReassign answers the service's Reassign. A start checks every move
// of the plan (and that it names no partition twice) before it records
// any, then records them one after another; a failure part way (the
// metadata primary lost its role) answers the error, and the moves
// recorded before it run. REQUIRES: on shard metaShard.
func (c *controller) svcReassign(req *service.ReassignRequest, done func(service.ReassignResult, error)) {
	switch req.Action {
	case service.ReassignList:
		done(service.ReassignResult{Moves: statuses(c.reassignments()), Drains: c.drainStatuses()}, nil)
		return
	case service.ReassignDrain, service.ReassignUndrain, service.ReassignReplace:
		c.svcDrain(req, done)
		return
	case service.ReassignStart, service.ReassignCancel:
	default:
		done(service.ReassignResult{}, service.Errorf(service.ErrInvalidRequest, "reassign action %d is not start, cancel, list, drain, undrain or replace", req.Action))
		return
	}
	if req.ThrottleBytesPerSecond < 0 {
		done(service.ReassignResult{}, service.Errorf(service.ErrInvalidRequest, "throttle %d bytes/s is negative", req.ThrottleBytesPerSecond))
		return
	}
	if len(req.Moves) == 0 {
		done(service.ReassignResult{}, service.Errorf(service.ErrInvalidRequest, "the plan names no partition"))
		return
	}
	seen := map[metadata.OffsetKey]bool{}
	targets := make([][]metadata.NodeID, len(req.Moves))
	for i, m := range req.Moves {
		k := metadata.OffsetKey{Topic: m.Topic, Partition: m.Partition}
		if seen[k] {
			done(service.ReassignResult{}, service.Errorf(service.ErrInvalidRequest, "the plan names %s/%d twice", m.Topic, m.Partition))
			return
		}
		seen[k] = true
		for _, id := range m.Replicas {
			targets[i] = append(targets[i], metadata.NodeID(id))
		}
	}
	var res service.ReassignResult
	var run func(i int, dryRun bool)
	run = func(i int, dryRun bool) {
		if i == len(req.Moves) {
			if dryRun && !req.DryRun {
				res.Moves = nil
				run(0, false) // checked whole: now record them
				return
			}
			done(res, nil)
			return
		}
		m := req.Moves[i]
		next := func(err error) {
			if err != nil {
				done(service.ReassignResult{}, err)
				return
			}
			st := service.ReassignStatus{Topic: m.Topic, Partition: m.Partition, Target: m.Replicas}
			if t := c.state.Topic(m.Topic); t != nil && int(m.Partition) < t.Partitions() && m.Partition >= 0 {
				st.From = int32s(t.Replicas[m.Partition])
			}
			if mv := c.state.Reassignment(m.Topic, m.Partition); mv != nil {
				st.From, st.Target, st.Cancelled = int32s(mv.From), int32s(mv.Target), mv.Cancelled
			}
			res.Moves = append(res.Moves, st)
			if dryRun {
				run(i+1, dryRun)
				return
			}
			run(i+1, dryRun)
		}
		switch {
		case req.Action == service.ReassignCancel && dryRun:
			if c.state.Reassignment(m.Topic, m.Partition) == nil {
				next(metaKindErr(fmt.Errorf("%w: %s/%d", metadata.ErrNoReassignment, m.Topic, m.Partition)))
				return
			}
			next(nil)
		case req.Action == service.ReassignCancel:
			c.cancelReassign(m.Topic, m.Partition, next)
		default:
			c.reassignPartition(m.Topic, m.Partition, targets[i], req.ThrottleBytesPerSecond, dryRun, next)
		}
	}
	run(0, true)
}

func statuses(in []ReassignStatus) []service.ReassignStatus {
	out := make([]service.ReassignStatus, len(in))
	for i, s := range in {
		out[i] = service.ReassignStatus{Topic: s.Topic, Partition: s.Partition, From: s.From, Target: s.Target, Cancelled: s.Cancelled,
			Driven: s.Driven, EntriesBehind: s.EntriesBehind, BytesBehind: s.BytesBehind, Steps: s.Steps, BytesMoved: s.BytesMoved, EtaMs: s.EtaMs}
	}
	return out
}
