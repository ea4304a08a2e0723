package controller

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
)

// Replica reassignment (issue 16; docs/design/consensus.md, "Wiring").
//
// A move is a metadata command (metadata.OpReassignStart) that records the
// target list beside the current one. The reassigner, on the metadata
// primary like the balancer driver, asks each moving partition's primary,
// every reassignCheckEvery, for the next membership step towards the
// target (peerwire.Reassign); the primary takes it (ReassignNext: add a
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
	// ReassignPromoteWait is how long a primary waits for a learner's
	// acknowledgement to reach the commit before it gives up a promotion
	// (the next ask proposes it again).
	ReassignPromoteWait = 5 * time.Second
)

// ReassignNext is the next membership change that brings conf towards
// target, one member at a time, adding before removing; ok false when
// none is due: conf is the target, or a change waits for its commit. An
// old member to remove is another node before the primary (self), which
// is removed last and hands over itself. Pure.
func ReassignNext(conf raftlite.Membership, committed bool, target raftlite.ReplicaSet, self raftlite.NodeID) (raftlite.ConfChange, bool) {
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

// ProposeTimeout bounds a command the drivers propose (the admin calls'
// default bound).
const ProposeTimeout = 30 * time.Second

// Metadata is the controller's core as the reassigner reaches it: the
// applied state, whether this node leads the metadata group, and the
// proposal of a command. Every method runs on shard routes.MetaShard.
type Metadata interface {
	// State is the applied state; it is replaced when a snapshot is
	// installed, so it is read again at each use.
	State() *metadata.State
	IsPrimary() bool
	// Propose proposes cmd; done learns the outcome on shard
	// routes.MetaShard, at the latest at timeout.
	Propose(cmd metadata.Command, timeout time.Duration, done func(metadata.Result, error))
}

// ReassignDeps is what the reassigner reads and does.
type ReassignDeps struct {
	Clock clock.Clock
	// After arms a timer on shard routes.MetaShard.
	After func(d time.Duration, fn func())
	Log   *slog.Logger
	Self  int32
	// View is the applied metadata; Routes the route table.
	View   func() *routes.View
	Routes RouteReader
	// Meta is the controller's core: the state moves are checked
	// against, the metadata primary's role, and the proposal of the
	// moves' starts, steps and completions.
	Meta Metadata
	// Ask sends a step request to a partition's primary (this node
	// included).
	Ask func(to int32, m peerwire.Reassign)
	// Concurrency is cluster.reassign_concurrency: how many moves are
	// driven at once (the others wait, in topic and partition order).
	Concurrency int
	Stopped     func() bool
	// Roster, Racks and Alive are the nodes a drain may move replicas
	// to (the roster's active members, read when used: it changes at run
	// time); Transfer asks a partition's primary (node from) to hand it
	// to node to (reassign_drain.go).
	Roster   func() []int32
	Racks    func() map[int32]string
	Alive    func(id int32) bool
	Transfer func(topicID [16]byte, p int32, from, to int32)
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

// Reassigner drives the moves recorded in the metadata; owned by shard
// routes.MetaShard.
type Reassigner struct {
	d ReassignDeps
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

// NewReassigner starts the driver's loop: a look every
// reassignCheckEvery, until d.Stopped. REQUIRES: on shard
// routes.MetaShard.
func NewReassigner(d ReassignDeps) *Reassigner {
	ra := &Reassigner{d: d, progress: map[[20]byte]reassignProgress{}, proposing: map[[20]byte]bool{}, seen: map[[20]byte]time.Time{},
		drainSeen: map[int32]time.Time{}, transferred: map[[20]byte]time.Time{}}
	var loop func()
	loop = func() {
		if ra.d.Stopped() {
			return
		}
		ra.step()
		ra.d.After(reassignCheckEvery, loop)
	}
	ra.d.After(reassignCheckEvery, loop)
	return ra
}

// driven returns the moves driven now: the first concurrency of them.
func (ra *Reassigner) driven(v *routes.View) []*metadata.Reassignment {
	moves := v.Moves
	if len(moves) > ra.d.Concurrency {
		moves = moves[:ra.d.Concurrency]
	}
	return moves
}

// step asks the primary of every driven move for its next step.
func (ra *Reassigner) step() {
	if !ra.d.Meta.IsPrimary() {
		clear(ra.progress)
		clear(ra.seen)
		clear(ra.drainSeen)
		clear(ra.transferred)
		return
	}
	v := ra.d.View()
	now := ra.d.Clock.Now()
	// Forget moves that ended (bounded by the moves recorded).
	for k := range ra.seen {
		if v.Moving[k] == nil {
			delete(ra.progress, k)
			delete(ra.seen, k)
			delete(ra.proposing, k)
		}
	}
	for _, mv := range ra.driven(v) {
		key := routes.Key(mv.TopicID, mv.Partition)
		if _, ok := ra.seen[key]; !ok {
			ra.seen[key] = now
			ra.d.Log.Info("replica move driven", "topic", mv.Topic, "partition", mv.Partition, "from", mv.From, "to", mv.Target, "cancelled", mv.Cancelled)
		}
		rt, ok := ra.d.Routes.Get(key)
		if !ok || rt.Leader <= 0 {
			continue
		}
		ra.d.Ask(rt.Leader, peerwire.Reassign{TopicID: mv.TopicID, Partition: mv.Partition, From: ra.d.Self, Target: replicaSet(mv.Target)})
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

// Observe records what a partition primary answered: the steps it shows
// that the metadata lacks, one command at a time, and the completion.
func (ra *Reassigner) Observe(st peerwire.ReassignState) {
	if !ra.d.Meta.IsPrimary() {
		return
	}
	key := routes.Key(st.TopicID, st.Partition)
	mv := ra.d.View().Moving[key]
	if mv == nil {
		return
	}
	now := ra.d.Clock.Now()
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
	ra.d.Meta.Propose(cmd, ProposeTimeout, func(_ metadata.Result, err error) {
		delete(ra.proposing, key)
		if err != nil {
			ra.d.Log.Warn("replica move not recorded", "topic", mv.Topic, "partition", mv.Partition, "op", cmd.Op, "step", cmd.Step, "node", cmd.Node, "err", err)
			return
		}
		if cmd.Op == metadata.OpReassignComplete {
			took := ra.d.Clock.Now().Sub(ra.seen[key])
			ra.d.Log.Info("replica move finished", "topic", mv.Topic, "partition", mv.Partition, "from", mv.From, "to", mv.Target,
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

// ReassignPartition starts a move of partition p of topic to target (the
// preferred primary first), or with dryRun only checks it; done learns
// the outcome (nil once the move is recorded: it runs in the background).
// REQUIRES: on shard routes.MetaShard.
func (ra *Reassigner) ReassignPartition(topic string, p int32, target []metadata.NodeID, throttleBps int64, dryRun bool, done func(error)) {
	t := ra.d.Meta.State().Topic(topic)
	if t == nil {
		done(MetaKindErr(fmt.Errorf("%w: %q does not exist", metadata.ErrUnknownTopic, topic)))
		return
	}
	roster := ra.rosterIDs()
	if err := metadata.CheckReassignment(t, p, target, roster); err != nil {
		done(MetaKindErr(err))
		return
	}
	if mv := ra.d.Meta.State().Reassignment(topic, p); mv != nil {
		done(MetaKindErr(fmt.Errorf("%w: %s/%d is moving from %v to %v", metadata.ErrReassignmentInProgress, topic, p, mv.From, mv.Target)))
		return
	}
	if dryRun {
		done(nil)
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpReassignStart, Name: t.Name, ID: t.ID, Partition: p,
		Target: target, Roster: roster, AtMs: ra.d.Clock.Now().UnixMilli(), ThrottleBytesPerSecond: throttleBps}
	ra.d.Meta.Propose(cmd, ProposeTimeout, func(_ metadata.Result, err error) {
		if err != nil {
			err = MetaKindErr(err)
		}
		done(err)
	})
}

// cancelReassign turns the move of partition p of topic back to the
// replicas it started from. REQUIRES: on shard metaShard.
func (ra *Reassigner) cancelReassign(topic string, p int32, done func(error)) {
	t := ra.d.Meta.State().Topic(topic)
	if t == nil || ra.d.Meta.State().Reassignment(topic, p) == nil {
		done(MetaKindErr(fmt.Errorf("%w: %s/%d", metadata.ErrNoReassignment, topic, p)))
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpReassignCancel, Name: t.Name, ID: t.ID, Partition: p}
	ra.d.Meta.Propose(cmd, ProposeTimeout, func(_ metadata.Result, err error) {
		if err != nil {
			err = MetaKindErr(err)
		}
		done(err)
	})
}

// reassignStatus is one move as the operator sees it.
type reassignStatus struct {
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
func (ra *Reassigner) reassignments() []reassignStatus {
	v := ra.d.View()
	driven := map[[20]byte]bool{}
	for _, mv := range ra.driven(v) {
		driven[routes.Key(mv.TopicID, mv.Partition)] = true
	}
	var out []reassignStatus
	for _, mv := range ra.d.Meta.State().Reassignments() {
		key := routes.Key(mv.TopicID, mv.Partition)
		st := reassignStatus{Topic: mv.Topic, Partition: mv.Partition, From: int32s(mv.From), Target: int32s(mv.Target),
			Cancelled: mv.Cancelled, Driven: driven[key]}
		for _, s := range mv.Steps {
			st.Steps = append(st.Steps, fmt.Sprintf("%s %d", s.Step, s.Node))
		}
		if pr, ok := ra.progress[key]; ok {
			st.EntriesBehind, st.BytesBehind = pr.state.EntriesBehind, pr.state.BytesBehind
			st.BytesMoved, st.EtaMs = pr.moved, pr.etaMs()
		} else {
			st.EtaMs = -1
		}
		out = append(out, st)
	}
	return out
}

// int32s is ids as int32s.
func int32s(ids []metadata.NodeID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// Serve answers the service's Reassign. A start checks every move
// of the plan (and that it names no partition twice) before it records
// any, then records them one after another; a failure part way (the
// metadata primary lost its role) answers the error, and the moves
// recorded before it run. REQUIRES: on shard metaShard.
func (ra *Reassigner) Serve(req *service.ReassignRequest, done func(service.ReassignResult, error)) {
	switch req.Action {
	case service.ReassignList:
		done(service.ReassignResult{Moves: statuses(ra.reassignments()), Drains: ra.drainStatuses()}, nil)
		return
	case service.ReassignDrain, service.ReassignUndrain, service.ReassignReplace:
		ra.serveDrain(req, done)
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
			if t := ra.d.Meta.State().Topic(m.Topic); t != nil && int(m.Partition) < t.Partitions() && m.Partition >= 0 {
				st.From = int32s(t.Replicas[m.Partition])
			}
			if mv := ra.d.Meta.State().Reassignment(m.Topic, m.Partition); mv != nil {
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
			if ra.d.Meta.State().Reassignment(m.Topic, m.Partition) == nil {
				next(MetaKindErr(fmt.Errorf("%w: %s/%d", metadata.ErrNoReassignment, m.Topic, m.Partition)))
				return
			}
			next(nil)
		case req.Action == service.ReassignCancel:
			ra.cancelReassign(m.Topic, m.Partition, next)
		default:
			ra.ReassignPartition(m.Topic, m.Partition, targets[i], req.ThrottleBytesPerSecond, dryRun, next)
		}
	}
	run(0, true)
}

func statuses(in []reassignStatus) []service.ReassignStatus {
	out := make([]service.ReassignStatus, len(in))
	for i, s := range in {
		out[i] = service.ReassignStatus{Topic: s.Topic, Partition: s.Partition, From: s.From, Target: s.Target, Cancelled: s.Cancelled,
			Driven: s.Driven, EntriesBehind: s.EntriesBehind, BytesBehind: s.BytesBehind, Steps: s.Steps, BytesMoved: s.BytesMoved, EtaMs: s.EtaMs}
	}
	return out
}

// rosterIDs lists the roster's active members, as the metadata names
// them.
func (ra *Reassigner) rosterIDs() []metadata.NodeID {
	var out []metadata.NodeID
	for _, id := range ra.d.Roster() {
		out = append(out, metadata.NodeID(id))
	}
	return out
}
