package raftlite

import "fmt"

// Node is one replica of one consensus group: a pure state machine in the
// manner of etcd-io/raft's RawNode. Inputs are Tick, Step (messages),
// Propose, Campaign, TransferLeadership, Durable and Unquiesce; outputs come
// out of Ready (see Ready for what to persist before sending what). A Node
// starts no goroutine, reads no clock and does no I/O. It is owned by one
// goroutine (the shard's) and is not safe for concurrent use.
type Node struct {
	id    NodeID
	group GroupID
	lim   *Limits
	// budget is Config.LearnerBudget (nil: none).
	budget func(to NodeID, bytes int64) bool

	// conf is the configuration in force: that of the latest
	// EntryConfChange in the log view, committed or not, else the log's
	// base (ConfLog), else initConf. confAt is the offset of the entry
	// that installed it (-1 for initConf, log start-1 for a base).
	// Invariant: conf is valid; confAt <= log.last(); a configuration
	// entry above the commit is the only one above it (the single-server
	// change rule), so a truncation reverts at most that one.
	conf   Membership
	confAt int64
	// initConf is the configuration of Config (Replicas, Learners).
	initConf Membership
	// termStart is, on a leader, the offset of its no-op: it proposes a
	// configuration change only once commit >= termStart.
	termStart int64

	term int32
	vote NodeID
	lead NodeID
	role Role

	log raftLog
	// commit is the highest offset known committed. Invariant: it never
	// decreases while this Node lives; log.start()-1 <= commit <= last.
	commit int64
	// durable is the highest offset the node layer reported durable that is
	// still in the log view. Invariant: durable <= log.last().
	durable int64
	// verified is, on a follower, the highest offset known to match the
	// current term's leader's log (-1 when none yet this term).
	verified int64
	// ackSent is the highest acknowledgement sent in this term.
	ackSent int64

	electionElapsed  int32
	heartbeatElapsed int32
	// timeout is the randomised election timeout of this round.
	timeout int32
	// granted and rejected collect votes in an election.
	granted, rejected ReplicaSet

	// prs holds the leader's view of each member, itself included, sorted
	// by id. Nil unless leader.
	prs []progress
	// leaderTicks counts ticks since becoming leader (reset retries).
	leaderTicks int64
	// transferee is the leadership-transfer target (None when none);
	// transferElapsed the ticks since it started.
	transferee      NodeID
	transferElapsed int32
	// uncommitted holds (last offset, bytes) of this leader's entries not
	// yet committed; uncommittedBytes sums the bytes.
	uncommitted      []inflight
	uncommittedBytes int64
	// needBcast says proposals arrived since the last Ready; they are sent
	// together when the next Ready is taken (batching).
	needBcast bool
	// quiesced says this idle group stopped ticking (see Limits.Quiesce).
	quiesced bool

	rng  uint64
	msgs []Message

	// What the last Ready reported, to compute the Changed flags.
	prevHS     HardState
	prevCommit int64
	prevLead   NodeID
	prevRole   Role
	prevConf   Membership
	// refused is set by a handler that refused its message with an error
	// Step must return (ErrCommittedLost); Step clears it.
	refused error
	// losesAcked is Config.LogLosesAcked.
	losesAcked bool
}

// New creates a Node from a recovered log and hard state. Every entry in
// cfg.Log counts as durable. The commit offset starts at the log start
// minus one (everything below the log start is committed); the leader
// brings it forward.
func New(cfg Config) (*Node, error) {
	lim, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	n := &Node{
		id:       cfg.ID,
		group:    cfg.Group,
		initConf: Membership{Voters: cfg.Replicas, Learners: cfg.Learners},
		lim:      lim,
		budget:   cfg.LearnerBudget,
		term:     cfg.HardState.Term,
		vote:     cfg.HardState.Vote,
		log:      newRaftLog(cfg.Log),
		rng:      cfg.Seed ^ uint64(cfg.ID)<<56 ^ uint64(cfg.Group),

		losesAcked: cfg.LogLosesAcked,
	}
	n.refreshConf()
	n.prevConf = n.conf
	n.commit = n.log.start() - 1
	n.durable = n.log.last()
	n.verified, n.ackSent = -1, -1
	if lt := n.log.lastTerm(); lt > n.term {
		// Entries of a term can reach the disk before the hard state that
		// names it; adopting the term is safe because nothing of that term
		// was sent (messages wait for the hard state).
		n.term, n.vote = lt, None
	}
	n.prevHS = HardState{Term: n.term, Vote: n.vote}
	n.prevCommit = n.commit
	n.becomeFollower(n.term, None)
	if cfg.Preferred {
		n.timeout = 1
	}
	return n, nil
}

// ID is this node's id.
func (n *Node) ID() NodeID { return n.id }

// Group is this node's group id.
func (n *Node) Group() GroupID { return n.group }

// Leader is the leader this node knows of (None when unknown).
func (n *Node) Leader() NodeID { return n.lead }

// Term is the current term: the generation clients see.
func (n *Node) Term() int32 { return n.term }

// Role is this node's role.
func (n *Node) Role() Role { return n.role }

// Commit is the commit offset (the high watermark minus one).
func (n *Node) Commit() int64 { return n.commit }

// Transferee is the target of the leadership transfer under way, or None.
func (n *Node) Transferee() NodeID { return n.transferee }

// Quiesced reports whether the group is quiesced: Tick does nothing, and
// the node layer may skip it.
func (n *Node) Quiesced() bool { return n.quiesced }

// Match returns the leader's view of member id's matched offset. ok is
// false when this node is not the leader or id is not a member.
func (n *Node) Match(id NodeID) (match int64, ok bool) {
	if pr := n.progress(id); pr != nil {
		return pr.match, true
	}
	return -1, false
}

// Follower returns the leader's view of member id: its matched offset and
// whether it was heard from in the current check-quorum interval (a
// member that answers nothing — down, or not serving the group yet — is
// not active). ok is false when this node is not the leader or id is not a
// member.
func (n *Node) Follower(id NodeID) (match int64, active bool, ok bool) {
	if pr := n.progress(id); pr != nil {
		return pr.match, pr.recentActive || id == n.id, true
	}
	return -1, false, false
}

// hardState is the current hard state.
func (n *Node) hardState() HardState { return HardState{Term: n.term, Vote: n.vote} }

// send queues m, filling in the envelope.
func (n *Node) send(m Message) {
	m.Group, m.From = n.group, n.id
	if m.Term == 0 {
		m.Term = n.term
	}
	n.msgs = append(n.msgs, m)
}

// random returns a value in [0, max) from the node's seeded generator
// (splitmix64; no global randomness).
func (n *Node) random(max int32) int32 {
	n.rng += 0x9e3779b97f4a7c15
	z := n.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int32(z % uint64(max))
}

// resetTimers restarts the election and heartbeat timers with a new random
// election timeout in [ElectionTicks, 2*ElectionTicks).
func (n *Node) resetTimers() {
	n.electionElapsed, n.heartbeatElapsed = 0, 0
	n.timeout = n.lim.ElectionTicks + n.random(n.lim.ElectionTicks)
}

// Tick advances the node's logical clock by one tick. The node layer calls
// it for every group at the same fixed interval.
func (n *Node) Tick() {
	if n.quiesced {
		return
	}
	if n.role == RoleLeader {
		n.tickLeader()
		return
	}
	n.electionElapsed++
	if n.electionElapsed >= n.timeout && n.canCampaign() {
		n.campaign(campaignPreVote)
	}
}

// HasReady reports whether Ready has anything for the node layer.
func (n *Node) HasReady() bool {
	return len(n.msgs) > 0 || n.needBcast || n.log.hasPending() ||
		n.commit != n.prevCommit || n.hardState() != n.prevHS ||
		n.lead != n.prevLead || n.role != n.prevRole || n.conf != n.prevConf
}

// Ready returns what must be persisted and sent (see Ready). Call Advance
// with it before the next call to Ready. Step, Tick and Propose may be
// called in between.
func (n *Node) Ready() Ready {
	if n.needBcast {
		n.needBcast = false
		n.bcastAppend()
	}
	rd := Ready{
		HardState: n.hardState(),
		Commit:    n.commit,
		Lead:      n.lead,
		Role:      n.role,
		Conf:      n.conf,
		Messages:  n.msgs,
	}
	rd.Reset, rd.Entries = n.log.takePending()
	rd.HardStateChanged = rd.HardState != n.prevHS
	rd.CommitChanged = n.commit != n.prevCommit
	rd.SoftStateChanged = n.lead != n.prevLead || n.role != n.prevRole
	rd.ConfChanged = n.conf != n.prevConf
	n.prevHS, n.prevCommit, n.prevLead, n.prevRole = rd.HardState, n.commit, n.lead, n.role
	n.prevConf = n.conf
	n.msgs = nil
	return rd
}

// Advance tells the node that rd's Reset and Entries are in the log (and
// its hard state durable, its messages sent). The node reuses the memory of
// rd.Messages: do not keep that slice (copy the messages) past Advance.
func (n *Node) Advance(rd Ready) {
	n.log.advance(rd.Reset, rd.Entries)
	if len(n.msgs) == 0 && cap(rd.Messages) > 0 && !n.quiesced {
		// Recycle the message buffer of an active group (heartbeats
		// would otherwise allocate one per tick); a quiesced group lets
		// it go to stay small.
		clear(rd.Messages)
		n.msgs = rd.Messages[:0]
	}
}

// Durable reports that the log is durable up to and including offset,
// whose batch has term term: after a crash the log would read back exactly
// as it is now up to offset. Reports may arrive late and out of order; one
// that no longer matches the log (a truncation overtook it) is ignored, so
// every appended entry must eventually be covered by a later report.
// REQUIRES: offset is the last offset of a batch.
func (n *Node) Durable(offset int64, term int32) {
	if offset <= n.durable {
		return
	}
	if t, err := n.log.termAt(offset); err != nil || t != term {
		return
	}
	n.durable = offset
	switch n.role {
	case RoleLeader:
		n.prs[n.selfIndex()].match = offset
		if n.maybeCommit() {
			n.maybeLeaveAfterRemoval()
		}
	case RoleFollower:
		n.maybeAck(false)
	}
}

// Propose appends a batch of count records (data is its encoded bytes) as
// leader. It returns the entry with the assigned offsets and term; the
// proposal is acknowledged once a Ready reports Commit >= Last and the log
// still holds Term at Last. It returns ErrNotLeader,
// ErrTransferInProgress, ErrInvalidProposal or ErrProposalBackpressure.
// The node keeps data until the entry is committed; do not modify it.
func (n *Node) Propose(count int32, data []byte) (Entry, error) {
	switch {
	case n.role != RoleLeader:
		return Entry{}, ErrNotLeader
	case n.transferee != None:
		return Entry{}, ErrTransferInProgress
	case count < 1 || len(data) > int(n.lim.EntryBytesMax):
		return Entry{}, fmt.Errorf("%w: %d records, %d bytes", ErrInvalidProposal, count, len(data))
	case n.uncommittedBytes > 0 && n.uncommittedBytes+int64(len(data)) > n.lim.UncommittedBytesMax:
		return Entry{}, ErrProposalBackpressure
	}
	n.unquiesce()
	base := n.log.end()
	e := Entry{Base: base, Last: base + int64(count) - 1, Term: n.term, Bytes: int32(len(data)), Data: data}
	n.appendAsLeader(e)
	return e, nil
}

// Campaign makes a follower start an election now (with pre-vote), e.g.
// the preferred primary of a new group. A leader, a learner and a node
// whose removal it knows committed ignore it.
func (n *Node) Campaign() {
	if n.role == RoleLeader || !n.canCampaign() {
		return
	}
	n.unquiesce()
	n.campaign(campaignPreVote)
}

// TransferLeadership asks the leader to hand leadership to member to: it
// catches to up, then tells it to campaign at once. Proposals are refused
// (ErrTransferInProgress) until a new leader is elected or TransferTicksMax
// ticks pass. It returns ErrNotLeader, or ErrUnknownPeer for a target
// that is not a voter.
func (n *Node) TransferLeadership(to NodeID) error {
	if n.role != RoleLeader {
		return ErrNotLeader
	}
	if to == n.id || !n.conf.Voters.Has(to) {
		return fmt.Errorf("%w: transfer to %d", ErrUnknownPeer, to)
	}
	n.unquiesce()
	if n.transferee == to {
		return nil
	}
	n.transferee, n.transferElapsed = to, 0
	pr := n.progress(to)
	if pr.match == n.log.last() {
		n.send(Message{Type: MsgTimeoutNow, To: to})
		return nil
	}
	n.sendAppend(pr, true)
	return nil
}

// Unquiesce wakes a quiesced group. The node layer calls it for every
// quiesced group with a member it has stopped hearing from (node-level
// liveness), so that a dead leader is replaced by an election.
func (n *Node) Unquiesce() { n.unquiesce() }

// ForgetLeader tells a follower that its leader is gone: the node layer
// has stopped hearing from the leader's node (node-level liveness). It
// wakes the group and makes the follower leaderless in its term, so that
// it no longer honours the leader's lease and grants a live replica's
// pre-vote at once; otherwise a follower that heard the leader (or was
// woken) less than an election timeout ago ignores it, and the election
// waits a whole timeout more. It does not campaign, and the follower
// follows the leader again if it hears from it. Safety does not depend
// on it: the lease only keeps a live leader from being disrupted. A
// leader or candidate ignores it.
func (n *Node) ForgetLeader() {
	if n.role != RoleFollower {
		return
	}
	n.unquiesce()
	n.lead = None
}

func (n *Node) unquiesce() {
	if !n.quiesced {
		return
	}
	n.quiesced = false
	n.electionElapsed = 0
	if n.role == RoleLeader {
		// Heartbeat at the next tick; followers were silent while
		// quiesced, so grant them a full check-quorum interval.
		n.heartbeatElapsed = n.lim.HeartbeatTicks
		for i := range n.prs {
			n.prs[i].recentActive = true
		}
	}
}

// Status is a snapshot of a node's state for routing and operators.
type Status struct {
	ID     NodeID
	Group  GroupID
	Role   Role
	Term   int32
	Vote   NodeID
	Lead   NodeID
	Commit int64
	// LogStart and LastOffset bound the log view (including entries not
	// yet written); Durable is the highest durable offset reported.
	LogStart   int64
	LastOffset int64
	Durable    int64
	Transferee NodeID
	Quiesced   bool
	// Conf is the configuration in force and ConfIndex the offset of the
	// entry that installed it (-1: the creation configuration).
	Conf      Membership
	ConfIndex int64
	// Progress is the leader's view of every member (itself included),
	// sorted by id; nil on a non-leader.
	Progress []PeerProgress
}

// Status returns the node's state. It allocates; routing code that runs
// per request should use the accessors (Leader, Term, Commit, Match).
func (n *Node) Status() Status {
	s := Status{
		ID: n.id, Group: n.group, Role: n.role, Term: n.term, Vote: n.vote,
		Lead: n.lead, Commit: n.commit, LogStart: n.log.start(),
		LastOffset: n.log.last(), Durable: n.durable,
		Transferee: n.transferee, Quiesced: n.quiesced,
		Conf: n.conf, ConfIndex: n.confAt,
	}
	for i := range n.prs {
		pr := &n.prs[i]
		s.Progress = append(s.Progress, PeerProgress{
			ID: pr.id, Match: pr.match, Next: pr.next, State: pr.state,
			Active: pr.recentActive, InflightBytes: pr.inflightBytes,
			Learner: !n.conf.Voters.Has(pr.id),
		})
	}
	return s
}
