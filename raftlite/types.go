package raftlite

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// NodeID names a replica. Valid ids are 1..NodeIDMax; None (0) means "no
// node" (no leader known, no vote cast). The node layer maps roster ids onto
// this range; it must never hand raftlite a 0.
type NodeID uint8

// None is the NodeID that stands for "nobody".
const None NodeID = 0

// NodeIDMax is the largest valid NodeID: the roster has at most 32 nodes, so
// a replica set fits in the 32 bits of a ReplicaSet.
const NodeIDMax NodeID = 32

// GroupID identifies a consensus group on a node. raftlite does not know
// topics; the node layer assigns ids and routes messages by them.
type GroupID uint64

// TermMax is the largest term raftlite ever produces: terms are stored in
// the batch header's 32-bit partitionLeaderEpoch. A group whose term reaches
// TermMax can no longer hold elections (2^31 elections never happen in
// practice; the refusal is there so that overflow cannot).
const TermMax = math.MaxInt32

// ReplicaSet is a set of NodeIDs as a bitmask: bit id-1 is set for a member.
type ReplicaSet uint32

// NewReplicaSet returns the set holding ids.
// REQUIRES: every id is in 1..NodeIDMax.
func NewReplicaSet(ids ...NodeID) ReplicaSet {
	var s ReplicaSet
	for _, id := range ids {
		s = s.Add(id)
	}
	return s
}

// Add returns s with id added. Ids outside 1..NodeIDMax are ignored.
func (s ReplicaSet) Add(id NodeID) ReplicaSet {
	if id == None || id > NodeIDMax {
		return s
	}
	return s | 1<<(id-1)
}

// Has reports whether id is a member of s.
func (s ReplicaSet) Has(id NodeID) bool {
	return id != None && id <= NodeIDMax && s&(1<<(id-1)) != 0
}

// Len is the number of members.
func (s ReplicaSet) Len() int { return bits.OnesCount32(uint32(s)) }

// Quorum is the number of members that form a majority.
func (s ReplicaSet) Quorum() int { return s.Len()/2 + 1 }

// IDs returns the members in increasing order.
func (s ReplicaSet) IDs() []NodeID {
	ids := make([]NodeID, 0, s.Len())
	for v := uint32(s); v != 0; v &= v - 1 {
		ids = append(ids, NodeID(bits.TrailingZeros32(v)+1))
	}
	return ids
}

// String formats s as "{1,2,3}".
func (s ReplicaSet) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, id := range s.IDs() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", id)
	}
	b.WriteByte('}')
	return b.String()
}

// EntryKind says who must produce an entry's bytes.
type EntryKind uint8

const (
	// EntryData is a proposed record batch: its bytes came with Propose
	// (leader) or with the append message (follower).
	EntryData EntryKind = iota
	// EntryLeaderNoop is the one-offset entry a new leader appends at the
	// start of its term so that entries of earlier terms can commit (Raft
	// commits only entries of the current term by counting). Data is nil:
	// the node layer encodes a one-record control batch for it.
	EntryLeaderNoop
	// EntryConfChange is a one-offset entry that installs the
	// configuration in Conf (see Node.ProposeConfChange). Data is nil: the
	// node layer encodes a one-record control batch holding Conf, and the
	// log returns Conf in the entry's metadata (see ConfLog).
	EntryConfChange
	entryKindCount
)

// Entry is one record batch in the consensus log: the batch covers offsets
// [Base, Last] and was created by the leader of Term. raftlite reads only
// this metadata, never the bytes.
//
// Invariant: 0 <= Base <= Last; 1 <= Term <= TermMax; Bytes >= 0.
type Entry struct {
	// Base is the offset of the batch's first record.
	Base int64
	// Last is the offset of the batch's last record.
	Last int64
	// Term is the leader term that created the batch; it is stored in the
	// batch header as the partition leader epoch.
	Term int32
	// Bytes is the batch's size in bytes; flow control counts it.
	Bytes int32
	// Kind says whether the node layer must build the bytes (leader no-op).
	Kind EntryKind
	// Data is the batch's bytes, or nil when the entry travels by reference
	// (the node layer reads or sendfiles the bytes from its log).
	Data []byte
	// Conf is the configuration an EntryConfChange installs; zero for
	// other kinds.
	Conf Membership
}

// String formats the entry metadata as "term/base-last".
func (e Entry) String() string {
	s := fmt.Sprintf("%d/%d-%d", e.Term, e.Base, e.Last)
	switch e.Kind {
	case EntryLeaderNoop:
		s += "(noop)"
	case EntryConfChange:
		s += "(conf " + e.Conf.String() + ")"
	}
	return s
}

// HardState is what must survive a crash: the current term and the vote
// cast in it. The node layer persists it durably (fsync) before sending any
// message of the Ready that carries it.
type HardState struct {
	Term int32
	Vote NodeID
}

// Role is a node's role in its group.
type Role uint8

// Roles.
const (
	RoleFollower Role = iota
	RolePreCandidate
	RoleCandidate
	RoleLeader
)

var roleNames = [...]string{"follower", "pre-candidate", "candidate", "leader"}

// String returns the role's name, e.g. "pre-candidate".
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", r)
}

// Errors returned by raftlite. Callers use errors.Is.
var (
	// ErrNotLeader is returned by Propose and TransferLeadership on a node
	// that is not the group's leader. The node layer answers NOT_PRIMARY
	// with Status().Lead as the hint.
	ErrNotLeader = errors.New("raftlite: not leader")
	// ErrTransferInProgress is returned by Propose while a leadership
	// transfer is under way; the client retries (the leader changes soon,
	// or the transfer times out).
	ErrTransferInProgress = errors.New("raftlite: leadership transfer in progress")
	// ErrProposalBackpressure is returned by Propose when the leader's
	// uncommitted bytes would exceed Config.UncommittedBytesMax.
	ErrProposalBackpressure = errors.New("raftlite: too many uncommitted bytes")
	// ErrInvalidProposal is returned by Propose for a record count below 1
	// or a batch larger than Config.EntryBytesMax.
	ErrInvalidProposal = errors.New("raftlite: invalid proposal")
	// ErrUnknownPeer is returned by Step for a message addressed to
	// another node or from an invalid node id (None, above NodeIDMax, or
	// this node itself), and by TransferLeadership for a target that is
	// not a voter or is the leader itself. Messages from valid nodes
	// outside the configuration are accepted (see Step).
	ErrUnknownPeer = errors.New("raftlite: unknown peer")
	// ErrGroupMismatch is returned by Step for a message of another group.
	ErrGroupMismatch = errors.New("raftlite: message for another group")
	// ErrInvalidMessage is returned by Step for a message whose fields are
	// malformed (entries out of order, negative offsets, bad type).
	ErrInvalidMessage = errors.New("raftlite: invalid message")
	// ErrConfig is returned by New for an invalid Config; it wraps the
	// detail.
	ErrConfig = errors.New("raftlite: invalid config")
	// ErrCompacted is returned by Log.TermAt and Log.Entries for offsets
	// below the log start (other than LogStart-1 for TermAt).
	ErrCompacted = errors.New("raftlite: offset compacted")
	// ErrConfChangePending is returned by ProposeConfChange while the
	// previous configuration entry is not committed, or before the leader
	// has committed an entry of its own term (the single-server change
	// safety rule). Retry once Commit has moved.
	ErrConfChangePending = errors.New("raftlite: configuration change pending")
	// ErrInvalidConfChange is returned by ProposeConfChange for a change
	// that does not fit the configuration in force (adding a member,
	// promoting a non-learner, removing a non-member or the last voter, a
	// bad node id), or when the log is not a ConfLog.
	ErrInvalidConfChange = errors.New("raftlite: invalid configuration change")
	// ErrLearnerBehind is returned by ProposeConfChange for the promotion
	// of a learner whose matched offset is below the leader's commit: it
	// would count for the quorum before it holds the committed log. Wait
	// (Node.Follower reports its match) and retry.
	ErrLearnerBehind = errors.New("raftlite: learner not caught up")
	// ErrUnavailable is returned by Log.TermAt and Log.Entries for offsets
	// at or past the log end.
	ErrUnavailable = errors.New("raftlite: offset not in log")
	// ErrCommittedLost is returned by Step, on a node whose
	// Config.LogLosesAcked is set, for a leader's append (MsgApp) or log
	// reset (MsgReset) that would replace entries this node knows
	// committed: a majority of the group lost entries it had
	// acknowledged. The message is refused and the node is unchanged;
	// it cannot rejoin the leader's log without losing its committed
	// entries, so the caller must stop stepping it. It wraps the detail
	// (the offset, the leader, its term).
	ErrCommittedLost = errors.New("raftlite: committed entries lost by the group")
)
