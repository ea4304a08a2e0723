package node

import (
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// The service's admin calls: each runs on the controller's shard
// (adminCall) once the controller admits it.

// CreateTopic implements service.Admin.
func (s *nodeService) CreateTopic(from *shard.Shard, req *service.CreateTopicRequest, done func(service.CreateTopicResult, error)) {
	done = metered(s.meter, apiCreateTopic, done)
	r := *req
	adminCall(s, from, true, func(c metadataAdmin, reply func(service.CreateTopicResult, error)) { c.createTopic(&r, reply) }, done)
}

// DeleteTopic implements service.Admin.
func (s *nodeService) DeleteTopic(from *shard.Shard, req *service.DeleteTopicRequest, done func(metadata.TopicID, error)) {
	done = metered(s.meter, apiDeleteTopic, done)
	r := *req
	adminCall(s, from, true, func(c metadataAdmin, reply func(metadata.TopicID, error)) { c.deleteTopic(&r, reply) }, done)
}

// AddPartitions implements service.Admin.
func (s *nodeService) AddPartitions(from *shard.Shard, req *service.AddPartitionsRequest, done func(int32, error)) {
	done = metered(s.meter, apiAddPartitions, done)
	r := *req
	adminCall(s, from, true, func(c metadataAdmin, reply func(int32, error)) { c.addPartitions(&r, reply) }, done)
}

// AlterTopicConfig implements service.Admin.
func (s *nodeService) AlterTopicConfig(from *shard.Shard, req *service.AlterTopicConfigRequest, done func(metadata.TopicConfig, error)) {
	r := *req
	adminCall(s, from, true, func(c metadataAdmin, reply func(metadata.TopicConfig, error)) { c.alterTopicConfig(&r, reply) }, done)
}

// alterTopicConfig proposes the topic's new overrides: its current ones
// (none with Replace) changed by req's Set and Reset.
func (c *controller) alterTopicConfig(req *service.AlterTopicConfigRequest, done func(metadata.TopicConfig, error)) {
	t := c.state.Topic(req.Name)
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
	cmd, err := c.state.PlanAlterConfig(req.Name, t.ID, cfg)
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
// max_message_bytes) of cfg to the
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
	}
	return nil
}

// CommitOffsets implements service.Admin: a named consumer's offsets
// are those of the group of its name, stored by the group's coordinator
// in __groups (docs/design/groups.md): a commit with no member and
// generation -1, refused (ILLEGAL_GENERATION) while the group has
// members. Elsewhere than at the coordinator it answers
// ErrNotCoordinator with a hint.
func (s *nodeService) CommitOffsets(from *shard.Shard, req *service.CommitOffsetsRequest, done func([]error, error)) {
	done = metered(s.meter, apiCommitOffsets, done)
	s.CommitGroupOffsets(from, &service.CommitGroupOffsetsRequest{Group: req.Consumer, Generation: -1, Offsets: req.Offsets}, done)
}

// FetchOffsets implements service.Admin: the group's offsets, as
// FetchGroupOffsets reads them (the coordinator's, and the metadata
// group's copy for partitions it has none of).
func (s *nodeService) FetchOffsets(from *shard.Shard, req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error)) {
	done = metered(s.meter, apiFetchOffsets, done)
	s.FetchGroupOffsets(from, &service.FetchGroupOffsetsRequest{Group: req.Consumer, Partitions: req.Partitions}, done)
}

// metaOffsets reads a named consumer's offsets in the metadata group,
// where they were stored before groups moved to __groups; any node
// answers it.
func (s *nodeService) metaOffsets(from *shard.Shard, req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error)) {
	r := *req
	adminCall(s, from, false, func(c metadataAdmin, reply func([]service.CommittedOffset, error)) { c.fetchOffsets(&r, reply) }, done)
}

// MovePrimary implements service.Admin.
func (s *nodeService) MovePrimary(from *shard.Shard, req *service.MovePrimaryRequest, done func(service.MovePrimaryResult, error)) {
	done = metered(s.meter, apiMovePrimary, done)
	r := *req
	adminCall(s, from, true, func(c metadataAdmin, reply func(service.MovePrimaryResult, error)) { c.svcMovePrimary(&r, reply) }, done)
}

// Rebalance implements service.Admin.
func (s *nodeService) Rebalance(from *shard.Shard, req *service.RebalanceRequest, done func(service.RebalanceResult, error)) {
	done = metered(s.meter, apiRebalance, done)
	r := *req
	adminCall(s, from, true, func(c metadataAdmin, reply func(service.RebalanceResult, error)) { c.svcRebalance(&r, reply) }, done)
}

// svcMovePrimary runs the balancer's MovePrimary (balancer.go, which
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

// svcRebalance runs the balancer's Rebalance (balancer.go) for the
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

// ChangeRoster implements service.Admin: a list is answered by any node.
func (s *nodeService) ChangeRoster(from *shard.Shard, req *service.RosterRequest, done func(service.RosterResult, error)) {
	done = metered(s.meter, apiChangeRoster, done)
	r := *req
	adminCall(s, from, r.Action != service.RosterList, func(c metadataAdmin, reply func(service.RosterResult, error)) { c.changeRoster(&r, reply) }, done)
}

// Reassign implements service.Admin.
func (s *nodeService) Reassign(from *shard.Shard, req *service.ReassignRequest, done func(service.ReassignResult, error)) {
	done = metered(s.meter, apiReassign, done)
	r := *req
	adminCall(s, from, true, func(c metadataAdmin, reply func(service.ReassignResult, error)) { c.svcReassign(&r, reply) }, done)
}
