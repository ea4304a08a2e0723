// Package raftlite is the consensus core of every partition group and of the
// metadata group: Raft as a pure state machine, in the manner of
// etcd-io/raft's RawNode. It starts no goroutine, reads no clock, uses no
// global randomness (a seed comes in through Config) and does no I/O.
//
// # Inputs and outputs
//
//	  Tick  Step(msg)  Propose  Campaign  TransferLeadership
//	    |       |         |        |              |
//	    v       v         v        v              v
//	+----------------------------------------------------+
//	|                        Node                        |<-- Durable(offset, term)
//	+----------------------------------------------------+<-- Unquiesce
//	         |  HasReady / Ready          ^ Advance(rd)
//	         v                            |
//	node layer: persist HardState, apply Reset, append Entries,
//	            send Messages, acknowledge up to Commit
//
// Ready documents the order in which the node layer must make things
// durable and send them; that order is the whole durability contract.
//
// # Log, offsets and terms
//
// An entry is a record batch covering offsets [Base, Last]; a proposal of n
// records takes n offsets. The partition's log is the consensus log: the
// leader assigns Base and stamps its term, which the node layer writes into
// the batch header (base offset and partition leader epoch, both outside the
// CRC). raftlite reads only entry metadata, never batch bytes; MsgApp entries
// may travel by reference (nil Data) and be sendfiled from the segment files.
// Offsets start at the log start; "no entry" is -1 (the entry before offset
// 0 has term 0). Terms are int32 and never exceed TermMax. The commit index
// is an inclusive offset: the partition's high watermark is Commit+1.
//
// Log is the read side; raftlite never writes to it. New entries wait in
// raftlite's unstable tail until the node layer appends them and calls
// Advance.
//
// # Durability
//
// Appends become durable asynchronously (the segment log's group commit); the
// node layer reports each durable point with Durable(offset, term). A
// follower acknowledges min(durable, matched) only, and the leader counts
// itself only up to its own durable offset, so a commit never rests on a
// write that a crash could take back. Votes and terms are persisted before
// any message that depends on them leaves (HardState in Ready).
//
// # Elections
//
// Randomised election timeouts in [ElectionTicks, 2*ElectionTicks);
// pre-vote (a node first asks whether it could win, without bumping any
// term); check-quorum (a leader that has not heard from a majority for an
// election timeout steps down, and followers that hear from a leader ignore
// vote requests for an election timeout: the leader lease); leader
// completeness (a vote goes only to a log at least as up to date). A new
// leader appends a one-offset no-op entry (EntryLeaderNoop: the node layer
// writes a control batch) so that earlier terms' entries can commit. The
// node layer may make a preferred replica campaign first (Config.Preferred,
// Campaign).
//
// # Replication and flow control
//
// Proposals between two Readys go out together (batching). Each follower
// is probed until its log matches, then streamed to within InflightMsgsMax
// messages and InflightBytesMax bytes, AppendBytesMax bytes per message. A
// rejection carries a hint (the follower's last offset whose term is at
// most the rejected one), so the leader skips a whole divergent term per
// round trip; the follower truncates its divergent suffix. Commit is the
// highest offset durable on a majority whose entry is of the current term.
//
// # Log start moving forward
//
// Retention (partitions) and snapshots (metadata group) move a log's start
// forward, to at most Commit+1. A follower that needs entries below the
// leader's log start gets MsgReset(start, term at start-1): it drops its log
// and restarts at that start (Ready.Reset), as a Kafka follower does. For the
// metadata group the node layer attaches the state-machine snapshot for
// start-1 to the message, and the follower installs it from Ready.Reset. A
// follower that already matches at start-1 keeps its log. The same reset
// finishes a catch-up by whole segments: the node layer writes committed
// entries into a learner's log outside a Ready (Node.Adopted extends its
// view), and the leader's Node.SendReset at their end makes that offset
// the learner's match.
//
// # Leadership transfer
//
// TransferLeadership(to) catches the target up, then sends it MsgTimeoutNow;
// it campaigns at once, skipping pre-vote and passing the voters' lease.
// Proposals are refused while the transfer is under way, and the leader
// gives up after TransferTicksMax ticks.
//
// # Heartbeats and quiescence
//
// A heartbeat is (group, term, commit, quiesce flag) and its answer
// (group, term, follower commit): Message.Type.IsHeartbeat says so, and the
// node layer packs all of a tick's heartbeats bound for one peer into one
// frame. With Limits.Quiesce, an idle leader whose followers all hold every
// entry durably and know the commit sends a last heartbeat with Quiesce set
// and stops ticking; followers that are caught up stop their election
// timers. Ticking a quiesced group does nothing. Elections still happen:
//
//   - the node layer keeps one liveness heartbeat per peer (not per group);
//     when it stops hearing a peer it calls Unquiesce on every quiesced
//     group that has the peer as a member, and they elect a new leader in
//     the usual way if the peer was the leader; ForgetLeader on the
//     followers of that leader ends its lease, so a live replica that
//     campaigns at once is elected without waiting an election timeout;
//   - a vote request from the node a follower believes leads ends its
//     lease (that node restarted), so a leader that restarted quickly,
//     before its peers noticed, is replaced too;
//   - a quiesced leader wakes up on any message, so a follower that missed
//     the quiesce heartbeat (or restarted) gets heartbeats again.
//
// A group with a member that is down never quiesces.
//
// # Membership
//
// A configuration (Membership) has voters, who elect and commit, and
// learners, who receive the log but never vote, campaign or count. It
// changes one server at a time (add a learner, promote it, remove a
// member) through ProposeConfChange, which appends an EntryConfChange
// carrying the whole new configuration. A node uses the latest
// configuration in its log, committed or not, from the moment it appends
// it; a truncation that removes it reverts to the one before, which the log
// answers (ConfLog). The leader proposes a change only once the previous
// one is committed and it has committed an entry of its own term (the fix
// for the single-server change bug), so every configuration entry in a log
// but the last is committed. A leader that removes itself leads without
// counting itself until the removal commits, then steps down and hands over
// (MsgTimeoutNow); a removed node that keeps campaigning is contained by
// pre-vote and the lease. MsgReset carries the configuration at the new
// log start. See docs/design/consensus.md for the safety argument.
package raftlite
