package raftlite

import (
	"errors"
	"fmt"
)

// ErrNotAdoptable is returned by Adopted when the node's view of its log
// cannot simply be extended to what the stable log now holds, and by
// SendReset for a reset the leader may not send.
var ErrNotAdoptable = errors.New("raftlite: log grown outside a Ready cannot be adopted")

// Adopted tells a follower that the node layer added the committed
// entries first..last to its stable log outside a Ready: a segment of the
// leader's log received whole (docs/design/moves.md, catch-up by whole
// segments), already durable. The view must end at first with nothing
// unwritten, and the stable log must now end at last+1; otherwise
// nothing changes and ErrNotAdoptable is returned.
//
// Adopted does not acknowledge anything: the entries match the leader's
// only if the leader said so, which it does with a MsgReset at last
// (SendReset), answered like a snapshot install that finds the log
// already matching there.
func (n *Node) Adopted(first, last int64) error {
	switch {
	case n.role == RoleLeader:
		return fmt.Errorf("%w: the leader's own log", ErrNotAdoptable)
	case n.log.reset != nil || len(n.log.unstable) > 0:
		return fmt.Errorf("%w: entries not yet written", ErrNotAdoptable)
	case n.log.uoff != first || last < first:
		return fmt.Errorf("%w: the log ends at %d, entries %d..%d", ErrNotAdoptable, n.log.uoff, first, last)
	case n.log.stable.EndOffset() != last+1:
		return fmt.Errorf("%w: the stable log ends at %d, not %d", ErrNotAdoptable, n.log.stable.EndOffset(), last+1)
	}
	n.log.uoff = last + 1
	n.durable = max(n.durable, last)
	return nil
}

// SendReset makes the leader send member to a MsgReset at offset at (with
// the term of at and the configuration in force there), as when the
// entries it needs were compacted: the node layer sent it the log up to
// at by other means (whole segments). A member whose log matches at keeps
// it and answers with at as its match; one that does not restarts its log
// at at+1, which is safe because at is committed. It returns ErrNotLeader,
// ErrUnknownPeer, or ErrNotAdoptable when at is not committed or not in
// the log.
func (n *Node) SendReset(member NodeID, at int64) error {
	if n.role != RoleLeader {
		return ErrNotLeader
	}
	pr := n.progress(member)
	if pr == nil || member == n.id {
		return fmt.Errorf("%w: %d", ErrUnknownPeer, member)
	}
	if at > n.commit {
		return fmt.Errorf("%w: reset at %d above the commit %d", ErrNotAdoptable, at, n.commit)
	}
	term, err := n.log.termAt(at)
	if err != nil {
		return fmt.Errorf("%w: term at %d: %w", ErrNotAdoptable, at, err)
	}
	conf, _, ok, err := n.log.confAt(at)
	if err != nil {
		return fmt.Errorf("%w: configuration at %d: %w", ErrNotAdoptable, at, err)
	}
	if !ok {
		conf = n.initConf
	}
	n.send(Message{Type: MsgReset, To: member, Index: at, LogTerm: term, Commit: n.commit, Conf: conf, Base: n.log.baseAt(at + 1)})
	pr.becomeReset(at, n.leaderTicks)
	return nil
}

// Sending returns the leader's view of what it sends member: the next
// offset and the entry bytes in flight (unacknowledged). ok is false when
// this node is not the leader or member is not one. A node layer that
// sends member part of the log by other means starts only when nothing is
// in flight (next is the match + 1).
func (n *Node) Sending(member NodeID) (next, inflightBytes int64, ok bool) {
	if pr := n.progress(member); pr != nil && n.role == RoleLeader {
		return pr.next, pr.inflightBytes, true
	}
	return 0, 0, false
}
