package nodesvc

import (
	"errors"
	"sort"
	"sync/atomic"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// groupKinds gives the coordinator's errors their service kinds.
var groupKinds = []struct {
	is, kind error
}{
	{groups.ErrUnknownMember, service.ErrUnknownMember},
	{groups.ErrIllegalGeneration, service.ErrIllegalGeneration},
	{groups.ErrRebalanceInProgress, service.ErrRebalanceInProgress},
	{groups.ErrMemberIDRequired, service.ErrMemberIDRequired},
	{groups.ErrInconsistentProtocol, service.ErrInconsistentProtocol},
	{groups.ErrInvalidSessionTimeout, service.ErrInvalidSessionTimeout},
	{groups.ErrUnknownGroup, service.ErrUnknownGroup},
	{groups.ErrNonEmptyGroup, service.ErrNonEmptyGroup},
	{groups.ErrGroupFull, service.ErrGroupFull},
	{groups.ErrFencedInstance, service.ErrFencedInstance},
	// The coordinator is full: no node can take the group now.
	{groups.ErrTooManyGroups, service.ErrCoordinatorNotAvailable},
	{groups.ErrTooManyOffsets, service.ErrInvalidRequest},
	{groups.ErrNotCoordinator, service.ErrNotCoordinator},
	{groups.ErrInvalidOffset, service.ErrInvalidOffset},
}

// groupErr gives a coordinator error its service kind, message kept.
func (s *Service) groupErr(err error) error {
	if err == nil {
		return nil
	}
	for _, g := range groupKinds {
		if errors.Is(err, g.is) {
			return service.Errorf(g.kind, "%v", err)
		}
	}
	return s.svcErr(err)
}

// groupCall runs fn with group's coordinator on the shard that owns it
// and answers through done on from (on the owner when from is nil); a
// group this node does not coordinate, or an invalid name, is answered
// its error without fn.
func groupCall[R any](s *Service, from *shard.Shard, group string, fn func(c *groups.Coordinator, reply func(R, error)), done func(R, error)) {
	var zero R
	if s.d.Groups == nil {
		done(zero, service.Errorf(service.ErrCoordinatorNotAvailable, "this node runs no group coordinator"))
		return
	}
	if err := wire.ValidateConsumerName(group); err != nil {
		done(zero, service.Errorf(service.ErrInvalidConsumerName, "group %q: %v", group, err))
		return
	}
	owner, lookup, err := s.d.Groups.Locate(group)
	if err != nil {
		done(zero, err)
		return
	}
	RunOn(from, owner, nil, func(_ *shard.Shard, reply func(R, error)) {
		c, err := lookup()
		if err != nil {
			reply(zero, err)
			return
		}
		fn(c, reply)
	}, done)
}

// groupsAll runs read on every shard of the coordinators with its id and
// calls done once with the answers, by shard id: on from, or (from nil)
// on the shard that answered last. A shard that cannot take the call
// answers R's zero value.
func groupsAll[R any](s *Service, from *shard.Shard, read func(i int) R, done func([]R)) {
	shards := s.d.Groups.Shards()
	out := make([]R, len(shards))
	var left atomic.Int32 // answers may arrive on several shards when from is nil
	left.Store(int32(len(shards)))
	for i, sh := range shards {
		RunOn(from, sh, nil, func(_ *shard.Shard, reply func(R, error)) { reply(read(i), nil) }, func(v R, _ error) {
			out[i] = v
			if left.Add(-1) == 0 {
				done(out)
			}
		})
	}
}

// FindCoordinator implements service.Groups: the primary of the group's
// partition of the internal topic (docs/design/groups.md).
func (s *Service) FindCoordinator(group string) (service.GroupCoordinator, error) {
	if err := wire.ValidateConsumerName(group); err != nil {
		return service.GroupCoordinator{NodeID: -1}, service.Errorf(service.ErrInvalidConsumerName, "group %q: %v", group, err)
	}
	if s.d.Groups == nil {
		return service.GroupCoordinator{NodeID: -1}, service.Errorf(service.ErrCoordinatorNotAvailable, "this node runs no group coordinator")
	}
	return s.d.Groups.Find(group)
}

// JoinGroup implements service.Groups.
func (s *Service) JoinGroup(from *shard.Shard, req *service.JoinGroupRequest, done func(service.JoinGroupResult, error)) {
	jr := groups.JoinRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, ClientID: req.ClientID,
		Host: req.Host, ProtocolType: req.ProtocolType, SessionTimeout: req.SessionTimeout,
		RebalanceTimeout: req.RebalanceTimeout, RequireKnownMember: req.RequireKnownMember}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, groups.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	ptype := req.ProtocolType
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(service.JoinGroupResult, error)) {
		c.Join(s.d.Now(), jr, func(res groups.JoinResult, err error) {
			out := service.JoinGroupResult{Generation: res.Generation, MemberID: res.MemberID}
			if err == nil {
				out.ProtocolType, out.Protocol, out.LeaderID = ptype, res.Protocol, res.LeaderID
				for _, m := range res.Members {
					out.Members = append(out.Members, service.GroupMember{MemberID: m.ID, InstanceID: m.InstanceID, Metadata: m.Metadata})
				}
			}
			reply(out, s.groupErr(err))
		})
	}, func(out service.JoinGroupResult, err error) {
		if err != nil && out.MemberID == "" && out.Generation == 0 {
			out.Generation, out.MemberID = -1, req.MemberID // refused before the coordinator saw it
		}
		done(out, err)
	})
}

// SyncGroup implements service.Groups.
func (s *Service) SyncGroup(from *shard.Shard, req *service.SyncGroupRequest, done func(service.SyncGroupResult, error)) {
	sr := groups.SyncRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation, Assignments: req.Assignments}
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(service.SyncGroupResult, error)) {
		c.Sync(s.d.Now(), sr, func(assignment []byte, err error) {
			var out service.SyncGroupResult
			if err == nil {
				out.Assignment = assignment
				if d, derr := c.Describe(req.Group); derr == nil {
					out.ProtocolType, out.Protocol = d.ProtocolType, d.Protocol
				}
			}
			reply(out, s.groupErr(err))
		})
	}, done)
}

// Heartbeat implements service.Groups.
func (s *Service) Heartbeat(from *shard.Shard, req *service.HeartbeatRequest, done func(error)) {
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(struct{}, error)) {
		reply(struct{}{}, s.groupErr(c.Heartbeat(s.d.Now(), req.Group, req.MemberID, req.Generation)))
	}, func(_ struct{}, err error) { done(err) })
}

// LeaveGroup implements service.Groups.
func (s *Service) LeaveGroup(from *shard.Shard, req *service.LeaveGroupRequest, done func([]error, error)) {
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func([]error, error)) {
		ids := make([]string, len(req.Members))
		for i, m := range req.Members {
			ids[i] = m.MemberID
			if m.MemberID == "" && m.InstanceID != "" {
				ids[i] = c.MemberOfInstance(req.Group, m.InstanceID)
			}
		}
		errs := c.Leave(s.d.Now(), req.Group, ids)
		for i := range errs {
			errs[i] = s.groupErr(errs[i])
		}
		reply(errs, nil)
	}, done)
}

// CommitGroupOffsets implements service.Groups: the coordinator checks
// the member and generation and answers once the offsets are durable in
// the group's partition of the internal topic. An entry for a partition
// the node's metadata does not have is refused on its own.
func (s *Service) CommitGroupOffsets(from *shard.Shard, req *service.CommitGroupOffsetsRequest, done func([]error, error)) {
	entries := make([]error, len(req.Offsets))
	var offs []groups.Offset
	for i, o := range req.Offsets {
		t, err := s.topicFor(o.Topic, o.Partition)
		if err == nil {
			err = checkTopicID(o.TopicID, t)
		}
		if err != nil {
			entries[i] = err
			continue
		}
		offs = append(offs, groups.Offset{TopicPartition: groups.TopicPartition{Topic: o.Topic, Partition: o.Partition},
			TopicID: t.ID, Offset: o.Offset, Metadata: o.Metadata})
	}
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(struct{}, error)) {
		c.Commit(s.d.Now(), req.Group, req.MemberID, req.Generation, offs, func(err error) { reply(struct{}{}, s.groupErr(err)) })
	}, func(_ struct{}, err error) {
		if err != nil && errors.Is(err, service.ErrInvalidOffset) {
			for i := range entries {
				if entries[i] == nil {
					entries[i] = err
				}
			}
			done(entries, nil)
			return
		}
		if err != nil {
			done(nil, err)
			return
		}
		done(entries, nil)
	})
}

// FetchGroupOffsets implements service.Groups: the coordinator's
// offsets, and, for a partition it has none of, the group's
// named-consumer offset in the metadata group (what groups committed
// before they moved to the internal topic, and what a native consumer
// of the same name commits).
func (s *Service) FetchGroupOffsets(from *shard.Shard, req *service.FetchGroupOffsetsRequest, done func([]service.CommittedOffset, error)) {
	var tps []groups.TopicPartition
	if len(req.Partitions) > 0 {
		tps = make([]groups.TopicPartition, len(req.Partitions))
		for i, tp := range req.Partitions {
			tps[i] = groups.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
		}
	}
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func([]groups.Offset, error)) {
		if req.RequireStable && c.Unstable(req.Group, tps) {
			reply(nil, service.Errorf(service.ErrUnstableOffsetCommit, "group %q has offsets staged by an open transaction; retry once it ends", req.Group))
			return
		}
		reply(s.currentOffsets(c.Offsets(req.Group, tps), tps == nil), nil)
	}, func(have []groups.Offset, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		s.metaOffsets(from, &service.FetchOffsetsRequest{Consumer: req.Group, Partitions: req.Partitions}, func(old []service.CommittedOffset, err error) {
			if err != nil {
				old = nil // the fallback is for old data only: serve what the coordinator has
			}
			done(MergeGroupOffsets(have, old, tps == nil), nil)
		})
	})
}

// currentOffsets leaves out (all) or answers -1 for the offsets
// committed for a topic that no longer exists or was created again
// under its name since (another topic id): the new topic does not
// inherit them.
func (s *Service) currentOffsets(have []groups.Offset, all bool) []groups.Offset {
	v := s.d.View()
	out := have[:0]
	for _, o := range have {
		if o.Offset >= 0 {
			if t := v.Topics[o.Topic]; t == nil || o.TopicID != ([16]byte{}) && o.TopicID != [16]byte(t.ID) {
				if all {
					continue
				}
				o.Offset, o.Metadata, o.TopicID = -1, "", [16]byte{}
			}
		}
		out = append(out, o)
	}
	return out
}

// MergeGroupOffsets is the coordinator's offsets with the metadata
// group's copy filling the partitions the coordinator has none of; with
// all, every partition either has, sorted, else in have's order.
func MergeGroupOffsets(have []groups.Offset, old []service.CommittedOffset, all bool) []service.CommittedOffset {
	oldOf := map[groups.TopicPartition]service.CommittedOffset{}
	for _, o := range old {
		if o.Offset >= 0 {
			oldOf[groups.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o
		}
	}
	out := make([]service.CommittedOffset, 0, len(have))
	for _, o := range have {
		co := service.CommittedOffset{Topic: o.Topic, TopicID: metadata.TopicID(o.TopicID), Partition: o.Partition, Offset: o.Offset,
			Metadata: o.Metadata}
		if o.Offset < 0 {
			if m, ok := oldOf[o.TopicPartition]; ok {
				co = m
			}
		}
		delete(oldOf, o.TopicPartition)
		out = append(out, co)
	}
	if all {
		for _, m := range oldOf {
			out = append(out, m)
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Topic != out[j].Topic {
				return out[i].Topic < out[j].Topic
			}
			return out[i].Partition < out[j].Partition
		})
	}
	return out
}

// ListGroups implements service.Groups: the groups this node
// coordinates (of the internal topic's partitions it leads), as a Kafka
// broker lists its own; every shard lists its own coordinators.
func (s *Service) ListGroups(from *shard.Shard, req *service.ListGroupsRequest, done func([]service.GroupSummary, error)) {
	if s.d.Groups == nil {
		done(nil, nil)
		return
	}
	want := map[string]bool{}
	for _, st := range req.States {
		want[st] = true
	}
	groupsAll(s, from, func(i int) []service.GroupSummary {
		var out []service.GroupSummary
		for _, c := range s.d.Groups.Loaded(i) {
			for _, d := range c.List() {
				if len(want) > 0 && !want[d.State.String()] {
					continue
				}
				out = append(out, service.GroupSummary{Name: d.Name, ProtocolType: d.ProtocolType, State: d.State.String()})
			}
		}
		return out
	}, func(per [][]service.GroupSummary) {
		var out []service.GroupSummary
		for _, l := range per {
			out = append(out, l...)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		done(out, nil)
	})
}

// DescribeGroup implements service.Groups.
func (s *Service) DescribeGroup(from *shard.Shard, group string, done func(service.GroupDescription, error)) {
	groupCall(s, from, group, func(c *groups.Coordinator, reply func(service.GroupDescription, error)) {
		d, err := c.Describe(group)
		out := service.GroupDescription{Name: group, State: d.State.String(), ProtocolType: d.ProtocolType, Protocol: d.Protocol,
			Generation: d.Generation}
		for _, m := range d.Members {
			out.Members = append(out.Members, service.GroupMemberDescription{MemberID: m.ID, InstanceID: m.InstanceID,
				ClientID: m.ClientID, Host: m.Host, Metadata: m.Metadata, Assignment: m.Assignment})
		}
		reply(out, s.groupErr(err))
	}, func(out service.GroupDescription, err error) {
		if out.Name == "" {
			out = service.GroupDescription{Name: group, State: groups.Dead.String()}
		}
		done(out, err)
	})
}

// GroupsRoutes are the routes of the consumer groups' internal topic as
// Metadata answers them, without counting a metadata request (the
// coordinators read them every tick); nil while the topic does not
// exist, an error while the node has not loaded the metadata.
func (s *Service) GroupsRoutes() ([]service.PartitionRoute, error) {
	return s.internalRoutes(metadata.GroupsTopic)
}

// internalRoutes are the routes of an internal topic as Metadata answers
// them, without counting a metadata request; nil while the topic does
// not exist, an error while the node has not loaded the metadata.
func (s *Service) internalRoutes(topic string) ([]service.PartitionRoute, error) {
	if err := s.d.Ready(); err != nil {
		return nil, s.svcErr(err)
	}
	t := s.d.View().Topics[topic]
	if t == nil {
		return nil, nil
	}
	return s.TopicMetadata(t).Partitions, nil
}

// CreateGroupsTopic asks the controller, on its shard, to create the
// internal topic with partitions partitions; done runs on the
// controller's shard.
func (s *Service) CreateGroupsTopic(partitions int, done func(error)) {
	adminCall(s, nil, true, func(c Admin, reply func(struct{}, error)) {
		c.CreateGroupsTopic(partitions, func(err error) { reply(struct{}{}, err) })
	}, func(_ struct{}, err error) { done(err) })
}
