package rafttest

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/corestream/corestream/raftlite"
)

// SimOptions configure one simulation run. Everything else (group size,
// fault rates, limits) is drawn from the seed, so a seed and Ticks replay a
// run exactly.
type SimOptions struct {
	Seed int64
	// Ticks is the length of the adversarial phase in ticks.
	Ticks int
	// Trace, when non-nil, receives one line per event.
	Trace func(string)
}

// SimResult summarises a run, to tune schedules and to report coverage.
type SimResult struct {
	Nodes       int
	Quiesce     bool
	Snapshots   bool
	Proposed    int // proposals accepted by a leader
	Acked       int // proposals acknowledged
	Committed   int // entries in the final committed log
	Terms       int // terms that had a leader
	Crashes     int
	Partitions  int
	Resets      int // MsgReset installs (log start brought forward)
	Transfers   int // transfers requested
	ConfChanges int // membership changes a leader accepted
	ConfApplied int // membership changes in the final committed log
	Linearized  bool
	RecoverTick int // ticks from healing to a stable leader
}

const (
	stepsPerTick = 4
	// recoverTicksMax bounds the time from healing to a stable leader.
	recoverTicksMax = 300
	// finalTicksMax bounds the time for the final proposals to commit
	// everywhere once a leader is stable, plus one tick per offset the
	// shortest log of a member lags the longest at the heal (a learner
	// can fall far behind a leader that commits without it), at most
	// finalLagTicksMax.
	finalTicksMax    = 200
	finalLagTicksMax = 3000
	// finalRetriesMax bounds how often each final proposal is re-proposed
	// after a leader change.
	finalRetriesMax = 3
	// opTimeoutTicks is how long a client waits for an acknowledgement.
	opTimeoutTicks = 40
	// readyRoundsMax bounds the Ready loop of one step.
	readyRoundsMax = 64
)

type simNode struct {
	id   raftlite.NodeID
	node *raftlite.Node // nil while down
	disk *Disk
	// created says the node exists (a spare slot is created when a
	// membership change adds it); initConf is its creation configuration.
	created  bool
	initConf raftlite.Membership
	inc      int // incarnation
	// commit is the last commit a Ready reported in this incarnation.
	commit int64
	// syncDue is the step of the next sync (-1: nothing to sync).
	syncDue int64
	durQ    []durReport
	// restartAt is the tick at which a crashed node comes back.
	restartAt int64
	lastHeard []int64 // per peer (id-1): step of the last ping received
	pending   []*simOp
	// cutOffSince is the tick since which this node has led while the
	// network cut it off from a majority (-1: it has not); reachedAt[i]
	// is the last tick at which node i+1 ran and was linked to it both
	// ways.
	cutOffSince int64
	reachedAt   []int64
	// ledTerm is the last term this node was seen leading; crashAt is the
	// step at which a fresh leader is made to crash (-1: none due).
	ledTerm int32
	crashAt int64
	// readyLeadTerm is the term this node led when it handled its last
	// Ready (0: it did not lead).
	readyLeadTerm int32
}

type durReport struct {
	at   int64
	off  int64
	term int32
}

type opState uint8

const (
	opPending opState = iota
	opAcked
	opFailed  // definitely not committed
	opUnknown // the client gave up or the node crashed
)

type simOp struct {
	id     uint64
	client int
	kind   opKind
	ent    raftlite.Entry
	node   raftlite.NodeID
	inc    int
	call   int64
	ret    int64
	state  opState
	out    opOutput
}

type simClient struct {
	op       *simOp
	leader   raftlite.NodeID
	deadline int64
}

// simParams are drawn from the seed.
type simParams struct {
	n                   int
	crashPermille       int // per tick
	crashMidReadyPerMil int // per Ready
	partitionPermille   int // per tick
	compactPermille     int // per tick
	transferPermille    int // per tick
	campaignPermille    int // per tick
	opPermille          int // per client per tick
	syncDelayMax        int // steps
	reportDelayMax      int // steps
	snapshots           bool
	chaos               bool
	// newLeaderCrashPermille is the chance that a node that just won an
	// election crashes a few steps later, its no-op (and maybe some
	// entries) on few or no other nodes: the ingredient of Figure 8.
	newLeaderCrashPermille int
	// spare is the number of node slots beyond the n initial voters,
	// which membership changes may add; confPermille the per-tick chance
	// of a membership change.
	spare        int
	confPermille int
}

type sim struct {
	o       SimOptions
	rng     *rand.Rand
	p       simParams
	limits  *raftlite.Limits
	members raftlite.ReplicaSet
	now     int64 // step
	tick    int64
	nodes   []*simNode
	net     *network
	chk     *checker
	clients []*simClient
	ops     []*simOp
	nextOp  uint64
	faults  bool
	healAt  int64
	res     SimResult
}

// RunSim runs one seeded simulation and returns the first safety or
// liveness violation found, if any.
func RunSim(o SimOptions) (res SimResult, err error) {
	s := newSim(o)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic at tick %d: %v", s.tick, r)
		}
		res = s.res
	}()
	if err := s.run(); err != nil {
		return s.res, fmt.Errorf("tick %d: %w", s.tick, err)
	}
	return s.res, nil
}

func newSim(o SimOptions) *sim {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5eed))
	p := simParams{
		n:                   []int{1, 3, 3, 3, 3, 3, 5, 5, 5, 5}[rng.IntN(10)],
		crashPermille:       rng.IntN(25),
		crashMidReadyPerMil: rng.IntN(4),
		partitionPermille:   rng.IntN(40),
		compactPermille:     rng.IntN(80),
		transferPermille:    rng.IntN(20),
		campaignPermille:    rng.IntN(10),
		opPermille:          100 + rng.IntN(500),
		syncDelayMax:        rng.IntN(6),
		reportDelayMax:      rng.IntN(4),
		snapshots:           rng.IntN(2) == 0,
	}
	lim := &raftlite.Limits{
		ElectionTicks:    10,
		HeartbeatTicks:   int32(1 + rng.IntN(3)),
		TransferTicksMax: int32(5 + rng.IntN(20)),
		ResetRetryTicks:  int32(5 + rng.IntN(20)),
		AppendBytesMax:   int64(40 + rng.IntN(400)),
		InflightBytesMax: int64(100 + rng.IntN(2000)),
		InflightMsgsMax:  int32(1 + rng.IntN(16)),
		NoopBytes:        8,
		Quiesce:          rng.IntN(5) < 2,
	}
	if rng.IntN(4) != 0 {
		p.spare = 1 + rng.IntN(2)
		p.confPermille = 5 + rng.IntN(40)
	}
	s := &sim{o: o, rng: rng, p: p, limits: lim, net: newNetwork(p.n + p.spare), faults: true}
	s.net.dropPermille = rng.IntN(120)
	s.net.dupPermille = rng.IntN(60)
	s.net.delayMin = 1
	s.net.delayMax = 1 + rng.IntN(8)
	if rng.IntN(10) < 3 {
		// Chaos: slow links, short partitions, many campaigns. Elections
		// pile up and logs diverge (the schedules of Raft's Figure 8).
		s.p.chaos = true
		s.net.delayMax = 4 + rng.IntN(24)
		s.p.partitionPermille = 50 + rng.IntN(200)
		s.p.campaignPermille = 20 + rng.IntN(150)
		s.p.crashPermille = rng.IntN(60)
		s.p.syncDelayMax = rng.IntN(16)
		s.p.reportDelayMax = rng.IntN(24)
		s.p.newLeaderCrashPermille = rng.IntN(400)
		if rng.IntN(2) == 0 {
			lim.AppendBytesMax = 1 // one entry per MsgApp: catch-up in many steps
		}
	}
	for i := 1; i <= p.n; i++ {
		s.members = s.members.Add(raftlite.NodeID(i))
	}
	s.chk = newChecker(s.members)
	for i := 1; i <= p.n+p.spare; i++ {
		s.nodes = append(s.nodes, &simNode{id: raftlite.NodeID(i), disk: NewDisk(0), syncDue: -1, cutOffSince: -1, crashAt: -1})
	}
	for _, sn := range s.nodes[:p.n] {
		sn.created, sn.initConf = true, raftlite.Membership{Voters: s.members}
		s.start(sn, int(sn.id) == 1+rng.IntN(p.n))
	}
	for i := 0; i < 3; i++ {
		s.clients = append(s.clients, &simClient{})
	}
	s.res = SimResult{Nodes: p.n, Quiesce: lim.Quiesce, Snapshots: p.snapshots}
	return s
}

func (s *sim) tracef(format string, args ...interface{}) {
	if s.o.Trace != nil {
		s.o.Trace(fmt.Sprintf("t%d.%d ", s.tick, s.now%stepsPerTick) + fmt.Sprintf(format, args...))
	}
}

// start (re)creates a node's raftlite.Node from its disk.
func (s *sim) start(sn *simNode, preferred bool) {
	node, err := raftlite.New(raftlite.Config{
		ID: sn.id, Group: 7, Replicas: sn.initConf.Voters, Learners: sn.initConf.Learners,
		Log: sn.disk.Log, HardState: sn.disk.HS,
		Seed: s.rng.Uint64(), Preferred: preferred, Limits: s.limits,
	})
	if err != nil {
		panic(err)
	}
	sn.node = node
	sn.inc++
	sn.commit = node.Commit()
	sn.syncDue = -1
	sn.durQ = nil
	sn.lastHeard = make([]int64, len(s.nodes))
	sn.reachedAt = make([]int64, len(s.nodes))
	for i := range sn.lastHeard {
		sn.lastHeard[i] = s.now
		sn.reachedAt[i] = s.tick
	}
	s.tracef("node %d starts (incarnation %d) log %s hs %+v", sn.id, sn.inc, formatLog(sn.disk.Log), sn.disk.HS)
}

func (s *sim) run() error {
	total := int64(s.o.Ticks)
	for s.tick = 0; s.tick < total; s.tick++ {
		if err := s.runTick(); err != nil {
			return err
		}
	}
	return s.finish()
}

// runTick runs the steps of one tick.
func (s *sim) runTick() error {
	for sub := 0; sub < stepsPerTick; sub++ {
		s.now++
		for _, sn := range s.nodes {
			if sn.node != nil && sn.crashAt >= 0 && sn.crashAt <= s.now {
				sn.crashAt = -1
				s.crash(sn, "soon after winning an election")
			}
		}
		if err := s.deliverDue(); err != nil {
			return err
		}
		if err := s.durability(); err != nil {
			return err
		}
		if sub == 0 {
			if s.faults {
				if err := s.injectFaults(); err != nil {
					return err
				}
			}
			if err := s.tickNodes(); err != nil {
				return err
			}
			if err := s.runClients(); err != nil {
				return err
			}
		}
		if err := s.drain(); err != nil {
			return err
		}
	}
	if s.tick%16 == 0 {
		return s.checkLogsPairwise()
	}
	return nil
}

// observe runs the per-input checks on sn, and may doom a fresh leader.
func (s *sim) observe(sn *simNode) error {
	if sn.node.Role() == raftlite.RoleLeader && sn.node.Term() != sn.ledTerm {
		sn.ledTerm = sn.node.Term()
		if s.faults && s.rng.IntN(1000) < s.p.newLeaderCrashPermille {
			sn.crashAt = s.now + int64(s.rng.IntN(3*stepsPerTick))
		}
	}
	return s.chk.observeRole(sn.id, sn.node.Role(), sn.node.Term())
}

// deliverDue delivers every message due by now.
func (s *sim) deliverDue() error {
	for {
		m, ok := s.net.due(s.now)
		if !ok {
			return nil
		}
		sn := s.nodes[m.to-1]
		if sn.node == nil {
			continue
		}
		if m.ping {
			sn.lastHeard[m.from-1] = s.now
			continue
		}
		s.tracef("deliver %v", m.m)
		if err := sn.node.Step(m.m); err != nil {
			return fmt.Errorf("node %d refused %v: %w", sn.id, m.m, err)
		}
		if err := s.observe(sn); err != nil {
			return err
		}
	}
}

// durability runs due syncs and delivers due durability reports.
func (s *sim) durability() error {
	for _, sn := range s.nodes {
		if sn.node == nil {
			continue
		}
		if sn.syncDue >= 0 && sn.syncDue <= s.now {
			sn.syncDue = -1
			if last, term, ok := sn.disk.Sync(); ok {
				sn.durQ = append(sn.durQ, durReport{at: s.now + int64(s.rng.IntN(s.p.reportDelayMax+1)), off: last, term: term})
			}
		}
		keep := sn.durQ[:0]
		for _, r := range sn.durQ {
			if r.at > s.now {
				keep = append(keep, r)
				continue
			}
			s.tracef("node %d durable %d/%d", sn.id, r.term, r.off)
			sn.node.Durable(r.off, r.term)
		}
		sn.durQ = keep
	}
	return nil
}

// tickNodes restarts nodes that are due, ticks every running node, sends
// liveness pings, wakes quiesced groups that lost a member and makes
// followers forget a leader that looks down.
func (s *sim) tickNodes() error {
	for _, sn := range s.nodes {
		if sn.node == nil && sn.created && s.tick >= sn.restartAt {
			s.start(sn, false)
		}
		if sn.node == nil {
			continue
		}
		sn.node.Tick()
		if err := s.observe(sn); err != nil {
			return err
		}
		if err := s.checkQuorumStepDown(sn); err != nil {
			return err
		}
		if !s.limits.Quiesce {
			continue
		}
		livenessSteps := int64(s.limits.ElectionTicks) * stepsPerTick / 2
		members := sn.node.Membership().Members()
		for _, peer := range s.nodes {
			if peer.id == sn.id || !peer.created {
				continue
			}
			s.net.send(s, simMsg{ping: true, from: sn.id, to: peer.id})
			if !members.Has(peer.id) {
				continue // the node layer watches the group's members only
			}
			if s.now-sn.lastHeard[peer.id-1] <= livenessSteps {
				continue
			}
			if sn.node.Quiesced() {
				s.tracef("node %d: peer %d looks down, unquiesce", sn.id, peer.id)
				sn.node.Unquiesce()
			}
			if sn.node.Leader() == peer.id && sn.node.Role() == raftlite.RoleFollower {
				s.tracef("node %d: its leader %d looks down, forget it", sn.id, peer.id)
				sn.node.ForgetLeader()
			}
		}
	}
	return nil
}

// checkQuorumStepDown checks that a leader cut off from a majority of its
// voters steps down within two check-quorum intervals (plus the node
// layer's liveness delay, which wakes a quiesced leader). A voter counts
// as reachable for an election timeout (plus the longest message delay)
// after it last was: check-quorum rightly keeps a leader that heard from
// a majority within one interval, even if never from all of it at once
// (crashes and partitions flapping).
func (s *sim) checkQuorumStepDown(sn *simNode) error {
	for _, peer := range s.nodes {
		i, j := sn.id-1, peer.id-1
		if peer.node != nil && !s.net.cut[i][j] && !s.net.cut[j][i] {
			sn.reachedAt[j] = s.tick
		}
	}
	if sn.node.Role() != raftlite.RoleLeader {
		sn.cutOffSince = -1
		return nil
	}
	window := int64(s.limits.ElectionTicks) + int64(s.net.delayMax)/stepsPerTick + 1
	voters := sn.node.Membership().Voters
	reach := 0
	for _, peer := range s.nodes {
		if voters.Has(peer.id) && (peer == sn || s.tick-sn.reachedAt[peer.id-1] <= window) {
			reach++
		}
	}
	if reach >= voters.Quorum() {
		sn.cutOffSince = -1
		return nil
	}
	if sn.cutOffSince < 0 {
		sn.cutOffSince = s.tick
	}
	if limit := 3 * int64(s.limits.ElectionTicks); s.tick-sn.cutOffSince > limit {
		return fmt.Errorf("check-quorum: node %d still leads term %d, cut off from a majority for %d ticks",
			sn.id, sn.node.Term(), s.tick-sn.cutOffSince)
	}
	return nil
}

// drain handles Readys until none is left (bounded).
func (s *sim) drain() error {
	for round := 0; round < readyRoundsMax; round++ {
		busy := false
		for _, sn := range s.nodes {
			if sn.node != nil && sn.node.HasReady() {
				busy = true
				if err := s.handleReady(sn); err != nil {
					return err
				}
			}
		}
		if !busy {
			return nil
		}
	}
	return errors.New("Readys did not drain")
}

// handleReady is the node layer: it follows the Ready contract, may crash
// part-way (a crash point between any two stages), and checks what it
// writes.
func (s *sim) handleReady(sn *simNode) error {
	rd := sn.node.Ready()
	stage := 4
	if s.faults && s.rng.IntN(1000) < s.p.crashMidReadyPerMil {
		stage = s.rng.IntN(4)
	}
	if stage == 0 {
		s.crash(sn, "before handling a Ready")
		return nil
	}
	if rd.HardStateChanged {
		sn.disk.HS = rd.HardState
	}
	if r := rd.Reset; r != nil {
		if err := s.applyReset(sn, r); err != nil {
			return err
		}
	}
	if len(rd.Entries) > 0 && stage >= 2 {
		if err := s.applyEntries(sn, rd.Entries); err != nil {
			return err
		}
	}
	if stage < 2 {
		s.crash(sn, "after persisting hard state")
		return nil
	}
	msgs := rd.Messages
	if stage == 3 {
		msgs = msgs[:s.rng.IntN(len(msgs)+1)]
	}
	for _, m := range msgs {
		if m.Type == raftlite.MsgReset && s.p.snapshots {
			if m.Index != sn.disk.Log.StartOffset()-1 {
				// The log start moved again since raftlite built the
				// message: the snapshot for it is gone. Drop it; the
				// leader retries after ResetRetryTicks.
				continue
			}
			m.Snapshot = sn.disk.Snapshot
		}
		s.net.send(s, simMsg{from: m.From, to: m.To, m: m})
	}
	if stage == 3 {
		s.crash(sn, "while sending messages")
		return nil
	}
	if rd.ConfChanged {
		s.tracef("node %d configuration %v", sn.id, rd.Conf)
	}
	sn.node.Advance(rd)
	if err := s.chk.observeCommit(s.now, sn.id, sn.commit, rd.Commit, sn.disk.Log, s.disks()); err != nil {
		return err
	}
	leadTerm := int32(0)
	if rd.Role == raftlite.RoleLeader {
		leadTerm = rd.HardState.Term
	}
	if leadTerm != 0 && leadTerm == sn.readyLeadTerm && rd.Commit > sn.commit {
		// Raft §5.4.2: a leader commits by counting replicas only an
		// entry of its own term (earlier ones commit under it).
		if t, err := sn.disk.Log.TermAt(rd.Commit); err == nil && t != leadTerm {
			return fmt.Errorf("commit rule: leader %d of term %d committed offset %d of term %d by counting",
				sn.id, leadTerm, rd.Commit, t)
		}
	}
	sn.readyLeadTerm = leadTerm
	sn.commit = rd.Commit
	return s.settleOps(sn)
}

// applyReset brings a node's log start forward (durably), checking that
// nothing committed at or above the new start is dropped and that the
// snapshot (metadata mode) is the state at Start-1.
func (s *sim) applyReset(sn *simNode, r *raftlite.LogReset) error {
	s.res.Resets++
	s.tracef("node %d reset to %d/%d", sn.id, r.PrevTerm, r.Start)
	removed := sn.disk.Log.ResetTo(*r)
	if err := s.chk.observeRemoved(sn.id, removed, r.Start); err != nil {
		return err
	}
	if r.Start-1 > s.chk.committedLast() {
		return fmt.Errorf("node %d reset to start %d past the global commit %d", sn.id, r.Start, s.chk.committedLast())
	}
	if s.p.snapshots {
		if want := s.chk.snapshotOf(r.Start - 1); string(r.Snapshot) != string(want) {
			return fmt.Errorf("node %d installed snapshot %q at start %d, want %q", sn.id, r.Snapshot, r.Start, want)
		}
	}
	sn.disk.Snapshot = r.Snapshot
	sn.disk.Synced = sn.disk.Log.Clone()
	return nil
}

// applyEntries writes entries (unsynced) and schedules a sync.
func (s *sim) applyEntries(sn *simNode, ents []raftlite.Entry) error {
	base := ents[0].Base
	prevTerm, err := sn.disk.Log.TermAt(base - 1)
	if err != nil {
		return fmt.Errorf("node %d: entries %v do not follow its log %s: %v", sn.id, ents[0], formatLog(sn.disk.Log), err)
	}
	if err := s.chk.observeEntries(sn.id, prevTerm, ents); err != nil {
		return err
	}
	removed, err := sn.disk.Log.Append(ents...)
	if err != nil {
		return fmt.Errorf("node %d: %w", sn.id, err)
	}
	if err := s.chk.observeRemoved(sn.id, removed, -1); err != nil {
		return err
	}
	if sn.syncDue < 0 {
		sn.syncDue = s.now + int64(s.rng.IntN(s.p.syncDelayMax+1))
	}
	return nil
}

func (s *sim) disks() []*Disk {
	d := make([]*Disk, len(s.nodes))
	for i, sn := range s.nodes {
		d[i] = sn.disk
	}
	return d
}

// crash stops a node: unsynced writes are (partly) lost, pending client
// operations become unknown.
func (s *sim) crash(sn *simNode, when string) {
	s.res.Crashes++
	found := sn.disk.Crash(s.rng)
	s.tracef("node %d crashes %s; recovers log %s", sn.id, when, formatLog(found))
	sn.node = nil
	for _, op := range sn.pending {
		if op.state == opPending {
			op.state = opUnknown
		}
	}
	sn.pending = nil
	sn.restartAt = s.tick + 3 + int64(s.rng.IntN(40))
}
