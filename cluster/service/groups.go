package service

import (
	"time"

	"github.com/corestream/corestream/shard"
)

// Groups are the consumer group calls (docs/design/groups.md): Kafka's
// classic group protocol (join, sync, heartbeat, leave), the group's
// committed offsets, and the operator's calls. Every front end (the
// Kafka listener, the native protocol, HTTP) calls these; none holds the
// coordinator itself, so all of them pass the Guard's group checks.
//
// Each call is asynchronous and calls done exactly once, on from (with
// from nil, on whatever goroutine completed it: done must not block).
// Join and Sync park until the group's rebalance completes (at most the
// rebalance timeout). A call that names a group this node does not
// coordinate answers ErrNotCoordinator, with a hint naming the node that
// does when it is known; ErrCoordinatorNotAvailable when no node does
// now; ErrCoordinatorLoading while this node is still recovering the
// group's state after it became its coordinator. A group name that
// breaks the consumer naming rule is ErrInvalidConsumerName.
//
// The group errors: ErrUnknownMember, ErrIllegalGeneration,
// ErrRebalanceInProgress (the group is rebalancing: rejoin),
// ErrMemberIDRequired, ErrInconsistentProtocol, ErrInvalidSessionTimeout,
// ErrUnknownGroup, ErrNonEmptyGroup, ErrGroupFull, ErrFencedInstance,
// ErrGroupSubscribedToTopic.
type Groups interface {
	// FindCoordinator is the node that coordinates group (synchronous,
	// any goroutine).
	FindCoordinator(group string) (GroupCoordinator, error)
	// JoinGroup joins (or rejoins) a member and answers when the
	// rebalance completes; with ErrMemberIDRequired the result carries
	// the member id to join with.
	JoinGroup(from *shard.Shard, req *JoinGroupRequest, done func(JoinGroupResult, error))
	// SyncGroup hands the leader's assignment out and answers each member
	// its own.
	SyncGroup(from *shard.Shard, req *SyncGroupRequest, done func(SyncGroupResult, error))
	// Heartbeat keeps a member's session.
	Heartbeat(from *shard.Shard, req *HeartbeatRequest, done func(error))
	// LeaveGroup removes members: one error per entry, in request order,
	// or a request-wide error.
	LeaveGroup(from *shard.Shard, req *LeaveGroupRequest, done func(entries []error, err error))
	// CommitGroupOffsets checks the member and generation and stores the
	// offsets: one error per entry, in request order, or a request-wide
	// error (the member check's).
	CommitGroupOffsets(from *shard.Shard, req *CommitGroupOffsetsRequest, done func(entries []error, err error))
	// FetchGroupOffsets reads the group's committed offsets of the
	// partitions asked (offset -1 where none), or of every partition it
	// committed when none are named.
	FetchGroupOffsets(from *shard.Shard, req *FetchGroupOffsetsRequest, done func([]CommittedOffset, error))
	// ListGroups lists the groups this node coordinates, sorted by name.
	ListGroups(from *shard.Shard, req *ListGroupsRequest, done func([]GroupSummary, error))
	// DescribeGroup is one group's state and members; ErrUnknownGroup
	// when the coordinator holds no such group.
	DescribeGroup(from *shard.Shard, group string, done func(GroupDescription, error))
	// DeleteGroup forgets an empty group and its committed offsets
	// (ErrNonEmptyGroup while it has members).
	DeleteGroup(from *shard.Shard, group string, done func(error))
	// DeleteGroupOffsets drops the group's committed offsets of the
	// partitions named: one error per entry (ErrGroupSubscribedToTopic
	// for a topic a member of the group subscribes to), or a
	// request-wide error (ErrUnknownGroup).
	DeleteGroupOffsets(from *shard.Shard, req *DeleteGroupOffsetsRequest, done func(entries []error, err error))
}

// GroupCoordinator names the node that coordinates a group.
type GroupCoordinator struct {
	NodeID int32
	// ClientAddr and KafkaAddr are its advertised native and Kafka
	// addresses ("" when it has none).
	ClientAddr, KafkaAddr string
}

// GroupProtocol is one assignor a member supports, with its metadata
// (the member's subscription, opaque to the coordinator).
type GroupProtocol struct {
	Name     string
	Metadata []byte
}

// JoinGroupRequest joins a member. The service keeps the slices it is
// given: a front end that decoded them from a read buffer copies them.
type JoinGroupRequest struct {
	Group string
	// MemberID is "" at a member's first join.
	MemberID string
	// InstanceID makes a static member (KIP-345); "" for a dynamic one.
	InstanceID string
	// ClientID and Host are shown by DescribeGroup.
	ClientID, Host string
	// ProtocolType is the kind of group ("consumer" for consumers).
	ProtocolType string
	// Protocols are the assignors the member supports, preferred first.
	Protocols []GroupProtocol
	// SessionTimeout is how long the member lives without a heartbeat;
	// RebalanceTimeout how long a rebalance waits for it to rejoin.
	SessionTimeout, RebalanceTimeout time.Duration
	// RequireKnownMember asks that a first join be answered
	// ErrMemberIDRequired with the id to use (KIP-394).
	RequireKnownMember bool
}

// GroupMember is a member as the leader sees it at a join.
type GroupMember struct {
	MemberID   string
	InstanceID string
	// Metadata is the member's metadata for the chosen protocol.
	Metadata []byte
}

// JoinGroupResult answers a join.
type JoinGroupResult struct {
	Generation int32
	// ProtocolType and Protocol are the group's and the chosen assignor.
	ProtocolType, Protocol string
	LeaderID, MemberID     string
	// Members is filled for the leader only.
	Members []GroupMember
}

// SyncGroupRequest is a member's sync; Assignments (member id →
// assignment) come from the leader only.
type SyncGroupRequest struct {
	Group, MemberID string
	Generation      int32
	Assignments     map[string][]byte
}

// SyncGroupResult is the member's assignment.
type SyncGroupResult struct {
	ProtocolType, Protocol string
	Assignment             []byte
}

// HeartbeatRequest keeps a member's session.
type HeartbeatRequest struct {
	Group, MemberID string
	Generation      int32
}

// LeaveGroupRequest removes members; an entry with no member id and an
// instance id removes that static member.
type LeaveGroupRequest struct {
	Group   string
	Members []LeavingMember
}

// LeavingMember is one member that leaves.
type LeavingMember struct {
	MemberID, InstanceID string
}

// CommitGroupOffsetsRequest commits a member's offsets. Generation -1
// with no member id is a consumer that assigns itself partitions,
// accepted only while the group has no members.
type CommitGroupOffsetsRequest struct {
	Group, MemberID string
	Generation      int32
	Offsets         []OffsetCommit
}

// FetchGroupOffsetsRequest reads committed offsets; no partitions: every
// partition the group committed.
type FetchGroupOffsetsRequest struct {
	Group      string
	Partitions []TopicPartition
	// RequireStable answers ErrUnstableOffsetCommit while an open
	// transaction staged offsets of a partition asked (KIP-447).
	RequireStable bool
}

// ListGroupsRequest filters the listing by state ("Stable", "Empty", …;
// none: every state).
type ListGroupsRequest struct {
	States []string
}

// GroupSummary is a group in a listing.
type GroupSummary struct {
	Name, ProtocolType, State string
}

// GroupDescription is a group's state and members.
type GroupDescription struct {
	Name string
	// State is Kafka's name: Empty, PreparingRebalance,
	// CompletingRebalance, Stable or Dead.
	State                  string
	ProtocolType, Protocol string
	Generation             int32
	Members                []GroupMemberDescription
}

// GroupMemberDescription is one member of a described group.
type GroupMemberDescription struct {
	MemberID, InstanceID, ClientID, Host string
	// Metadata is the member's metadata for the group's protocol,
	// Assignment the leader's assignment for it (opaque here).
	Metadata, Assignment []byte
}

// DeleteGroupOffsetsRequest drops committed offsets of a group.
type DeleteGroupOffsetsRequest struct {
	Group      string
	Partitions []TopicPartition
}
