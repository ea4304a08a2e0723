package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard"
)

// Membership changes of a partition group (raftlite's single-server
// changes, docs/design/consensus.md): the primary appends a configuration
// entry, a one-record control batch (segment.MarkerBatch) whose value is
// the new configuration (confPayload). The segment log marks the batch
// (segment.Marker), which is how raftlite's ConfLog finds the
// configuration in force at any offset after a restart or a truncation;
// a follower writes the primary's bytes and marks them the same way.
//
// The node layer drives a move as: AddLearner(new) on the primary, open a
// replica on the new node with Config.Learners holding itself, wait for
// MemberProgress to report it CaughtUp, Promote(new), then
// RemoveMember(old) and close the old node's replica once Removed reports
// it. Each call waits for its entry to commit; one change at a time.

// Errors of membership changes, beside raftlite's (which the results wrap:
// raftlite.ErrConfChangePending, ErrInvalidConfChange, ErrLearnerBehind)
// and ErrNotPrimary.
var (
	// ErrConfChangeUnknown answers a change whose primary lost its role
	// before the entry committed: a later primary that holds the entry may
	// still commit it. Read the configuration from the new primary
	// (Membership) before retrying.
	ErrConfChangeUnknown = errors.New("partition: membership change outcome unknown")
	// ErrConfChangeLost answers a change whose entry a new primary
	// replaced: it never took effect. Retry on the current primary.
	ErrConfChangeLost = errors.New("partition: membership change lost")
)

// confPayloadVersion is the first byte of a configuration entry's value;
// the layout is version u8, voters u32, learners u32 (bit i-1: node i).
// Never change a version's layout: the bytes are in every replica's log.
const (
	confPayloadVersion = 1
	confPayloadBytes   = 1 + 4 + 4
)

// confPayload encodes c as a configuration entry's value (nil for the
// zero configuration: none known).
func confPayload(c raftlite.Membership) []byte {
	if c.IsZero() {
		return nil
	}
	b := make([]byte, confPayloadBytes)
	b[0] = confPayloadVersion
	binary.BigEndian.PutUint32(b[1:], uint32(c.Voters))
	binary.BigEndian.PutUint32(b[5:], uint32(c.Learners))
	return b
}

// decodeConf decodes a configuration entry's value.
func decodeConf(b []byte) (raftlite.Membership, error) {
	if len(b) != confPayloadBytes || b[0] != confPayloadVersion {
		return raftlite.Membership{}, fmt.Errorf("partition: configuration record of %d bytes, version %d", len(b), firstByte(b))
	}
	c := raftlite.Membership{
		Voters:   raftlite.ReplicaSet(binary.BigEndian.Uint32(b[1:])),
		Learners: raftlite.ReplicaSet(binary.BigEndian.Uint32(b[5:])),
	}
	if c.Voters == 0 || c.Voters&c.Learners != 0 {
		return raftlite.Membership{}, fmt.Errorf("partition: configuration record holds an invalid configuration %v", c)
	}
	return c, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// confBatch returns the bytes of configuration entry e: the primary's own
// entry is built here, a follower's came from the primary and must hold
// e.Conf.
func (r *Replica) confBatch(e raftlite.Entry) ([]byte, []byte, error) {
	payload := confPayload(e.Conf)
	if e.Data == nil {
		if !r.cfg.DenseOffsets {
			return segment.MarkerBatchWide(payload, r.cfg.NowMs()), payload, nil
		}
		return segment.MarkerBatch(payload, r.cfg.NowMs()), payload, nil
	}
	got, ok := segment.MarkerPayload(e.Data)
	if !ok || string(got) != string(payload) {
		return nil, nil, fmt.Errorf("entry %v: its batch does not hold configuration %v", e, e.Conf)
	}
	return e.Data, payload, nil
}

// ConfChangeResult answers ChangeMembership: where the configuration
// entry landed and the configuration it installed, or Err.
type ConfChangeResult struct {
	Offset int64
	Conf   raftlite.Membership
	Err    error
}

// pendingConf is the membership change waiting for its entry to commit.
type pendingConf struct {
	entry raftlite.Entry
	reply func(ConfChangeResult)
}

// AddLearner adds node id to the group as a learner: it receives the log
// but does not vote or count for the commit. reply runs once the entry
// commits (see ChangeMembership).
func (r *Replica) AddLearner(id raftlite.NodeID, reply func(ConfChangeResult)) {
	r.ChangeMembership(raftlite.ConfChange{Type: raftlite.ConfAddLearner, Node: id}, reply)
}

// Promote makes learner id a voter once it holds the committed log
// (raftlite refuses before: a voter that lacks committed entries could
// help elect a primary without them). With wait 0 a learner behind is
// refused at once (raftlite.ErrLearnerBehind); with wait > 0 the change
// is proposed the moment an acknowledgement from the learner reaches the
// commit, and refused with ErrLearnerBehind only when wait passes first.
// Under a steady produce the commit moves on with every batch, so a
// caller that polls MemberProgress and proposes at once races it: give a
// wait. Other answers as ChangeMembership.
func (r *Replica) Promote(id raftlite.NodeID, wait time.Duration, reply func(ConfChangeResult)) {
	cc := raftlite.ConfChange{Type: raftlite.ConfPromote, Node: id}
	if wait <= 0 || r.closed || r.raft == nil || r.raft.Role() != raftlite.RoleLeader || r.confQ != nil || r.promoteQ != nil ||
		!r.raft.Membership().Learners.Has(id) {
		r.ChangeMembership(cc, reply) // answers at once, or proposes
		return
	}
	p := &pendingPromote{id: id, reply: reply}
	p.timer = r.cfg.Sched.AfterFunc(wait, func() {
		if r.promoteQ != p {
			return
		}
		r.promoteQ = nil
		match, _ := r.raft.Match(id)
		reply(ConfChangeResult{Offset: -1, Err: fmt.Errorf("partition %s/%d: %v: %w: not within %v (matched %d, commit %d)",
			r.cfg.Topic, r.cfg.Partition, cc, raftlite.ErrLearnerBehind, wait, match, r.raft.Commit())})
	})
	r.promoteQ = p
	r.tryPromote()
}

// pendingPromote is a promotion waiting for its learner to catch up.
type pendingPromote struct {
	id    raftlite.NodeID
	reply func(ConfChangeResult)
	timer *shard.Timer
}

// tryPromote proposes the waiting promotion once the learner's match
// reaches the commit (after every message this replica steps).
func (r *Replica) tryPromote() {
	p := r.promoteQ
	if p == nil || r.raft == nil {
		return
	}
	if match, ok := r.raft.Match(p.id); !ok || match < r.raft.Commit() {
		return
	}
	r.promoteQ = nil
	r.cfg.Sched.Stop(p.timer)
	r.ChangeMembership(raftlite.ConfChange{Type: raftlite.ConfPromote, Node: p.id}, p.reply)
}

// RemoveMember removes voter or learner id; the primary itself included,
// which then leads until the entry commits and hands over to a caught-up
// voter.
func (r *Replica) RemoveMember(id raftlite.NodeID, reply func(ConfChangeResult)) {
	r.ChangeMembership(raftlite.ConfChange{Type: raftlite.ConfRemove, Node: id}, reply)
}

// ChangeMembership proposes cc on this primary and calls reply once: when
// the entry commits (Err nil), or with ErrNotPrimary (not the primary:
// the error carries the hint), an error wrapping raftlite's
// ErrConfChangePending (one change at a time: retry once the previous one
// committed), ErrInvalidConfChange, ErrLearnerBehind,
// ErrProposalBackpressure or ErrTransferInProgress, ErrConfChangeUnknown
// (the primary lost its role before the commit) or ErrConfChangeLost,
// ErrStorage, or ErrClosed.
func (r *Replica) ChangeMembership(cc raftlite.ConfChange, reply func(ConfChangeResult)) {
	fail := func(err error) { reply(ConfChangeResult{Offset: -1, Err: err}) }
	if r.closed {
		fail(ErrClosed)
		return
	}
	if r.failure != nil || r.raft == nil {
		fail(errorf(ErrStorage, "partition %s/%d is offline on node %d: %v", r.cfg.Topic, r.cfg.Partition, r.cfg.Self, r.failure))
		return
	}
	if r.raft.Role() != raftlite.RoleLeader {
		fail(r.notPrimaryErr())
		return
	}
	if r.confQ != nil {
		fail(fmt.Errorf("%w: %v waits for its commit at %d", raftlite.ErrConfChangePending, r.confQ.entry.Conf, r.confQ.entry.Last))
		return
	}
	if r.promoteQ != nil {
		fail(fmt.Errorf("%w: the promotion of %d waits for it to catch up", raftlite.ErrConfChangePending, r.promoteQ.id))
		return
	}
	e, err := r.raft.ProposeConfChange(cc)
	if err != nil {
		fail(fmt.Errorf("partition %s/%d: %v: %w", r.cfg.Topic, r.cfg.Partition, cc, err))
		return
	}
	r.confQ = &pendingConf{entry: e, reply: reply}
	r.process()
}

// completeConf answers the pending change once commit covers it.
func (r *Replica) completeConf(commit int64) {
	p := r.confQ
	if p == nil || commit < p.entry.Last {
		return
	}
	r.confQ = nil
	if t, err := r.rlog.TermAt(p.entry.Last); err != nil || t != p.entry.Term {
		p.reply(ConfChangeResult{Offset: -1, Err: fmt.Errorf("%w: offset %d holds another primary's entry", ErrConfChangeLost, p.entry.Last)})
		return
	}
	p.reply(ConfChangeResult{Offset: p.entry.Last, Conf: p.entry.Conf})
}

// failConf answers the pending change: its outcome is open (the replica
// stepped down, restarted or closed before the commit).
func (r *Replica) failConf(cause error) {
	if pp := r.promoteQ; pp != nil {
		r.promoteQ = nil
		r.cfg.Sched.Stop(pp.timer)
		pp.reply(ConfChangeResult{Offset: -1, Err: fmt.Errorf("partition %s/%d: promotion of %d not proposed: %w", r.cfg.Topic, r.cfg.Partition, pp.id, cause)})
	}
	p := r.confQ
	if p == nil {
		return
	}
	r.confQ = nil
	p.reply(ConfChangeResult{Offset: -1, Err: fmt.Errorf("%w: entry at %d: %w", ErrConfChangeUnknown, p.entry.Last, cause)})
}

// onConfChanged runs when the configuration in force changed (an entry
// appended or truncated, a reset): the node learns it through OnConf
// (start or stop replication links, routes, the in-sync table).
// raftlite itself starts and stops replicating to members, and a removed
// primary steps down once its removal commits.
func (r *Replica) onConfChanged(conf raftlite.Membership) {
	if r.cfg.OnConf != nil {
		r.cfg.OnConf(r, conf)
	}
}

// voterInLog reports whether this node is a voter of the configuration
// its log holds, or the log holds none: a replica whose log removed it
// (or made it a learner) does not campaign early as the preferred primary
// of the creation configuration the node may still pass.
func (r *Replica) voterInLog() bool {
	conf, _, ok, err := r.rlog.ConfAt(r.rlog.EndOffset() - 1)
	return err != nil || !ok || conf.Voters.Has(r.cfg.Self)
}

// Membership is the configuration in force: the latest in the log,
// committed or not.
func (r *Replica) Membership() raftlite.Membership {
	if r.raft == nil {
		return raftlite.Membership{Voters: raftlite.NewReplicaSet(r.cfg.Replicas...), Learners: raftlite.NewReplicaSet(r.cfg.Learners...)}
	}
	return r.raft.Membership()
}

// Voters is the voters in force, in the order of Config.Replicas
// (preferred first) and then by id for voters added since.
func (r *Replica) Voters() []raftlite.NodeID {
	set := r.Membership().Voters
	out := make([]raftlite.NodeID, 0, set.Len())
	for _, id := range r.cfg.Replicas {
		if set.Has(id) {
			out = append(out, id)
			set &^= raftlite.NewReplicaSet(id)
		}
	}
	return append(out, set.IDs()...)
}

// Removed reports whether this replica is no longer a member and knows
// its removal committed: the node may close it and delete its data.
func (r *Replica) Removed() bool {
	if r.raft == nil {
		return false
	}
	st := r.raft.Status()
	return !st.Conf.Members().Has(r.cfg.Self) && st.ConfIndex <= r.commit
}

// ConfCommitted reports whether the configuration in force is committed
// (no membership change waits for its commit): a driver of a move takes
// its next step only then.
func (r *Replica) ConfCommitted() bool {
	if r.raft == nil {
		return false
	}
	return r.raft.Status().ConfIndex <= r.commit
}

// MemberProgress is the primary's view of one member.
type MemberProgress struct {
	ID      raftlite.NodeID
	Learner bool
	// Match is the last offset known to be on the member (durable there);
	// -1 when none yet.
	Match int64
	// EntriesBehind and BytesBehind measure what the member lacks up to
	// the primary's log end: offsets and log bytes.
	EntriesBehind int64
	BytesBehind   int64
	// Active says the member answered in the current check-quorum
	// interval.
	Active bool
	// CaughtUp says the member holds the committed log: a learner may be
	// promoted (raftlite refuses before).
	CaughtUp bool
}

// MemberProgress returns the primary's view of every member (itself
// included), sorted by id; ErrNotPrimary on a replica that does not lead.
func (r *Replica) MemberProgress() ([]MemberProgress, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if r.raft == nil || r.raft.Role() != raftlite.RoleLeader {
		return nil, r.notPrimaryErr()
	}
	st := r.raft.Status()
	end := r.log.LogEndOffset()
	out := make([]MemberProgress, 0, len(st.Progress))
	for _, p := range st.Progress {
		if !st.Conf.Members().Has(p.ID) {
			continue // a primary that removed itself
		}
		mp := MemberProgress{ID: p.ID, Learner: p.Learner, Match: p.Match, Active: p.Active,
			EntriesBehind: max(0, end-(p.Match+1)), CaughtUp: p.Match >= st.Commit}
		mp.BytesBehind = r.bytesFrom(p.Match + 1)
		out = append(out, mp)
	}
	return out, nil
}

// bytesFrom is the log bytes from offset off (clamped to the log start)
// to the log end: what a member at off still has to receive. Its loop
// reads at most 1 GiB of spans a round and is bounded by the segment
// count plus the rounds that takes.
func (r *Replica) bytesFrom(off int64) int64 {
	const readBytesMax = 1 << 30
	off = max(off, r.log.LogStartOffset())
	written := r.log.WrittenOffset()
	var n int64
	for rounds := 0; off <= written && rounds <= r.log.SegmentCount()+int(r.log.Size()/readBytesMax); rounds++ {
		spans, err := r.log.Read(off, readBytesMax, written)
		if err != nil || len(spans) == 0 {
			break
		}
		for _, sp := range spans {
			n += sp.Len
		}
		off = spans[len(spans)-1].LastOffset + 1
		segment.ReleaseSpans(spans)
	}
	// Batches appended but not yet written are in the tail.
	for _, e := range r.rlog.tail {
		if e.Base > written && e.Base >= off {
			n += int64(e.Bytes)
		}
	}
	return n
}

// fillConfData gives this primary's fresh configuration entries in
// outgoing appends the bytes just written: raftlite sized them with its
// estimate, and an append by reference would not match the log.
func (r *Replica) fillConfData(msgs []raftlite.Message) {
	if r.confData == nil {
		return
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Type != raftlite.MsgApp {
			continue
		}
		for j := range m.Entries {
			if e := &m.Entries[j]; e.Kind == raftlite.EntryConfChange && e.Data == nil && e.Last == r.confDataAt {
				e.Data, e.Bytes = r.confData, int32(len(r.confData))
			}
		}
	}
}
