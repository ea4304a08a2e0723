package node

import (
	"errors"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The controller's side of the service's admin calls that are not
// answered by cluster/controller's parts (drivers.go forwards those):
// topic configs, primary moves and rebalances (through the balancer), users and the bootstrap of the first administrator,
// the deletion of named-consumer offsets, and the create of the consumer
// groups' internal topic. The service reaches them through its Admin
// port (ctrlAdmin, svc.go), on shard metaShard.

// alterTopicConfig proposes the topic's new overrides: its current ones
// (none with Replace) changed by req's Set and Reset.
func (c *controller) alterTopicConfig(req *service.AlterTopicConfigRequest, done func(metadata.TopicConfig, error)) {
	t := c.State().Topic(req.Name)
	if t == nil || !req.ID.IsZero() && t.ID != req.ID {
		done(metadata.TopicConfig{}, service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q does not exist", req.Name))
		return
	}
	cfg := t.Config
	if req.Replace {
		cfg = metadata.TopicConfig{}
	}
	for _, k := range req.Reset {
		if err := setTopicConfig(&cfg, req.Name, k, "0"); err != nil {
			done(metadata.TopicConfig{}, err)
			return
		}
	}
	for _, e := range req.Set {
		if err := setTopicConfig(&cfg, req.Name, e.Key, e.Value); err != nil {
			done(metadata.TopicConfig{}, err)
			return
		}
	}
	cmd, err := c.State().PlanAlterConfig(req.Name, t.ID, cfg)
	if err != nil {
		done(metadata.TopicConfig{}, metaKindErr(err))
		return
	}
	if req.ValidateOnly {
		done(cfg, nil)
		return
	}
	c.propose(cmd, timeoutOf(req.Timeout), func(res metadata.Result, err error) {
		if err != nil {
			done(metadata.TopicConfig{}, metaKindErr(err))
			return
		}
		done(res.Topic.Config, nil)
	})
}

// setTopicConfig sets key (retention_ms, retention_bytes,
// max_message_bytes, segment_bytes, segment_ms, or a compaction key) of cfg to the
// integer value ("0": the node's default).
func setTopicConfig(cfg *metadata.TopicConfig, topic, key, value string) error {
	one, err := service.TopicConfigOf(topic, []service.Config{{Key: key, Value: value}})
	if err != nil {
		return err
	}
	switch key {
	case "retention_ms":
		cfg.RetentionMs = one.RetentionMs
	case "retention_bytes":
		cfg.RetentionBytes = one.RetentionBytes
	case "max_message_bytes":
		cfg.MaxMessageBytes = one.MaxMessageBytes
	case "cleanup_policy":
		cfg.CleanupPolicy = one.CleanupPolicy
	case "min_cleanable_dirty_ratio":
		cfg.MinCleanableDirtyRatio = one.MinCleanableDirtyRatio
	case "delete_retention_ms":
		cfg.DeleteRetentionMs = one.DeleteRetentionMs
	case "min_compaction_lag_ms":
		cfg.MinCompactionLagMs = one.MinCompactionLagMs
	case "max_compaction_lag_ms":
		cfg.MaxCompactionLagMs = one.MaxCompactionLagMs
	case "segment_bytes":
		cfg.SegmentBytes = one.SegmentBytes
	case "segment_ms":
		cfg.SegmentMs = one.SegmentMs
	}
	return nil
}

// svcMovePrimary runs the balancer's MovePrimary (ctl.Balancer, which
// still speaks the native request and response types) for the service.
func (c *controller) svcMovePrimary(req *service.MovePrimaryRequest, done func(service.MovePrimaryResult, error)) {
	wr := &wire.MovePrimaryRequest{Topic: req.Topic, TopicID: wire.TopicID(req.TopicID), Partition: req.Partition,
		TargetNodeID: req.TargetNodeID, TimeoutMs: uint32(req.Timeout.Milliseconds())}
	c.movePrimary(wr, func(v any) {
		if resp, ok := v.(*wire.MovePrimaryResponse); ok {
			done(service.MovePrimaryResult{PrimaryID: resp.PrimaryID, Generation: resp.Generation}, nil)
			return
		}
		done(service.MovePrimaryResult{}, anyErr(v))
	})
}

// svcRebalance runs the balancer's Rebalance (ctl.Balancer) for the
// service.
func (c *controller) svcRebalance(req *service.RebalanceRequest, done func(service.RebalanceResult, error)) {
	c.rebalance(&wire.RebalanceRequest{DryRun: req.DryRun, MovesMax: req.MovesMax, Preferred: req.Preferred}, func(v any) {
		resp, ok := v.(*wire.RebalanceResponse)
		if !ok {
			done(service.RebalanceResult{}, anyErr(v))
			return
		}
		res := service.RebalanceResult{Started: resp.Started}
		for _, m := range resp.Moves {
			res.Moves = append(res.Moves, service.PrimaryMove{Topic: m.Topic, TopicID: metadata.TopicID(m.TopicID),
				Partition: m.Partition, FromNode: m.FromNode, ToNode: m.ToNode})
		}
		done(res, nil)
	})
}

// anyErr is the error of an answer that is not the response expected.
func anyErr(v any) error {
	if err, ok := v.(error); ok {
		return err
	}
	return service.Errorf(service.ErrInternal, "the balancer answered %T", v)
}

// changeUser proposes cmd and answers the user as committed.
func (c *controller) changeUser(cmd metadata.Command, timeout time.Duration, done func(*metadata.User, error)) {
	c.propose(cmd, timeout, func(res metadata.Result, err error) {
		switch {
		case errors.Is(err, metadata.ErrUserExists):
			done(nil, service.Errorf(service.ErrUserExists, "%v", err))
		case errors.Is(err, metadata.ErrUnknownUser), errors.Is(err, metadata.ErrNoCredential):
			done(nil, service.Errorf(service.ErrUnknownUser, "%v", err))
		case err != nil:
			done(nil, metaKindErr(err))
		default:
			done(res.User, nil)
		}
	})
}

// bootstrapUser is the administrator cfg asks for at the first start
// (nil when auth is none).
func bootstrapUser(cfg config.Security) (*metadata.User, error) {
	if cfg.Auth != config.AuthSCRAM {
		return nil, nil
	}
	cred, cred512, err := nodesvc.Credentials(cfg.AdminPassword)
	if err != nil {
		return nil, err
	}
	return &metadata.User{Name: cfg.AdminUser, Credential: cred, CredentialSHA512: cred512, Superuser: true}, nil
}

// maybeBootstrap creates the configured administrator when this node
// leads a metadata group that never had a user: the cluster's first
// start. A cluster whose users were all deleted later does not get the
// configured one back (its password may be known to people it should
// no longer admit). A failed proposal is tried again at the next
// commit; two nodes that both try (a primary change meanwhile) are
// harmless, the second is refused as USER_ALREADY_EXISTS.
func (c *controller) maybeBootstrap() {
	if c.bootstrap == nil || c.bootstrapping || c.State().UserGeneration() > 0 || c.r == nil || !c.r.IsPrimary() || c.d.ready() != nil {
		return
	}
	c.bootstrapping = true
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpCreateUser, User: c.bootstrap}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		c.bootstrapping = false
		if err != nil && !errors.Is(err, metadata.ErrUserExists) {
			c.d.log.Warn("security: creating the administrator of security.admin_user failed; retrying at the next metadata commit", "user", c.bootstrap.Name, "err", err)
			return
		}
		c.d.log.Info("security: created the administrator of security.admin_user (the cluster had no user)", "user", c.bootstrap.Name)
		c.bootstrap = nil
	})
}

// deleteOffsets drops consumer's committed offsets of parts, or every
// one of them when parts is empty, through the metadata group (where
// the named-consumer offsets, a group's among them, are stored today).
func (c *controller) deleteOffsets(consumer string, parts []service.TopicPartition, done func(struct{}, error)) {
	if len(parts) > metadata.OffsetsPerCommitMax {
		done(struct{}{}, service.Errorf(service.ErrInvalidRequest, "a delete of %d offsets; at most %d at once", len(parts), metadata.OffsetsPerCommitMax))
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpDeleteOffsets, Consumer: consumer}
	for _, p := range parts {
		cmd.Offsets = append(cmd.Offsets, metadata.OffsetEntry{OffsetKey: metadata.OffsetKey{Topic: p.Topic, Partition: p.Partition}})
	}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		if err != nil {
			done(struct{}{}, metaKindErr(err))
			return
		}
		done(struct{}{}, nil)
	})
}

// groupsTopicCreateTimeout bounds the proposal of the groups topic's
// create, as long as one call of a coordinator.
const groupsTopicCreateTimeout = 10 * time.Second

// createGroupsTopic creates the groups' internal topic with partitions
// partitions and the cluster's default replication factor (capped by the
// roster); a topic that exists already is success.
func (c *controller) createGroupsTopic(partitions int, done func(error)) {
	// Unlimited time and size retention: deleting old segments by age
	// would lose the state of groups that last changed long ago. The
	// segments below a complete checkpoint go instead
	// (groupshost/checkpoint.go).
	c.createInternalTopic(metadata.GroupsTopic, partitions, metadata.TopicConfig{RetentionMs: -1, RetentionBytes: -1}, done)
}

// createTxnsTopic creates the transaction coordinators' internal topic,
// compacted (each transactional id's newest record is its whole state)
// and never deleted by age or size.
func (c *controller) createTxnsTopic(partitions int, done func(error)) {
	c.createInternalTopic(metadata.TransactionsTopic, partitions,
		metadata.TopicConfig{RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: metadata.CleanupCompact}, done)
}

// createInternalTopic creates internal topic name; one that exists
// already is success.
func (c *controller) createInternalTopic(name string, partitions int, cfg metadata.TopicConfig, done func(error)) {
	roster, eligible := c.rosterIDs()
	defRF := c.d.defaultRF.Resolve(len(roster))
	cmd, err := c.State().PlanCreateTopic(metadata.CreateRequest{Name: name, Partitions: partitions,
		Racks: c.rosterRacks(), Internal: true, Config: cfg},
		roster, eligible, defRF, c.d.clock.Now().UnixMilli())
	if err == nil && c.d.topicID != nil {
		cmd.Topic.ID = c.d.topicID() // the seam createTopic draws from, so that a simulated seed replays
	}
	if errors.Is(err, metadata.ErrTopicExists) {
		done(nil)
		return
	}
	if err != nil {
		done(metaKindErr(err))
		return
	}
	c.propose(cmd, groupsTopicCreateTimeout, func(_ metadata.Result, err error) {
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
			done(metaKindErr(err))
			return
		}
		done(nil)
	})
}
