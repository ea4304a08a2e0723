package raftlite

// Ready is what a Node asks the node layer to do, taken with Node.Ready and
// confirmed with Node.Advance. Handle the fields in this order; the order is
// the durability contract:
//
//  1. HardState (when HardStateChanged): write it and make it durable
//     (fsync) before step 4. A vote therefore never leaves the node before it
//     is durable, and a node never acts in a term it could forget.
//  2. Reset (when non-nil): replace the log with an empty one starting at
//     Reset.Start (term Reset.PrevTerm at Start-1), installing
//     Reset.Snapshot for the metadata group. Make it durable before step 4:
//     the acknowledgement in Messages claims it.
//  3. Entries: truncate the log to end at Entries[0].Base (when it is below
//     the log end) and append Entries. The leader's own proposals carry
//     their bytes in Data: stamp Base and Term into the batch header
//     (offset and partition leader epoch, outside the CRC) before writing.
//     An EntryLeaderNoop has no Data: write a one-record control batch.
//     These writes need NOT be durable before step 4: report durability
//     later with Node.Durable (the segment log's group commit). They must
//     be readable through the Log before step 4, because MsgApps in
//     Messages may refer to them by offset.
//  4. Messages: send them. MsgApp entries with nil Data are read (or
//     sendfiled) from the log. Heartbeats (Type.IsHeartbeat) may be held
//     until the end of the tick and packed with every other group's into
//     one frame per peer.
//  5. Commit: the high watermark is Commit+1. Acknowledge proposals whose
//     Last <= Commit, when the log still holds term Entry.Term at Last; when
//     it holds another term there the proposal was lost (a new leader
//     replaced it). Before the commit reaches Last the outcome is open,
//     even after this node lost leadership or the entry left its log: a
//     later leader that holds the entry may still commit it. A client told
//     NOT_PRIMARY then must treat the write as unknown (retry idempotently).
//  6. Call Node.Advance(rd).
//
// Why acknowledgements are safe: a follower only acknowledges offsets that
// Durable has reported (its MsgAppResp carries min(durable, matched)), and a
// leader counts itself in the quorum only up to its own durable offset, so
// Commit never covers an entry that fewer than a quorum hold on disk.
type Ready struct {
	// HardState is the current term and vote; persist it when
	// HardStateChanged.
	HardState        HardState
	HardStateChanged bool
	// Reset, when non-nil, replaces the log (see step 2).
	Reset *LogReset
	// Entries are to be appended (see step 3). Shared with the Node: do
	// not modify.
	Entries []Entry
	// Commit is the commit offset (inclusive; -1 when nothing is
	// committed). CommitChanged says it moved since the last Ready.
	Commit        int64
	CommitChanged bool
	// Lead and Role are the current leader and this node's role;
	// SoftStateChanged says either changed since the last Ready (update
	// routes).
	Lead             NodeID
	Role             Role
	SoftStateChanged bool
	// Conf is the configuration in force (the latest in the log, committed
	// or not); ConfChanged says it changed since the last Ready: start
	// serving a node added as a learner, stop routing to a removed one.
	// Entries (or Reset) in the same Ready carry the entry that installed
	// it, or the truncation that reverted it.
	Conf        Membership
	ConfChanged bool
	// Messages are to be sent after steps 1-3.
	Messages []Message
}
