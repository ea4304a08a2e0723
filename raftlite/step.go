package raftlite

import "fmt"

// campaignKind says how an election starts.
type campaignKind uint8

const (
	// campaignPreVote first asks whether a majority would vote, without
	// anyone changing term: a node that cannot win (partitioned, or with a
	// stale log) never disrupts the group by bumping the term.
	campaignPreVote campaignKind = iota
	// campaignElection asks for votes at term+1.
	campaignElection
	// campaignTransfer is an election started by MsgTimeoutNow; its votes
	// pass the voters' leader lease.
	campaignTransfer
)

// Step feeds a message from a peer to the node. It returns ErrGroupMismatch,
// ErrUnknownPeer or ErrInvalidMessage for messages it refuses; stale
// messages are dropped silently (nil). The node keeps references to
// m.Entries' Data until the Ready that carries them is advanced.
func (n *Node) Step(m Message) error {
	if m.Group != n.group {
		return fmt.Errorf("%w: %d, this is %d", ErrGroupMismatch, m.Group, n.group)
	}
	// Messages from nodes outside the configuration are not refused: a
	// member whose log is behind does not know the leader that a later
	// configuration added, nor the voters it counts, and must still take
	// its appends and answer its votes (refusing them can leave a group
	// without any electable leader). A removed node that keeps
	// campaigning is contained by pre-vote and the leader lease instead
	// (see the package doc), and a leader ignores non-members.
	if m.To != n.id || m.From == n.id || m.From == None || m.From > NodeIDMax {
		return fmt.Errorf("%w: %d->%d in group %d of %v", ErrUnknownPeer, m.From, m.To, n.group, n.conf)
	}
	if err := m.validate(); err != nil {
		return err
	}
	if n.quiesced && n.wakesQuiesced(&m) {
		n.unquiesce()
	}
	switch {
	case m.Term > n.term:
		if (m.Type == MsgVote || m.Type == MsgPreVote) && !m.Transfer && n.inLease(m.From) {
			// Leader lease (with check-quorum): while we hear from a
			// leader, a node that times out alone cannot disrupt it.
			return nil
		}
		switch {
		case m.Type == MsgPreVote:
			// Never change term for a pre-vote.
		case m.Type == MsgPreVoteResp && !m.Reject:
			// Granted pre-votes carry the future term we asked about.
		default:
			lead := None
			if m.Type == MsgApp || m.Type == MsgHeartbeat || m.Type == MsgReset {
				lead = m.From
			}
			n.becomeFollower(m.Term, lead)
		}
	case m.Term < n.term:
		switch m.Type {
		case MsgApp, MsgHeartbeat, MsgReset:
			// A stale leader: tell it our term so that it steps down (with
			// pre-vote and check-quorum our term rose without its help).
			n.send(Message{Type: MsgAppResp, To: m.From, Index: -1})
		case MsgPreVote:
			n.send(Message{Type: MsgPreVoteResp, To: m.From, Reject: true})
		}
		return nil
	}

	switch m.Type {
	case MsgPreVote, MsgVote:
		n.handleVoteRequest(m)
		return nil
	}
	switch n.role {
	case RoleLeader:
		n.stepLeader(m)
	case RolePreCandidate, RoleCandidate:
		n.stepCandidate(m)
	default:
		n.stepFollower(m)
	}
	if err := n.refused; err != nil {
		n.refused = nil
		return err
	}
	return nil
}

// committedLost handles a leader's message that would replace committed
// offset base and below: the assertion of a durable log (a panic: the
// contract was broken), or, on a log that acknowledges before it syncs,
// ErrCommittedLost from Step with the message refused.
func (n *Node) committedLost(m *Message, what string, base int64) {
	detail := fmt.Sprintf("group %d node %d: %s from %d (term %d) would replace committed offset %d (commit %d)",
		n.group, n.id, what, m.From, m.Term, base, n.commit)
	if !n.losesAcked {
		panic("raftlite: " + detail)
	}
	n.refused = fmt.Errorf("%w: %s", ErrCommittedLost, detail)
}

// inLease reports whether this node heard from a leader within the last
// election timeout (a leader is always in its own lease), so that it must
// ignore a vote request from candidate. A request from the leader itself
// ends the lease: that node is not leading any more (it restarted, or
// stepped down), whatever we last heard.
func (n *Node) inLease(candidate NodeID) bool {
	return n.lead != None && n.lead != candidate && n.electionElapsed < n.lim.ElectionTicks
}

// wakesQuiesced reports whether m ends quiescence. A quiesced follower
// answers vote requests under its (frozen) lease without waking, so that a
// node cut off from a healthy quiesced leader cannot take over, unless the
// request comes from the leader itself (it restarted: the group needs an
// election). A quiesced leader wakes on anything, which is how a follower
// that missed the quiesce heartbeat, or restarted, gets heartbeats again.
func (n *Node) wakesQuiesced(m *Message) bool {
	if m.Type == MsgHeartbeat && m.Quiesce {
		return false
	}
	if n.role != RoleLeader && m.From != n.lead && (m.Type == MsgPreVote || (m.Type == MsgVote && !m.Transfer)) {
		return false
	}
	return true
}

// handleVoteRequest answers MsgPreVote and MsgVote.
func (n *Node) handleVoteRequest(m Message) {
	resp := MsgVoteResp
	if m.Type == MsgPreVote {
		resp = MsgPreVoteResp
	}
	canVote := n.vote == m.From ||
		(n.vote == None && n.lead == None) ||
		(m.Type == MsgPreVote && m.Term > n.term)
	if canVote && n.log.isUpToDate(m.Index, m.LogTerm) {
		// A granted response carries the requested term.
		n.send(Message{Type: resp, To: m.From, Term: m.Term})
		if m.Type == MsgVote {
			n.electionElapsed = 0
			n.vote = m.From
		}
		// Two pre-candidates for the same term that grant each other's
		// pre-votes both become candidates, vote for themselves and split
		// the vote: the group waits an election timeout (a member back
		// from a restart campaigns at once, and its peer, alone while it
		// was away, kept pre-campaigning on its timer: fault harness, a
		// group of two without a primary for 1.1-1.25 s after a restart).
		// The higher id gives way: it stops its campaign, leaderless and
		// with a fresh election timeout, so that the candidate it just
		// granted can win. Only liveness is at stake: pre-votes change
		// no term and no vote.
		if m.Type == MsgPreVote && n.role == RolePreCandidate && m.Term == n.term+1 && m.From < n.id {
			n.becomeFollower(n.term, None)
		}
		return
	}
	n.send(Message{Type: resp, To: m.From, Reject: true})
	// A member without a leader that refuses a pre-vote only because its
	// own log is ahead is a member that can win where the candidate
	// cannot: it campaigns now instead of at its next election timeout. (A
	// two-member group whose member returned from a restart behind the
	// other waited up to two election timeouts for the other's timer.)
	// That holds for a pre-candidate too: a leader that check-quorum made
	// step down while its peer was away keeps pre-campaigning, and its
	// last pre-votes went to the dead node; it asks again now that one
	// answers. Not when it voted for another in this term: that one may
	// have won and not been heard from yet.
	if m.Type == MsgPreVote && canVote && (n.role == RoleFollower || n.role == RolePreCandidate) && n.lead == None &&
		(n.vote == None || n.vote == n.id) && n.canCampaign() {
		n.campaign(campaignPreVote)
	}
}

// stepCandidate handles messages for pre-candidates and candidates.
func (n *Node) stepCandidate(m Message) {
	switch m.Type {
	case MsgApp, MsgHeartbeat, MsgReset:
		// A leader exists in our term (pre-candidates keep their term).
		n.becomeFollower(m.Term, m.From)
		n.stepFollower(m)
	case MsgPreVoteResp, MsgVoteResp:
		if (m.Type == MsgPreVoteResp) != (n.role == RolePreCandidate) {
			return
		}
		// Only voters count: a learner's answer (it may know a
		// configuration we do not) is ignored.
		if !n.conf.Voters.Has(m.From) {
			return
		}
		if m.Reject {
			n.rejected = n.rejected.Add(m.From)
		} else {
			n.granted = n.granted.Add(m.From)
		}
		switch q := n.conf.Voters.Quorum(); {
		case n.votes(n.granted) >= q:
			if n.role == RolePreCandidate {
				n.campaign(campaignElection)
			} else {
				n.becomeLeader()
			}
		case n.rejected.Len() >= q:
			n.becomeFollower(n.term, None)
		}
	}
}

// campaign starts an election of the given kind.
// REQUIRES: canCampaign.
func (n *Node) campaign(kind campaignKind) {
	if n.term >= TermMax {
		// Terms live in a 32-bit header field: stay a follower forever
		// rather than overflow.
		n.resetTimers()
		return
	}
	var voteTerm int32
	typ := MsgVote
	if kind == campaignPreVote {
		n.becomePreCandidate()
		voteTerm, typ = n.term+1, MsgPreVote
	} else {
		n.becomeCandidate()
		voteTerm = n.term
	}
	n.granted = NewReplicaSet(n.id)
	if n.votes(n.granted) >= n.conf.Voters.Quorum() {
		if kind == campaignPreVote {
			n.campaign(campaignElection)
		} else {
			n.becomeLeader()
		}
		return
	}
	last, lastTerm := n.log.last(), n.log.lastTerm()
	for _, id := range n.conf.Voters.IDs() {
		if id == n.id {
			continue
		}
		n.send(Message{Type: typ, To: id, Term: voteTerm, Index: last, LogTerm: lastTerm,
			Transfer: kind == campaignTransfer})
	}
}

// becomeFollower moves to follower at term with leader lead (None when
// unknown).
func (n *Node) becomeFollower(term int32, lead NodeID) {
	if term != n.term {
		n.term, n.vote = term, None
		n.verified, n.ackSent = -1, -1
	}
	n.role, n.lead = RoleFollower, lead
	n.resetRoleState()
}

func (n *Node) becomePreCandidate() {
	n.role, n.lead = RolePreCandidate, None
	n.resetRoleState()
}

func (n *Node) becomeCandidate() {
	n.term++
	n.vote = n.id
	n.verified, n.ackSent = -1, -1
	n.role, n.lead = RoleCandidate, None
	n.resetRoleState()
}

// resetRoleState clears what belongs to the previous role.
func (n *Node) resetRoleState() {
	n.resetTimers()
	n.granted, n.rejected = 0, 0
	n.prs = nil
	n.transferee, n.transferElapsed = None, 0
	n.uncommitted, n.uncommittedBytes = nil, 0
	n.needBcast = false
	n.quiesced = false
}

// stepFollower handles messages for followers.
func (n *Node) stepFollower(m Message) {
	switch m.Type {
	case MsgApp:
		n.electionElapsed, n.lead = 0, m.From
		n.handleAppend(m)
	case MsgHeartbeat:
		n.electionElapsed, n.lead = 0, m.From
		n.handleHeartbeat(m)
	case MsgReset:
		n.electionElapsed, n.lead = 0, m.From
		n.handleReset(m)
	case MsgTimeoutNow:
		if n.canCampaign() {
			n.campaign(campaignTransfer)
		}
	}
}

// handleAppend checks log matching at (Index, LogTerm), truncates a
// divergent suffix, appends, and acknowledges what is durable.
func (n *Node) handleAppend(m Message) {
	prevLast, prevTerm, ents := m.Index, m.LogTerm, m.Entries
	if start := n.log.start(); prevLast < start-1 {
		// We compacted past prevLast: everything below our start is
		// committed here, hence in the leader's log. Skip those entries.
		i := 0
		for i < len(ents) && ents[i].Last < start {
			i++
		}
		switch {
		case i == len(ents):
			prevTerm, _ = n.log.termAt(start - 1)
		case ents[i].Base == start:
			prevTerm = ents[i-1].Term // i > 0: validate checked Base == Index+1
		default:
			return // not batch-aligned with our start: a broken sender
		}
		prevLast, ents = start-1, ents[i:]
	}
	if !n.log.matchTerm(prevLast, prevTerm) {
		hint, hintTerm := n.log.findConflictByTerm(min(prevLast, n.log.last()), prevTerm)
		n.send(Message{Type: MsgAppResp, To: m.From, Index: m.Index, Reject: true, Hint: hint, HintTerm: hintTerm})
		return
	}
	// Skip the entries we already hold: same term at an entry's last
	// offset means the same batch (one leader per term).
	i := 0
	for i < len(ents) && ents[i].Last <= n.log.last() && n.log.matchTerm(ents[i].Last, ents[i].Term) {
		i++
	}
	if i < len(ents) {
		base := ents[i].Base
		if base <= n.commit {
			n.committedLost(&m, fmt.Sprintf("entry %v", ents[i]), base)
			return
		}
		if base <= n.durable {
			n.durable = base - 1
		}
		n.log.truncateAndAppend(ents[i:])
		if base <= n.confAt {
			// The truncation removed the configuration in force (it
			// was not committed): the log's earlier one applies again.
			n.refreshConf()
		} else {
			n.noteAppended(ents[i:])
		}
	}
	lastNew := prevLast
	if len(ents) > 0 {
		lastNew = ents[len(ents)-1].Last
	}
	n.verified = max(n.verified, lastNew)
	n.followCommit(m.Commit)
	n.maybeAck(true)
}

// followCommit advances the commit to the leader's, but never past what is
// known to match the leader's log.
func (n *Node) followCommit(leaderCommit int64) {
	if c := min(leaderCommit, max(n.verified, n.commit)); c > n.commit {
		n.commit = c
	}
}

// maybeAck acknowledges min(durable, verified) to the leader when it grew,
// or (reply) when an append needs an answer and nothing awaits durability.
func (n *Node) maybeAck(reply bool) {
	if n.lead == None || n.lead == n.id {
		return
	}
	ack := min(n.durable, n.verified)
	if ack > n.ackSent || (reply && n.verified <= n.durable) {
		n.send(Message{Type: MsgAppResp, To: n.lead, Index: ack})
		n.ackSent = max(n.ackSent, ack)
	}
}

// handleHeartbeat follows the leader's commit and answers; a caught-up
// follower obeys a quiesce request by stopping its timer, silently.
func (n *Node) handleHeartbeat(m Message) {
	n.followCommit(m.Commit)
	if m.Quiesce && n.lim.Quiesce && n.commit == m.Commit && n.log.last() == m.Commit &&
		n.durable == m.Commit && n.verified >= m.Commit {
		n.quiesced = true
		return
	}
	n.send(Message{Type: MsgHeartbeatResp, To: m.From, Commit: n.commit})
}

// handleReset brings the log start forward to the leader's when our log
// does not match at the leader's start-1.
func (n *Node) handleReset(m Message) {
	at := m.Index // the offset before the leader's log start
	if n.log.matchTerm(at, m.LogTerm) || at < n.log.start()-1 {
		// Nothing to drop: we match there, or we compacted even further
		// (and our start-1 is committed, so it matches too).
		n.verified = max(n.verified, max(at, n.log.start()-1))
		n.followCommit(m.Commit)
		n.maybeAck(true)
		return
	}
	if n.commit > at {
		n.committedLost(&m, fmt.Sprintf("reset to %d/%d", m.LogTerm, at+1), at+1)
		return
	}
	// Our log differs at every offset >= at (log matching), so nothing we
	// drop there is committed; below at it is committed and compacted on
	// the leader.
	n.log.resetTo(&LogReset{Start: at + 1, PrevTerm: m.LogTerm, Snapshot: m.Snapshot, Conf: m.Conf, Base: m.Base})
	n.refreshConf()
	n.durable, n.verified = at, at
	n.followCommit(m.Commit)
	n.send(Message{Type: MsgAppResp, To: m.From, Index: at})
	n.ackSent = max(n.ackSent, at)
}
