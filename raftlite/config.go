package raftlite

import "fmt"

// Config creates one group's Node.
type Config struct {
	// ID is this node's id in the group. Required, 1..NodeIDMax.
	ID NodeID
	// Group is the id the node layer routes this group's messages by.
	Group GroupID
	// Replicas are the voters of the configuration in force before the
	// log's first configuration entry (EntryConfChange): the group's
	// replica set at creation. With Learners, it must contain ID. Once the
	// log holds a configuration (see ConfLog), that one is in force.
	Replicas ReplicaSet
	// Learners are the learners of that configuration (none for a group
	// created with its replica set). A node added to a running group is
	// created with the configuration of the entry that adds it, itself
	// among the Learners.
	Learners ReplicaSet
	// Log is the group's log as recovered: raftlite treats every entry in
	// it as durable.
	Log Log
	// HardState is the persisted term and vote (zero for a new group).
	HardState HardState
	// Seed seeds the randomised election timeout. Give each node of a
	// group a different seed (e.g. hash of node and group id).
	Seed uint64
	// Preferred makes this node's first election timeout one tick, so that
	// the preferred primary campaigns first when a group is created (or the
	// whole group restarts). Pre-vote keeps it harmless when a leader
	// already exists.
	Preferred bool
	// LearnerBudget, when set, is asked before an append carrying entries
	// goes to a learner (a replica being caught up by a move), with the
	// entries' bytes: false holds them back, and the leader asks again at
	// the learner's next acknowledgement or heartbeat answer. It is the
	// catch-up throttle's seam (the node layer's token bucket); voters are
	// never asked, so in-sync followers are never slowed. Nil: no limit.
	LearnerBudget func(to NodeID, bytes int64) bool
	// LogLosesAcked says the log acknowledges entries before they are
	// durable (the node's storage.fsync is not "always"), so a power loss
	// can take acknowledged entries, and with a majority of the members
	// committed ones. Then a leader's append that would replace an entry
	// this node knows committed is refused with ErrCommittedLost instead
	// of failing the assertion (a panic) that holds a durable log to the
	// contract: the group lost committed entries and only the caller can
	// decide what becomes of this node's copy.
	LogLosesAcked bool
	// Limits are the timing and flow-control limits. Many groups share one
	// value, which raftlite only reads; it must not change once a Node uses
	// it. Nil means DefaultLimits(). A Limits with zero fields is copied
	// and filled per group, so share a filled one (DefaultLimits, then
	// edit) to keep idle groups small.
	Limits *Limits
}

// Limits are a group's timing and flow-control bounds. Zero fields take the
// default written on them.
type Limits struct {
	// ElectionTicks is the election timeout in ticks; a follower's actual
	// timeout is drawn from [ElectionTicks, 2*ElectionTicks). It is also the
	// check-quorum interval and the leader lease. Default 10.
	ElectionTicks int32
	// HeartbeatTicks is the leader's heartbeat interval in ticks. Default 1.
	HeartbeatTicks int32
	// TransferTicksMax bounds a leadership transfer: the leader gives up
	// and accepts proposals again after this many ticks. Default
	// ElectionTicks.
	TransferTicksMax int32
	// ResetRetryTicks is how long the leader waits for the answer to a
	// MsgReset before sending it again. Default 2*ElectionTicks.
	ResetRetryTicks int32
	// AppendBytesMax bounds the entry bytes of one MsgApp (at least one
	// entry is always sent). Default 1 MiB.
	AppendBytesMax int64
	// InflightBytesMax bounds the entry bytes sent to one follower and not
	// yet acknowledged. Default 4 MiB.
	InflightBytesMax int64
	// InflightMsgsMax bounds the MsgApps in flight to one follower.
	// Default 256.
	InflightMsgsMax int32
	// UncommittedBytesMax bounds the bytes a leader has accepted but not
	// committed; Propose returns ErrProposalBackpressure beyond it.
	// Default 64 MiB.
	UncommittedBytesMax int64
	// EntryBytesMax bounds one proposed batch. Default 16 MiB (the batch
	// format's limit).
	EntryBytesMax int32
	// NoopBytes is the size flow control assumes for the leader's no-op
	// entry (a one-record control batch). Default 80.
	NoopBytes int32
	// Quiesce lets an idle leader stop heartbeating once every follower
	// is caught up; see the package doc for how elections still happen.
	// Default off.
	Quiesce bool
}

// Defaults of Limits, in ticks and bytes.
const (
	electionTicksDefault       = 10
	heartbeatTicksDefault      = 1
	appendBytesMaxDefault      = 1 << 20
	inflightBytesMaxDefault    = 4 << 20
	inflightMsgsMaxDefault     = 256
	uncommittedBytesMaxDefault = 64 << 20
	entryBytesMaxDefault       = 16 << 20
	noopBytesDefault           = 80
)

// DefaultLimits returns Limits with every default filled in.
func DefaultLimits() *Limits {
	l := &Limits{}
	l.fill()
	return l
}

// fill replaces zero fields with their defaults.
func (l *Limits) fill() {
	if l.ElectionTicks == 0 {
		l.ElectionTicks = electionTicksDefault
	}
	if l.HeartbeatTicks == 0 {
		l.HeartbeatTicks = heartbeatTicksDefault
	}
	if l.TransferTicksMax == 0 {
		l.TransferTicksMax = l.ElectionTicks
	}
	if l.ResetRetryTicks == 0 {
		l.ResetRetryTicks = 2 * l.ElectionTicks
	}
	if l.AppendBytesMax == 0 {
		l.AppendBytesMax = appendBytesMaxDefault
	}
	if l.InflightBytesMax == 0 {
		l.InflightBytesMax = inflightBytesMaxDefault
	}
	if l.InflightMsgsMax == 0 {
		l.InflightMsgsMax = inflightMsgsMaxDefault
	}
	if l.UncommittedBytesMax == 0 {
		l.UncommittedBytesMax = uncommittedBytesMaxDefault
	}
	if l.EntryBytesMax == 0 {
		l.EntryBytesMax = entryBytesMaxDefault
	}
	if l.NoopBytes == 0 {
		l.NoopBytes = noopBytesDefault
	}
}

// filled reports whether fill would change nothing.
func (l *Limits) filled() bool {
	f := *l
	f.fill()
	return f == *l
}

// validate checks filled limits.
func (l *Limits) validate() error {
	switch {
	case l.ElectionTicks < 2:
		return fmt.Errorf("%w: ElectionTicks %d < 2", ErrConfig, l.ElectionTicks)
	case l.HeartbeatTicks < 1 || l.HeartbeatTicks >= l.ElectionTicks:
		return fmt.Errorf("%w: HeartbeatTicks %d not in [1, ElectionTicks)", ErrConfig, l.HeartbeatTicks)
	case l.TransferTicksMax < 1 || l.ResetRetryTicks < 1:
		return fmt.Errorf("%w: TransferTicksMax and ResetRetryTicks must be positive", ErrConfig)
	case l.AppendBytesMax < 1 || l.InflightBytesMax < 1 || l.InflightMsgsMax < 1:
		return fmt.Errorf("%w: flow-control limits must be positive", ErrConfig)
	case l.UncommittedBytesMax < 1 || l.EntryBytesMax < 1 || l.NoopBytes < 0:
		return fmt.Errorf("%w: byte limits must be positive", ErrConfig)
	}
	return nil
}

// validate checks cfg and fills the limits' defaults.
func (c *Config) validate() (*Limits, error) {
	if c.ID == None || c.ID > NodeIDMax {
		return nil, fmt.Errorf("%w: node id %d not in 1..%d", ErrConfig, c.ID, NodeIDMax)
	}
	conf := Membership{Voters: c.Replicas, Learners: c.Learners}
	if !conf.valid() || !conf.Members().Has(c.ID) {
		return nil, fmt.Errorf("%w: configuration %v lacks node %d or is invalid", ErrConfig, conf, c.ID)
	}
	if c.Log == nil {
		return nil, fmt.Errorf("%w: nil Log", ErrConfig)
	}
	// The vote may name a node outside the creation configuration: it was
	// cast under a later one (possibly from an entry the crash lost).
	if c.HardState.Term < 0 || c.HardState.Vote > NodeIDMax {
		return nil, fmt.Errorf("%w: hard state %+v", ErrConfig, c.HardState)
	}
	if c.Log.StartOffset() < 0 || c.Log.EndOffset() < c.Log.StartOffset() {
		return nil, fmt.Errorf("%w: log [%d, %d)", ErrConfig, c.Log.StartOffset(), c.Log.EndOffset())
	}
	lim := c.Limits
	if lim == nil {
		lim = DefaultLimits()
	} else if !lim.filled() {
		// Never write to a Limits that other groups (and shards) share:
		// fill a private copy instead.
		filled := *lim
		filled.fill()
		lim = &filled
	}
	if err := lim.validate(); err != nil {
		return nil, err
	}
	return lim, nil
}
