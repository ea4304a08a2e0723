package client

import (
	"context"
	"fmt"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// GroupConfig configures a GroupConsumer. The zero value of every field
// but Group means its documented default.
type GroupConfig struct {
	// Group names the consumer group (the topic naming rule applies);
	// its committed offsets are the named-consumer offsets of that name.
	// Required.
	Group string
	// InstanceID makes the member static (Kafka's group.instance.id,
	// KIP-345): a restart that joins with it within SessionTimeout takes
	// the old member's place and partitions without a rebalance, and
	// Close does not leave the group. Empty (the default): dynamic.
	InstanceID string
	// SessionTimeout is how long the coordinator keeps the member
	// without a heartbeat; then its partitions move to the others.
	// 1 s to 30 min. Default 10 s.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the member heartbeats; below
	// SessionTimeout (a third of it or less is safe). Default 1 s.
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long a rebalance waits for the members to
	// rejoin, and so how long this member waits for Poll to hand back
	// its partitions before it drops them. At most Config.RequestTimeout
	// (a join parks that long). Default 20 s.
	RebalanceTimeout time.Duration
	// Assignors are the assignors offered, preferred first:
	// AssignorRange, AssignorRoundRobin. The group uses the first every
	// member offers. Default: range, then roundrobin.
	Assignors []string
	// AutoCommitInterval commits the positions of the records Poll
	// returned, at the first Poll after each interval, when partitions
	// are revoked and at Close. Negative: no automatic commit (call
	// Commit). Default 5 s.
	AutoCommitInterval time.Duration
	// Start is where a partition the group has no committed offset for
	// starts: StartEarliest (the default), StartLatest or StartAtTime.
	Start Start
	// OnAssigned, when set, is called with the partitions the member
	// owns after each rebalance (possibly none), on the member's own
	// goroutine, before Poll returns records of them.
	OnAssigned func(ctx context.Context, partitions []wire.TopicPartition)
	// OnRevoked, when set, is called with the partitions the member
	// gives up at a rebalance, on the goroutine of the Poll that hands
	// them back (after the automatic commit, when on): the place to
	// commit what was processed, with Commit. The rebalance waits for it.
	OnRevoked func(ctx context.Context, partitions []wire.TopicPartition)
	// Consumer tunes the fetching (its Name must be empty: the group
	// names the offsets).
	Consumer ConsumerConfig
}

// Defaults of GroupConfig.
const (
	defaultGroupSessionTimeout    = 10 * time.Second
	defaultGroupHeartbeatInterval = time.Second
	defaultGroupRebalanceTimeout  = 20 * time.Second
	defaultGroupAutoCommit        = 5 * time.Second
	groupSessionTimeoutMin        = time.Second
	groupSessionTimeoutMax        = 30 * time.Minute
)

func (g GroupConfig) withDefaults(c *Config) (GroupConfig, error) {
	if err := wire.ValidateConsumerName(g.Group); err != nil {
		return g, fmt.Errorf("client: group consumer: %w", err)
	}
	setDur(&g.SessionTimeout, defaultGroupSessionTimeout)
	setDur(&g.HeartbeatInterval, defaultGroupHeartbeatInterval)
	setDur(&g.RebalanceTimeout, min(defaultGroupRebalanceTimeout, c.RequestTimeout))
	if g.AutoCommitInterval == 0 {
		g.AutoCommitInterval = defaultGroupAutoCommit
	}
	if len(g.Assignors) == 0 {
		g.Assignors = []string{AssignorRange, AssignorRoundRobin}
	}
	if g.Start.kind == startUnset {
		g.Start = StartEarliest
	}
	switch {
	case g.SessionTimeout < groupSessionTimeoutMin || g.SessionTimeout > groupSessionTimeoutMax:
		return g, fmt.Errorf("client: group consumer SessionTimeout %v is outside %v..%v", g.SessionTimeout, groupSessionTimeoutMin, groupSessionTimeoutMax)
	case g.HeartbeatInterval >= g.SessionTimeout:
		return g, fmt.Errorf("client: group consumer HeartbeatInterval %v must be below SessionTimeout %v", g.HeartbeatInterval, g.SessionTimeout)
	case g.RebalanceTimeout > c.RequestTimeout:
		return g, fmt.Errorf("client: group consumer RebalanceTimeout %v exceeds the client's RequestTimeout %v (a join waits that long)", g.RebalanceTimeout, c.RequestTimeout)
	case g.Start.kind == startOffset || g.Start.kind == startCommitted:
		return g, fmt.Errorf("client: group consumer Start must be StartEarliest, StartLatest or StartAtTime")
	case g.Consumer.Name != "":
		return g, fmt.Errorf("client: group consumer: Consumer.Name must be empty (the group %q names the offsets)", g.Group)
	case len(g.InstanceID) > wire.MemberIDBytesMax:
		return g, fmt.Errorf("client: group consumer InstanceID is %d bytes, at most %d", len(g.InstanceID), wire.MemberIDBytesMax)
	}
	for _, a := range g.Assignors {
		if a != AssignorRange && a != AssignorRoundRobin {
			return g, fmt.Errorf("client: group consumer: unknown assignor %q (want %q or %q)", a, AssignorRange, AssignorRoundRobin)
		}
	}
	return g, nil
}
