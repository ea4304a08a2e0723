// Package groups is the consumer group coordinator: Kafka's classic group
// protocol (join, sync, heartbeat, leave) and the checks an offset commit
// passes, as a state machine on an injected clock. It does no I/O and
// reads no clock: its owner passes the time of each call and calls Tick
// periodically, so tests drive timeouts with times, not sleeps. Where
// the coordinator runs and where offsets are stored is the node's
// business (docs/design/groups.md).
package groups

import (
	"errors"
	"sort"

	"time"
)

// Sentinel errors, one per Kafka error code a client acts on.
var (
	// ErrUnknownMember: the member id is not in the group (it expired,
	// left, or never joined); the client rejoins with an empty id.
	ErrUnknownMember = errors.New("groups: unknown member id")
	// ErrIllegalGeneration: the request names another generation than
	// the group's; the client rejoins.
	ErrIllegalGeneration = errors.New("groups: illegal generation")
	// ErrRebalanceInProgress: the group is rebalancing; the client
	// rejoins.
	ErrRebalanceInProgress = errors.New("groups: rebalance in progress")
	// ErrMemberIDRequired: a JoinGroup v4+ without a member id; the
	// answer carries the id to join with (KIP-394).
	ErrMemberIDRequired = errors.New("groups: member id required")
	// ErrInconsistentProtocol: the member's protocol type or protocols
	// share nothing with the group's.
	ErrInconsistentProtocol = errors.New("groups: inconsistent group protocol")
	// ErrInvalidSessionTimeout: outside the configured bounds.
	ErrInvalidSessionTimeout = errors.New("groups: invalid session timeout")
	// ErrUnknownGroup: no such group (DeleteGroups, DescribeGroups).
	ErrUnknownGroup = errors.New("groups: unknown group")
	// ErrNonEmptyGroup: a group with members cannot be deleted.
	ErrNonEmptyGroup = errors.New("groups: group has members")
	// ErrGroupFull: the group has Config.MembersMax members.
	ErrGroupFull = errors.New("groups: group is full")
	// ErrTooManyGroups: the coordinator holds Config.GroupsMax groups.
	ErrTooManyGroups = errors.New("groups: too many groups")
	// ErrFencedInstance: a static member's instance id is held by
	// another member id (a newer instance of it joined).
	ErrFencedInstance = errors.New("groups: instance id fenced by a newer member")
	// ErrNotCoordinator: the coordinator was Reset while the call was
	// parked (its node lost the group's partition); the member finds
	// the new coordinator, which has its state, and retries there.
	ErrNotCoordinator = errors.New("groups: no longer the group's coordinator")
	// ErrTooManyOffsets: the commit would give the group more than
	// Config.OffsetsMax committed partitions.
	ErrTooManyOffsets = errors.New("groups: too many committed partitions")
	// ErrInvalidOffset: a commit of a negative offset.
	ErrInvalidOffset = errors.New("groups: invalid offset")
)

// State is a group's state, named as Kafka's DescribeGroups names it.
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

// String is the state as Kafka clients and tools show it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	}
	return "Dead"
}

// Config bounds the coordinator.
type Config struct {
	// SessionTimeoutMin and SessionTimeoutMax bound a member's session
	// timeout (Kafka's group.min/max.session.timeout.ms; the minimum is
	// lower than Kafka's 6 s so that tests and fast failover can use
	// shorter sessions).
	SessionTimeoutMin, SessionTimeoutMax time.Duration
	// MembersMax bounds a group (Kafka's group.max.size).
	MembersMax int
	// GroupsMax bounds the groups one coordinator holds.
	GroupsMax int
	// InitialRebalanceDelay holds the first rebalance of an empty group
	// this long (Kafka's group.initial.rebalance.delay.ms), so that
	// members starting together join one generation instead of one
	// rebalance each.
	InitialRebalanceDelay time.Duration
	// OffsetsMax bounds the partitions one group holds committed
	// offsets for; a commit that would pass it is refused whole.
	OffsetsMax int
	// CheckpointRecords and CheckpointBytes: a coordinator writes a
	// checkpoint of its state (checkpoint.go) once this many records,
	// or this many bytes of keys and values, went to its log since the
	// last one; 0 turns that bound off, both 0 turn checkpoints off.
	CheckpointRecords, CheckpointBytes int64
}

// DefaultConfig is what a node uses.
var DefaultConfig = Config{
	SessionTimeoutMin: time.Second, SessionTimeoutMax: 30 * time.Minute,
	MembersMax: 1000, GroupsMax: 100_000, InitialRebalanceDelay: 500 * time.Millisecond,
	OffsetsMax: 100_000, CheckpointRecords: 10_000, CheckpointBytes: 8 << 20,
}

// Protocol is one assignor a member supports, with its metadata (the
// subscription, opaque here).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup.
type JoinRequest struct {
	Group, MemberID string
	// InstanceID makes a static member (KIP-345, empty: dynamic): a
	// restart that joins with it takes the old member's place, and its
	// assignment when the group is stable, without a rebalance.
	InstanceID         string
	ClientID, Host     string
	ProtocolType       string
	Protocols          []Protocol
	SessionTimeout     time.Duration
	RebalanceTimeout   time.Duration
	RequireKnownMember bool
}

// MemberMeta is a member as the leader sees it: its id and its metadata
// for the chosen protocol.
type MemberMeta struct {
	ID string
	// InstanceID is the member's group.instance.id ("": dynamic): a
	// leader's assignor may keep a static member's partitions (KIP-345).
	InstanceID string
	Metadata   []byte
}

// JoinResult answers a join. Members is filled for the leader only.
type JoinResult struct {
	Generation int32
	Protocol   string
	LeaderID   string
	MemberID   string
	Members    []MemberMeta
}

// SyncRequest is a SyncGroup; Assignments (member id → assignment) come
// from the leader only.
type SyncRequest struct {
	Group, MemberID string
	Generation      int32
	Assignments     map[string][]byte
}

// member is one member of a group.
type member struct {
	id, clientID, host string
	instance           string
	protocols          []Protocol
	session, rebalance time.Duration
	// expires is when the session runs out without a heartbeat.
	expires    time.Time
	assignment []byte
	// joinWait is the member's parked JoinGroup during a rebalance;
	// syncWait its parked SyncGroup while the leader has not synced.
	joinWait func(JoinResult, error)
	syncWait func([]byte, error)
}

// group is one group's state.
type group struct {
	name         string
	state        State
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	// pending are member ids handed out by MEMBER_ID_REQUIRED, with when
	// they lapse unjoined.
	pending map[string]time.Time
	// static maps static members' instance ids to their member ids.
	static map[string]string
	// rebalanceEnds is when a rebalance completes without the members
	// that did not rejoin; joinNotBefore when it may complete at the
	// earliest (the initial delay of an empty group).
	rebalanceEnds, joinNotBefore time.Time
	// storing is the generation whose record (the leader's assignment)
	// is being written, 0 when none: a member's SyncGroup waits for it.
	storing int32
	// offsets are the committed offsets whose records are durable.
	offsets map[TopicPartition]Offset
	// logged is the value of the newest group record queued for the
	// log or replayed (nil: none since the group was made), which a
	// checkpoint writes again.
	logged []byte
}

// newGroup is an empty group.
func newGroup(name string) *group {
	return &group{name: name, members: map[string]*member{}, pending: map[string]time.Time{},
		static: map[string]string{}, offsets: map[TopicPartition]Offset{}}
}

// Coordinator holds groups. It has one owner, a goroutine that makes
// every call and delivers every answer of its Log (on a node, the shard
// that owns the coordinator's partition of the internal topic, which
// also ticks it on its timer wheel): it holds no lock and starts no
// goroutine, and is not safe for concurrent use. Callbacks run on the
// owner once the call's state change is complete (of the call, of the
// Tick, or of the log's answer that completed them), so a callback may
// call the coordinator again.
type Coordinator struct {
	cfg Config
	// log is where changes are made durable; nil keeps them in memory.
	log    Log
	groups map[string]*group
	nextID uint64
	// epoch counts Resets: a log answer for an append made before the
	// last Reset changes nothing in memory.
	epoch uint64
	// fire are the callbacks to run when the current call ends (run).
	fire []func()
	// outbox are the appends the calls made, in order; flushing
	// says a flush is handing them to the log, so that the log sees
	// them in the order the state changed; inflight that the log has not
	// answered the last Append yet. One Append is in flight at a time:
	// what queues meanwhile goes to the log as one Append (up to
	// appendBytesMax), so that concurrent commits share a write.
	outbox   []appendCall
	flushing bool
	inflight bool
	// ckpt is the checkpoint writer's and replay's state (checkpoint.go).
	ckpt checkpointState
	// staged are the offsets open transactions committed, by producer
	// id, then group (txnoffsets.go); in memory until the transaction's
	// marker decides them.
	staged map[int64]map[string]map[TopicPartition]Offset
}

// appendBytesMax bounds the keys and values of the appends merged into
// one Append (one record batch on a node); a single append above it
// goes alone.
const appendBytesMax = 1 << 20

// Log is where a coordinator makes its records durable: on a node, the
// group's partition of the internal topic, produced with acks = quorum.
type Log interface {
	// Append makes recs durable after every record of earlier Appends
	// and then calls done(nil), or done(err) when they may not be
	// durable. done must run on the coordinator's owner (also before
	// Append returns is allowed), exactly once.
	Append(recs []Record, done func(error))
}

// appendCall is one Append waiting in the outbox.
type appendCall struct {
	recs []Record
	done func(error)
	// checkpoint says recs are part of a checkpoint, which does not
	// count towards the next one.
	checkpoint bool
}

// New returns an empty coordinator that keeps its state in memory only.
func New(cfg Config) *Coordinator {
	return NewLogged(cfg, nil)
}

// NewLogged returns an empty coordinator that writes every change that
// must survive a failover to log before it answers the change (a
// commit, a leader's sync), and fills it by Replay of that log first.
func NewLogged(cfg Config, log Log) *Coordinator {
	return &Coordinator{cfg: cfg, log: log, groups: map[string]*group{}}
}

// Reset drops every group, answering parked calls with
// ErrNotCoordinator: the node stopped coordinating (its members find
// the new coordinator, which replayed their state from the log).
// Appends already queued still go to the log; their answers change
// nothing here.
func (c *Coordinator) Reset() {
	names := make([]string, 0, len(c.groups))
	for name := range c.groups {
		names = append(names, name)
	}
	sort.Strings(names) // the answers in one order on every run
	for _, name := range names {
		g := c.groups[name]
		for _, id := range g.sortedIDs() {
			c.failWaits(g.members[id], ErrNotCoordinator)
		}
	}
	c.groups = map[string]*group{}
	c.staged = nil
	c.epoch++
	c.ckpt.serving = false // an empty state must never be written as a checkpoint
	c.run()
}

// failWaits answers m's parked calls with err.
func (c *Coordinator) failWaits(m *member, err error) {
	if w := m.joinWait; w != nil {
		m.joinWait = nil
		c.fire = append(c.fire, func() { w(JoinResult{MemberID: m.id, Generation: -1}, err) })
	}
	if w := m.syncWait; w != nil {
		m.syncWait = nil
		c.fire = append(c.fire, func() { w(nil, err) })
	}
}
