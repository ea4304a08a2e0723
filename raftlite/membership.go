package raftlite

import "fmt"

// Membership is a group's configuration: the voters, who elect leaders and
// whose majority commits, and the learners, who receive the log but never
// vote, never campaign and never count for a quorum.
//
// Invariant (of every configuration raftlite uses): Voters is not empty and
// Voters and Learners are disjoint. The zero Membership means "none known".
type Membership struct {
	Voters   ReplicaSet
	Learners ReplicaSet
}

// Members is every node of the configuration: voters and learners.
func (c Membership) Members() ReplicaSet { return c.Voters | c.Learners }

// IsZero reports whether c is the zero Membership ("none known").
func (c Membership) IsZero() bool { return c == Membership{} }

// String formats c as "voters={1,2,3}", with " learners={4}" when there
// are learners.
func (c Membership) String() string {
	s := "voters=" + c.Voters.String()
	if c.Learners != 0 {
		s += " learners=" + c.Learners.String()
	}
	return s
}

// valid reports whether c satisfies the Membership invariant.
func (c Membership) valid() bool { return c.Voters != 0 && c.Voters&c.Learners == 0 }

// ConfChangeType is the kind of a single-server membership change.
type ConfChangeType uint8

// Membership change kinds. The numbering may reach the node layer's wire
// and disk formats: never reuse or renumber a value.
const (
	confChangeInvalid ConfChangeType = iota
	// ConfAddLearner adds a node that is not a member as a learner.
	ConfAddLearner
	// ConfPromote makes a learner a voter.
	ConfPromote
	// ConfRemove removes a voter (the leader itself included) or a
	// learner.
	ConfRemove
)

var confChangeNames = [...]string{"invalid", "add-learner", "promote", "remove"}

// String returns the change's name, e.g. "add-learner".
func (t ConfChangeType) String() string {
	if int(t) < len(confChangeNames) {
		return confChangeNames[t]
	}
	return fmt.Sprintf("ConfChangeType(%d)", t)
}

// ConfChange is one single-server membership change.
type ConfChange struct {
	Type ConfChangeType
	Node NodeID
}

// String formats the change as "add-learner 4".
func (cc ConfChange) String() string { return fmt.Sprintf("%v %d", cc.Type, cc.Node) }

// apply returns the configuration that follows c after cc, or an error
// wrapping ErrInvalidConfChange.
func (cc ConfChange) apply(c Membership) (Membership, error) {
	id := cc.Node
	if id == None || id > NodeIDMax {
		return c, fmt.Errorf("%w: %v: node id not in 1..%d", ErrInvalidConfChange, cc, NodeIDMax)
	}
	switch cc.Type {
	case ConfAddLearner:
		if c.Members().Has(id) {
			return c, fmt.Errorf("%w: %v: already a member of %v", ErrInvalidConfChange, cc, c)
		}
		c.Learners = c.Learners.Add(id)
	case ConfPromote:
		if !c.Learners.Has(id) {
			return c, fmt.Errorf("%w: %v: not a learner of %v", ErrInvalidConfChange, cc, c)
		}
		c.Learners = c.Learners.remove(id)
		c.Voters = c.Voters.Add(id)
	case ConfRemove:
		if !c.Members().Has(id) {
			return c, fmt.Errorf("%w: %v: not a member of %v", ErrInvalidConfChange, cc, c)
		}
		if c.Voters == NewReplicaSet(id) {
			return c, fmt.Errorf("%w: %v: the last voter", ErrInvalidConfChange, cc)
		}
		c.Voters, c.Learners = c.Voters.remove(id), c.Learners.remove(id)
	default:
		return c, fmt.Errorf("%w: type %d", ErrInvalidConfChange, cc.Type)
	}
	return c, nil
}

// remove returns s without id.
func (s ReplicaSet) remove(id NodeID) ReplicaSet {
	if id == None || id > NodeIDMax {
		return s
	}
	return s &^ (1 << (id - 1))
}

// ConfLog is a Log that also answers which configuration is in force at an
// offset. A group whose membership may change needs one (ProposeConfChange
// refuses otherwise), on every replica: it is how a restarted node, or one
// whose uncommitted configuration entry was truncated, finds the
// configuration its log implies. MemLog scans its entries; the segment log
// is to keep a small cache of its EntryConfChange batches, truncated with
// the log and kept for StartOffset-1 like its leader-epoch cache.
type ConfLog interface {
	Log
	// ConfAt returns the configuration in force at offset, for offset in
	// [StartOffset-1, EndOffset-1]: the Conf of the last EntryConfChange
	// batch ending at or below offset, and that batch's last offset; or,
	// when there is none, the Conf of the LogReset the log last started
	// from, and StartOffset-1. ok is false when neither exists: the log
	// has held no configuration, and Config.Replicas and Config.Learners
	// are in force. It returns ErrCompacted below that range and
	// ErrUnavailable above it.
	ConfAt(offset int64) (conf Membership, at int64, ok bool, err error)
}

// confAt returns the configuration in force at off in the view and the
// offset of the entry that installed it; ok is false when the view holds
// none (the creation configuration is in force). The loop over the
// unstable tail is bounded by its length.
// REQUIRES: start()-1 <= off <= last().
func (l *raftLog) confAt(off int64) (conf Membership, at int64, ok bool, err error) {
	if off >= l.uoff {
		for i := l.unstableIndex(off); i >= 0; i-- {
			if i < len(l.unstable) {
				if e := l.unstable[i]; e.Kind == EntryConfChange && e.Last <= off {
					return e.Conf, e.Last, true, nil
				}
			}
		}
		off = l.uoff - 1
	}
	if l.reset != nil {
		// The stable log is shadowed; the reset carries the base.
		if l.reset.Conf.IsZero() {
			return Membership{}, -1, false, nil
		}
		return l.reset.Conf, l.reset.Start - 1, true, nil
	}
	cl, isConfLog := l.stable.(ConfLog)
	if !isConfLog {
		return Membership{}, -1, false, nil
	}
	return cl.ConfAt(off)
}

// refreshConf recomputes the configuration in force from the log view
// (after a restart, a truncation or a reset).
func (n *Node) refreshConf() {
	conf, at, ok, err := n.log.confAt(n.log.last())
	if err != nil {
		panic(fmt.Sprintf("raftlite: group %d node %d: configuration at %d: %v", n.group, n.id, n.log.last(), err))
	}
	if !ok {
		conf, at = n.initConf, -1
	}
	n.setConf(conf, at)
}

// noteAppended installs the configuration of the last EntryConfChange in
// ents, just appended to the view (a configuration is in force from the
// moment it is in the log, committed or not).
func (n *Node) noteAppended(ents []Entry) {
	for i := len(ents) - 1; i >= 0; i-- {
		if ents[i].Kind == EntryConfChange {
			n.setConf(ents[i].Conf, ents[i].Last)
			return
		}
	}
}

// setConf puts conf (installed at offset at) in force: on a leader the
// progress follows the members.
func (n *Node) setConf(conf Membership, at int64) {
	if !conf.valid() {
		panic(fmt.Sprintf("raftlite: group %d node %d: invalid configuration %v at %d", n.group, n.id, conf, at))
	}
	n.conf, n.confAt = conf, at
	if n.role == RoleLeader {
		n.syncProgress()
	}
}

// syncProgress makes prs hold exactly this leader and the members, sorted
// by id; a new member starts probing at the log end. The loop is bounded
// by NodeIDMax.
func (n *Node) syncProgress() {
	ids := n.conf.Members().Add(n.id).IDs()
	prs := make([]progress, 0, len(ids))
	next := n.log.end()
	for _, id := range ids {
		if pr := n.progress(id); pr != nil {
			prs = append(prs, *pr)
			continue
		}
		prs = append(prs, progress{id: id, match: -1, next: next, commit: -1, recentActive: true})
	}
	n.prs = prs
}

// isVoter reports whether this node is a voter of the configuration in
// force.
func (n *Node) isVoter() bool { return n.conf.Voters.Has(n.id) }

// canCampaign reports whether this node may start an election: a voter,
// or a node removed by a configuration entry it does not know to be
// committed. A learner never campaigns, nor does a node whose removal it
// knows committed. The second case matters when a leader removed itself
// and lost leadership before the removal committed: it may hold the only
// log the remaining voters would elect, and it must be able to win (with
// their votes alone: its own does not count), commit the removal and step
// down, or the group is stuck. Raft's election rule with the candidate's
// latest configuration keeps this safe whether or not the candidate
// belongs to it.
func (n *Node) canCampaign() bool {
	return n.isVoter() || (!n.conf.Learners.Has(n.id) && n.confAt > n.commit)
}

// votes is the number of voters among granted: only they count.
func (n *Node) votes(granted ReplicaSet) int { return (granted & n.conf.Voters).Len() }

// Membership is the configuration in force: the latest in the log,
// committed or not.
func (n *Node) Membership() Membership { return n.conf }

// ProposeConfChange appends, as leader, an EntryConfChange that installs
// the configuration following cc; it is in force on each node from the
// moment that node appends it. It returns the entry (Conf holds the new
// configuration); like a proposal, it is done when a Ready reports
// Commit >= Last with the log still holding Term at Last. One change at a
// time: it returns ErrConfChangePending until the previous configuration
// entry is committed and this leader has committed an entry of its own
// term. It returns ErrNotLeader, ErrTransferInProgress,
// ErrInvalidConfChange (the change does not fit the configuration, or the
// log is not a ConfLog), ErrLearnerBehind (promotion of a learner whose
// matched offset is below the commit) or ErrProposalBackpressure.
func (n *Node) ProposeConfChange(cc ConfChange) (Entry, error) {
	switch {
	case n.role != RoleLeader:
		return Entry{}, ErrNotLeader
	case n.transferee != None:
		return Entry{}, ErrTransferInProgress
	case n.confAt > n.commit || n.commit < n.termStart:
		return Entry{}, fmt.Errorf("%w: configuration at %d, own term from %d, commit %d",
			ErrConfChangePending, n.confAt, n.termStart, n.commit)
	}
	if _, ok := n.log.stable.(ConfLog); !ok {
		return Entry{}, fmt.Errorf("%w: the log does not record configurations (not a ConfLog)", ErrInvalidConfChange)
	}
	conf, err := cc.apply(n.conf)
	if err != nil {
		return Entry{}, err
	}
	if cc.Type == ConfPromote {
		if match, _ := n.Match(cc.Node); match < n.commit {
			return Entry{}, fmt.Errorf("%w: learner %d matched %d, commit %d", ErrLearnerBehind, cc.Node, match, n.commit)
		}
	}
	bytes := n.lim.NoopBytes
	if n.uncommittedBytes > 0 && n.uncommittedBytes+int64(bytes) > n.lim.UncommittedBytesMax {
		return Entry{}, ErrProposalBackpressure
	}
	n.unquiesce()
	base := n.log.end()
	e := Entry{Base: base, Last: base, Term: n.term, Bytes: bytes, Kind: EntryConfChange, Conf: conf}
	n.setConf(conf, e.Last) // first, so that a new member's next is e.Base
	n.appendAsLeader(e)
	return e, nil
}

// maybeLeaveAfterRemoval makes a leader that is not a voter of the
// configuration in force step down once that configuration is committed:
// until then it leads (and replicates) without counting itself. On its
// way out it tells a caught-up voter to campaign at once (MsgTimeoutNow),
// so that the group does not wait an election timeout for a new leader.
func (n *Node) maybeLeaveAfterRemoval() {
	if n.role != RoleLeader || n.isVoter() || n.commit < n.confAt {
		return
	}
	heir, heirMatch := None, int64(-1)
	for i := range n.prs {
		pr := &n.prs[i]
		if pr.id != n.id && n.conf.Voters.Has(pr.id) && pr.match > heirMatch {
			heir, heirMatch = pr.id, pr.match
		}
	}
	if heir != None && heirMatch == n.log.last() {
		n.send(Message{Type: MsgTimeoutNow, To: heir})
	}
	n.becomeFollower(n.term, None)
}
