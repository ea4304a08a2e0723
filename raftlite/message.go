package raftlite

import (
	"fmt"
	"strings"
)

// MsgType is the kind of a Message.
type MsgType uint8

// Message types. The numbering is part of the node layer's wire format:
// never reuse or renumber a value.
const (
	msgInvalid MsgType = iota
	// MsgPreVote asks "would you vote for me at Term?" without anyone
	// changing term (Term is the candidate's term + 1). Index/LogTerm are
	// the candidate's last offset and its term.
	MsgPreVote
	// MsgPreVoteResp answers MsgPreVote. Term is the request's term when
	// granted, the voter's term when rejected.
	MsgPreVoteResp
	// MsgVote asks for a vote at Term. Index/LogTerm as for MsgPreVote;
	// Transfer is set when the campaign follows MsgTimeoutNow, which lets it
	// through the voters' leader lease.
	MsgVote
	// MsgVoteResp answers MsgVote; Reject says whether it was refused.
	MsgVoteResp
	// MsgApp carries entries (possibly none) that follow the entry ending at
	// Index with term LogTerm, and the leader's Commit.
	MsgApp
	// MsgAppResp answers MsgApp and MsgReset. Accepted: Index is the
	// follower's acknowledged offset (durable and matching the leader).
	// Rejected: Index is the rejected MsgApp's Index, and Hint/HintTerm say
	// where the follower's log may match (its largest offset <= Index whose
	// term is <= the rejected LogTerm, and that offset's term).
	MsgAppResp
	// MsgHeartbeat is the leader's keep-alive: Term and Commit only (and
	// Quiesce). It is small so that the node layer can pack the heartbeats
	// of every group toward one peer into one frame.
	MsgHeartbeat
	// MsgHeartbeatResp answers MsgHeartbeat with the follower's Term and,
	// in Commit, the follower's commit (the leader uses it to decide when
	// everyone is caught up and the group may quiesce).
	MsgHeartbeatResp
	// MsgTimeoutNow tells the leadership-transfer target to campaign at
	// once.
	MsgTimeoutNow
	// MsgReset tells a follower whose next entry the leader no longer has
	// to move its log start forward: the log restarts empty at Index+1 with
	// term LogTerm at Index. For the metadata group the node layer attaches
	// a state-machine snapshot in Snapshot; for partitions it stays nil (the
	// follower drops its log, as a Kafka follower does).
	MsgReset
	msgTypeCount
)

var msgTypeNames = [...]string{
	"MsgInvalid", "MsgPreVote", "MsgPreVoteResp", "MsgVote", "MsgVoteResp",
	"MsgApp", "MsgAppResp", "MsgHeartbeat", "MsgHeartbeatResp",
	"MsgTimeoutNow", "MsgReset",
}

// String returns the type's name, e.g. "MsgApp".
func (t MsgType) String() string {
	if int(t) < len(msgTypeNames) {
		return msgTypeNames[t]
	}
	return fmt.Sprintf("MsgType(%d)", t)
}

// IsHeartbeat reports whether messages of this type carry only (group,
// term, commit, flag) and may be coalesced by the node layer with those of
// every other group bound for the same peer.
func (t MsgType) IsHeartbeat() bool { return t == MsgHeartbeat || t == MsgHeartbeatResp }

// Message is what groups exchange. One struct serves every type; the field
// docs say which types use which field. The node layer encodes only the
// fields a type uses.
type Message struct {
	Type  MsgType
	Group GroupID
	From  NodeID
	To    NodeID
	// Term is the sender's term (see MsgPreVote/MsgPreVoteResp for the
	// exceptions).
	Term int32
	// Index is an offset: the previous entry's last offset (MsgApp), the
	// candidate's last offset (votes), the acknowledged or rejected offset
	// (MsgAppResp), the offset before the new log start (MsgReset).
	Index int64
	// LogTerm is the term at Index in the sender's log (MsgApp, votes,
	// MsgReset).
	LogTerm int32
	// Commit is the leader's commit offset (MsgApp, MsgHeartbeat, MsgReset)
	// or the follower's (MsgHeartbeatResp).
	Commit int64
	// Entries are the batches of a MsgApp, in offset order, contiguous,
	// starting at Index+1. Their Data may be nil (by reference): the node
	// layer fills or sendfiles the bytes from its log when it sends.
	Entries []Entry
	// Reject marks a refused vote or append.
	Reject bool
	// Hint and HintTerm guide the leader's back-off (rejected MsgAppResp).
	Hint     int64
	HintTerm int32
	// Transfer marks a MsgVote of a campaign started by MsgTimeoutNow.
	Transfer bool
	// Quiesce marks a MsgHeartbeat after which a caught-up follower stops
	// its election timer (see Config.Quiesce).
	Quiesce bool
	// Snapshot is opaque state-machine data attached to a MsgReset by the
	// node layer (metadata group); nil for partitions.
	Snapshot []byte
	// Conf is the configuration in force at Index (MsgReset): the
	// follower's log restarts with it as its base.
	Conf Membership
	// Base is opaque to raftlite: the leader's log's BaseAt(Index+1)
	// (see BaseLog), handed to the follower in LogReset.Base (MsgReset).
	Base int64
}

// String formats the fields the type uses, for logs and golden tests.
func (m Message) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d->%d %s Term:%d", m.From, m.To, m.Type, m.Term)
	switch m.Type {
	case MsgPreVote, MsgVote:
		fmt.Fprintf(&b, " Last:%d/%d", m.LogTerm, m.Index)
		if m.Transfer {
			b.WriteString(" Transfer")
		}
	case MsgPreVoteResp, MsgVoteResp:
		if m.Reject {
			b.WriteString(" Rejected")
		}
	case MsgApp:
		fmt.Fprintf(&b, " Prev:%d/%d Commit:%d", m.LogTerm, m.Index, m.Commit)
		if len(m.Entries) > 0 {
			b.WriteString(" Entries:[")
			for i, e := range m.Entries {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(e.String())
			}
			b.WriteByte(']')
		}
	case MsgAppResp:
		if m.Reject {
			fmt.Fprintf(&b, " Rejected:%d Hint:%d/%d", m.Index, m.HintTerm, m.Hint)
		} else {
			fmt.Fprintf(&b, " Ack:%d", m.Index)
		}
	case MsgHeartbeat:
		fmt.Fprintf(&b, " Commit:%d", m.Commit)
		if m.Quiesce {
			b.WriteString(" Quiesce")
		}
	case MsgHeartbeatResp:
		fmt.Fprintf(&b, " Commit:%d", m.Commit)
	case MsgReset:
		fmt.Fprintf(&b, " Start:%d PrevTerm:%d Commit:%d", m.Index+1, m.LogTerm, m.Commit)
		if m.Snapshot != nil {
			fmt.Fprintf(&b, " Snapshot:%dB", len(m.Snapshot))
		}
		if !m.Conf.IsZero() {
			fmt.Fprintf(&b, " Conf:%v", m.Conf)
		}
	}
	return b.String()
}

// validate checks the fields that Step trusts: entry shape and offsets.
func (m *Message) validate() error {
	if m.Type == msgInvalid || m.Type >= msgTypeCount {
		return fmt.Errorf("%w: type %d", ErrInvalidMessage, m.Type)
	}
	if m.Term < 0 || m.LogTerm < 0 || m.Index < -1 {
		return fmt.Errorf("%w: negative term or offset", ErrInvalidMessage)
	}
	if !m.Conf.IsZero() && !m.Conf.valid() {
		return fmt.Errorf("%w: configuration %v", ErrInvalidMessage, m.Conf)
	}
	next, prevTerm := m.Index+1, m.LogTerm
	for _, e := range m.Entries {
		if e.Kind >= entryKindCount || (e.Kind == EntryConfChange) != e.Conf.valid() || (e.Kind == EntryConfChange && e.Last != e.Base) {
			return fmt.Errorf("%w: entry %v of kind %d", ErrInvalidMessage, e, e.Kind)
		}
		if e.Base != next || e.Last < e.Base || e.Term < prevTerm || e.Term < 1 || e.Term > m.Term || e.Bytes < 0 {
			return fmt.Errorf("%w: entry %v after %d/%d", ErrInvalidMessage, e, prevTerm, next-1)
		}
		next, prevTerm = e.Last+1, e.Term
	}
	return nil
}
