package raftlite

import (
	"errors"
	"fmt"
)

// becomeLeader takes leadership of the current term and appends the no-op
// entry that lets earlier terms' entries commit.
func (n *Node) becomeLeader() {
	n.role, n.lead = RoleLeader, n.id
	n.resetRoleState()
	n.leaderTicks = 0
	next := n.log.end()
	n.syncProgress()
	n.prs[n.selfIndex()].match = n.durable
	n.termStart = next
	n.appendAsLeader(Entry{Base: next, Last: next, Term: n.term, Bytes: n.lim.NoopBytes, Kind: EntryLeaderNoop})
}

// appendAsLeader appends e (created by this leader) and schedules sending.
func (n *Node) appendAsLeader(e Entry) {
	n.log.appendLeader(e)
	self := &n.prs[n.selfIndex()]
	self.state, self.next = ProgressReplicate, e.Last+1
	n.uncommitted = append(n.uncommitted, inflight{last: e.Last, bytes: int64(e.Bytes)})
	n.uncommittedBytes += int64(e.Bytes)
	n.needBcast = true
}

// progress returns the leader's progress for id, or nil.
func (n *Node) progress(id NodeID) *progress {
	for i := range n.prs {
		if n.prs[i].id == id {
			return &n.prs[i]
		}
	}
	return nil
}

// selfIndex is the index of this node in prs.
// REQUIRES: leader.
func (n *Node) selfIndex() int {
	for i := range n.prs {
		if n.prs[i].id == n.id {
			return i
		}
	}
	panic("raftlite: leader without its own progress")
}

// tickLeader runs the leader's timers: check-quorum, transfer timeout,
// heartbeats.
func (n *Node) tickLeader() {
	n.leaderTicks++
	n.heartbeatElapsed++
	n.electionElapsed++
	if n.electionElapsed >= n.lim.ElectionTicks {
		n.electionElapsed = 0
		if !n.quorumActive() {
			// Check-quorum: a leader that has not heard from a majority
			// in a whole election timeout steps down, so that it stops
			// accepting writes it could never commit.
			n.becomeFollower(n.term, None)
			return
		}
		for i := range n.prs {
			n.prs[i].recentActive = n.prs[i].id == n.id
		}
	}
	if n.transferee != None {
		n.transferElapsed++
		if n.transferElapsed >= n.lim.TransferTicksMax {
			n.transferee, n.transferElapsed = None, 0
		}
	}
	if n.heartbeatElapsed >= n.lim.HeartbeatTicks {
		n.heartbeatElapsed = 0
		n.bcastHeartbeat()
	}
}

// quorumActive reports whether a majority of the voters (this leader
// included when it is one) was heard from in the current interval.
func (n *Node) quorumActive() bool {
	active := 0
	for i := range n.prs {
		if pr := &n.prs[i]; n.conf.Voters.Has(pr.id) && (pr.recentActive || pr.id == n.id) {
			active++
		}
	}
	return active >= n.conf.Voters.Quorum()
}

// bcastHeartbeat sends one heartbeat to each follower. When the group is
// idle and everyone is caught up it asks them to quiesce and stops ticking.
func (n *Node) bcastHeartbeat() {
	quiesce := n.lim.Quiesce && n.canQuiesce()
	for i := range n.prs {
		if pr := &n.prs[i]; pr.id != n.id {
			pr.heartbeatAnswered = false
			n.send(Message{Type: MsgHeartbeat, To: pr.id, Commit: n.commit, Quiesce: quiesce})
		}
	}
	if quiesce {
		n.quiesced = true
	}
}

// canQuiesce reports whether nothing is left to do: every entry is durable
// everywhere and committed, and every member answered the last heartbeat
// round knowing the commit.
func (n *Node) canQuiesce() bool {
	last := n.log.last()
	if n.transferee != None || n.needBcast || len(n.uncommitted) > 0 || n.commit != last || n.durable != last {
		return false
	}
	for i := range n.prs {
		pr := &n.prs[i]
		if pr.id != n.id && (pr.match != last || pr.commit != last || pr.state != ProgressReplicate || !pr.heartbeatAnswered) {
			return false
		}
	}
	return true
}

// bcastAppend sends what each follower is missing, as far as flow control
// allows.
func (n *Node) bcastAppend() {
	for i := range n.prs {
		if pr := &n.prs[i]; pr.id != n.id {
			n.sendAppends(pr)
		}
	}
}

// sendAppends sends MsgApps to pr until it is paused or caught up. The loop
// is bounded by InflightMsgsMax (each send in replicate state adds one
// in-flight message; a probe sends one).
func (n *Node) sendAppends(pr *progress) {
	for i := int32(0); i <= n.lim.InflightMsgsMax; i++ {
		if !n.sendAppend(pr, false) || pr.state != ProgressReplicate {
			return
		}
	}
}

// sendAppend sends one MsgApp to pr from pr.next (empty only when
// sendIfEmpty), or a MsgReset when the entries it needs are compacted. It
// reports whether it sent something.
func (n *Node) sendAppend(pr *progress, sendIfEmpty bool) bool {
	if pr.paused(n.lim) {
		return false
	}
	prevLast := pr.next - 1
	prevTerm, err := n.log.termAt(prevLast)
	if err != nil {
		return n.sendResetOr(pr, err)
	}
	var ents []Entry
	if pr.next < n.log.end() {
		ents, err = n.log.entries(pr.next, n.log.end(), n.lim.AppendBytesMax, nil)
		if err != nil {
			return n.sendResetOr(pr, err)
		}
		if ents[0].Base != pr.next {
			panic(fmt.Sprintf("raftlite: group %d: next %d for %d is inside batch %v", n.group, pr.next, pr.id, ents[0]))
		}
	}
	if len(ents) == 0 && !sendIfEmpty {
		return false
	}
	var bytes int64
	last := prevLast
	for _, e := range ents {
		bytes += int64(e.Bytes)
		last = e.Last
	}
	if bytes > 0 && n.budget != nil && n.conf.Learners.Has(pr.id) && !n.budget(pr.id, bytes) {
		return false // throttled: asked again at the learner's next answer
	}
	n.send(Message{Type: MsgApp, To: pr.id, Index: prevLast, LogTerm: prevTerm, Entries: ents, Commit: n.commit})
	pr.sent(last, bytes)
	return true
}

// sendResetOr sends a MsgReset when err says the entries are compacted,
// and panics otherwise (the log broke its contract).
func (n *Node) sendResetOr(pr *progress, err error) bool {
	if !errors.Is(err, ErrCompacted) {
		panic(fmt.Sprintf("raftlite: group %d: reading log for %d at %d: %v", n.group, pr.id, pr.next, err))
	}
	at := n.log.start() - 1
	prevTerm, err := n.log.termAt(at)
	if err != nil {
		panic(fmt.Sprintf("raftlite: group %d: term before log start %d: %v", n.group, at+1, err))
	}
	if at > n.commit {
		panic(fmt.Sprintf("raftlite: group %d: log start %d beyond commit %d", n.group, at+1, n.commit))
	}
	conf, _, ok, err := n.log.confAt(at)
	if err != nil {
		panic(fmt.Sprintf("raftlite: group %d: configuration before log start %d: %v", n.group, at+1, err))
	}
	if !ok {
		conf = n.initConf
	}
	n.send(Message{Type: MsgReset, To: pr.id, Index: at, LogTerm: prevTerm, Commit: n.commit, Conf: conf, Base: n.log.baseAt(at + 1)})
	pr.becomeReset(at, n.leaderTicks)
	return true
}

// stepLeader handles messages for the leader.
func (n *Node) stepLeader(m Message) {
	pr := n.progress(m.From)
	if pr == nil {
		return // not a member (removed, or a stale message)
	}
	switch m.Type {
	case MsgAppResp:
		pr.recentActive = true
		if m.Reject {
			n.handleAppReject(m, pr)
		} else {
			n.handleAppAck(m, pr)
		}
	case MsgHeartbeatResp:
		pr.recentActive = true
		pr.heartbeatAnswered = true
		pr.commit = m.Commit
		switch {
		case pr.state == ProgressProbe:
			pr.probeSent = false
		case pr.state == ProgressReplicate && pr.paused(n.lim):
			pr.freeFirst()
		case pr.state == ProgressReset && n.leaderTicks-pr.resetSentTick >= int64(n.lim.ResetRetryTicks):
			pr.becomeProbe() // the MsgReset or its answer was lost: retry
		}
		// A follower behind on entries needs them; one whose commit lags
		// ours needs an append to verify its log before it may follow the
		// commit (a restarted follower that already holds every entry
		// would otherwise wait for the next proposal).
		if pr.match < n.log.last() || (m.Commit < n.commit && pr.match > m.Commit) {
			n.sendAppend(pr, true)
		}
		// A transfer target that is caught up and answering was not
		// running when its MsgTimeoutNow arrived (a node that just
		// restarted, its group not open yet): send it again. A copy that
		// arrives after the target campaigned carries an old term and is
		// dropped.
		if n.transferee == pr.id && pr.match == n.log.last() {
			n.send(Message{Type: MsgTimeoutNow, To: pr.id})
		}
	}
}

// handleAppAck records an accepted append and sends what follows.
func (n *Node) handleAppAck(m Message, pr *progress) {
	if m.Index > n.log.last() {
		return // cannot be: a follower acknowledges only what we sent
	}
	probeFrom := pr.next
	if !pr.acked(m.Index) {
		if pr.state == ProgressProbe {
			pr.probeSent = false
		}
		return
	}
	switch {
	case pr.state == ProgressProbe:
		pr.next = probeFrom // acked moved it; the probe started here
		pr.replicateAfterProbe(m.Index)
	case pr.state == ProgressReset && pr.match >= pr.resetAt:
		pr.becomeReplicate()
	}
	if n.maybeCommit() {
		n.maybeLeaveAfterRemoval()
		if n.role != RoleLeader {
			return
		}
	}
	if n.transferee == pr.id && pr.match == n.log.last() {
		n.send(Message{Type: MsgTimeoutNow, To: pr.id})
	}
	n.sendAppends(pr)
}

// handleAppReject moves pr.next back after a log-matching failure, using
// the follower's hint to skip a whole divergent term at a time.
//
// A refusal at pr.match itself says the follower no longer holds what it
// acknowledged: its log acknowledges before it syncs and a power loss
// took the tail (every fsync policy but always). Such a refusal comes
// only from a message sent since match reached it (before, prevLast was
// below match or the append was accepted), so match is forgotten down to
// the follower's hint and probing goes on below it; a follower that lost
// entries would otherwise be refused every probe at match+1 for good. A
// refusal below match is stale: a later message matched.
func (n *Node) handleAppReject(m Message, pr *progress) {
	switch pr.state {
	case ProgressReplicate:
		if m.Index < pr.match {
			return // stale
		}
		pr.becomeProbe()
		if m.Index > pr.match {
			break
		}
		fallthrough // refused at match: probe below it at once
	case ProgressProbe:
		if m.Index != pr.next-1 {
			return // stale
		}
		to := n.probeTarget(m)
		if m.Index == pr.match && to < pr.match {
			pr.match = max(to, -1) // lost what it acknowledged (see above)
		}
		pr.next = max(to+1, pr.match+1)
		pr.probeSent = false
	default:
		return // a MsgReset is outstanding
	}
	n.sendAppend(pr, true)
}

// probeTarget returns where a rejected follower's log may match ours: the
// largest offset <= its hint whose term is <= the hint's term, snapped back
// to a batch end. A target below our log start-1 makes the next send a
// MsgReset; so does a probe at our log start that failed (log matching
// cannot look further back).
func (n *Node) probeTarget(m Message) int64 {
	start := n.log.start()
	probe := min(m.Index, m.Hint)
	if probe < start-1 {
		return probe
	}
	to, _ := n.log.findConflictByTerm(probe, m.HintTerm)
	if to >= start {
		if b, err := n.log.batchAt(to); err == nil && b.Last != to {
			to = b.Base - 1
		}
	}
	if to >= m.Index {
		return start - 2
	}
	return to
}

// maybeCommit advances the commit to the highest offset durable on a
// quorum of the voters, if it was created in this term. It reports whether
// it moved.
func (n *Node) maybeCommit() bool {
	var matches [NodeIDMax]int64
	k := 0
	for i := range n.prs {
		if !n.conf.Voters.Has(n.prs[i].id) {
			continue // learners, and a leader that removed itself
		}
		v := n.prs[i].match
		// Insertion sort, descending: at most 32 members.
		j := k
		for ; j > 0 && matches[j-1] < v; j-- {
			matches[j] = matches[j-1]
		}
		matches[j] = v
		k++
	}
	q := matches[n.conf.Voters.Quorum()-1]
	if q <= n.commit {
		return false
	}
	if t, err := n.log.termAt(q); err != nil || t != n.term {
		return false // Raft §5.4.2: count replicas only for our own term
	}
	n.commit = q
	i := 0
	for i < len(n.uncommitted) && n.uncommitted[i].last <= q {
		n.uncommittedBytes -= n.uncommitted[i].bytes
		i++
	}
	n.uncommitted = n.uncommitted[i:]
	if len(n.uncommitted) == 0 {
		n.uncommitted = nil
	}
	return true
}
