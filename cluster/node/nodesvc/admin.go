package nodesvc

import (
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
)

// The service's admin calls: each runs on the controller's shard
// (adminCall) once the controller admits it.

// CreateTopic implements service.Admin.
func (s *Service) CreateTopic(from *shard.Shard, req *service.CreateTopicRequest, done func(service.CreateTopicResult, error)) {
	done = metered(s.d.Meter, apiCreateTopic, done)
	r := *req
	adminCall(s, from, true, func(c Admin, reply func(service.CreateTopicResult, error)) { c.CreateTopic(&r, reply) }, done)
}

// DeleteTopic implements service.Admin.
func (s *Service) DeleteTopic(from *shard.Shard, req *service.DeleteTopicRequest, done func(metadata.TopicID, error)) {
	done = metered(s.d.Meter, apiDeleteTopic, done)
	r := *req
	adminCall(s, from, true, func(c Admin, reply func(metadata.TopicID, error)) { c.DeleteTopic(&r, reply) }, done)
}

// AddPartitions implements service.Admin.
func (s *Service) AddPartitions(from *shard.Shard, req *service.AddPartitionsRequest, done func(int32, error)) {
	done = metered(s.d.Meter, apiAddPartitions, done)
	r := *req
	adminCall(s, from, true, func(c Admin, reply func(int32, error)) { c.AddPartitions(&r, reply) }, done)
}

// AlterTopicConfig implements service.Admin.
func (s *Service) AlterTopicConfig(from *shard.Shard, req *service.AlterTopicConfigRequest, done func(metadata.TopicConfig, error)) {
	r := *req
	adminCall(s, from, true, func(c Admin, reply func(metadata.TopicConfig, error)) { c.AlterTopicConfig(&r, reply) }, done)
}

// CommitOffsets implements service.Admin: a named consumer's offsets
// are those of the group of its name, stored by the group's coordinator
// in __groups (docs/design/groups.md): a commit with no member and
// generation -1, refused (ILLEGAL_GENERATION) while the group has
// members. Elsewhere than at the coordinator it answers
// ErrNotCoordinator with a hint.
func (s *Service) CommitOffsets(from *shard.Shard, req *service.CommitOffsetsRequest, done func([]error, error)) {
	done = metered(s.d.Meter, apiCommitOffsets, done)
	s.CommitGroupOffsets(from, &service.CommitGroupOffsetsRequest{Group: req.Consumer, Generation: -1, Offsets: req.Offsets}, done)
}

// FetchOffsets implements service.Admin: the group's offsets, as
// FetchGroupOffsets reads them (the coordinator's, and the metadata
// group's copy for partitions it has none of).
func (s *Service) FetchOffsets(from *shard.Shard, req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error)) {
	done = metered(s.d.Meter, apiFetchOffsets, done)
	s.FetchGroupOffsets(from, &service.FetchGroupOffsetsRequest{Group: req.Consumer, Partitions: req.Partitions}, done)
}

// metaOffsets reads a named consumer's offsets in the metadata group,
// where they were stored before groups moved to __groups; any node
// answers it.
func (s *Service) metaOffsets(from *shard.Shard, req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error)) {
	r := *req
	adminCall(s, from, false, func(c Admin, reply func([]service.CommittedOffset, error)) { c.FetchOffsets(&r, reply) }, done)
}

// MovePrimary implements service.Admin.
func (s *Service) MovePrimary(from *shard.Shard, req *service.MovePrimaryRequest, done func(service.MovePrimaryResult, error)) {
	done = metered(s.d.Meter, apiMovePrimary, done)
	r := *req
	adminCall(s, from, true, func(c Admin, reply func(service.MovePrimaryResult, error)) { c.MovePrimary(&r, reply) }, done)
}

// Rebalance implements service.Admin.
func (s *Service) Rebalance(from *shard.Shard, req *service.RebalanceRequest, done func(service.RebalanceResult, error)) {
	done = metered(s.d.Meter, apiRebalance, done)
	r := *req
	adminCall(s, from, true, func(c Admin, reply func(service.RebalanceResult, error)) { c.Rebalance(&r, reply) }, done)
}

// ChangeRoster implements service.Admin: a list is answered by any node.
func (s *Service) ChangeRoster(from *shard.Shard, req *service.RosterRequest, done func(service.RosterResult, error)) {
	done = metered(s.d.Meter, apiChangeRoster, done)
	r := *req
	adminCall(s, from, r.Action != service.RosterList, func(c Admin, reply func(service.RosterResult, error)) { c.ChangeRoster(&r, reply) }, done)
}

// Reassign implements service.Admin.
func (s *Service) Reassign(from *shard.Shard, req *service.ReassignRequest, done func(service.ReassignResult, error)) {
	done = metered(s.d.Meter, apiReassign, done)
	r := *req
	adminCall(s, from, true, func(c Admin, reply func(service.ReassignResult, error)) { c.Reassign(&r, reply) }, done)
}
