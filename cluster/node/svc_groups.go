package node

import (
	"errors"
	"sort"

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
func (s *nodeService) groupErr(err error) error {
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
// (groups_log.go) and answers through done on from (on the owner when
// from is nil); a group this node does not coordinate, or an invalid
// name, is answered its error without fn.
func groupCall[R any](s *nodeService, from *shard.Shard, group string, fn func(c *groups.Coordinator, reply func(R, error)), done func(R, error)) {
	var zero R
	if s.groups == nil {
		done(zero, service.Errorf(service.ErrCoordinatorNotAvailable, "this node runs no group coordinator"))
		return
	}
	if err := wire.ValidateConsumerName(group); err != nil {
		done(zero, service.Errorf(service.ErrInvalidConsumerName, "group %q: %v", group, err))
		return
	}
	groupsCall(s.groups, from, group, fn, done)
}

// FindCoordinator implements service.Groups: the primary of the group's
// partition of the internal topic (docs/design/groups.md).
func (s *nodeService) FindCoordinator(group string) (service.GroupCoordinator, error) {
	if err := wire.ValidateConsumerName(group); err != nil {
		return service.GroupCoordinator{NodeID: -1}, service.Errorf(service.ErrInvalidConsumerName, "group %q: %v", group, err)
	}
	if s.groups == nil {
		return service.GroupCoordinator{NodeID: -1}, service.Errorf(service.ErrCoordinatorNotAvailable, "this node runs no group coordinator")
	}
	return s.groups.find(group)
}

// JoinGroup implements service.Groups.
func (s *nodeService) JoinGroup(from *shard.Shard, req *service.JoinGroupRequest, done func(service.JoinGroupResult, error)) {
	jr := groups.JoinRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, ClientID: req.ClientID,
		Host: req.Host, ProtocolType: req.ProtocolType, SessionTimeout: req.SessionTimeout,
		RebalanceTimeout: req.RebalanceTimeout, RequireKnownMember: req.RequireKnownMember}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, groups.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	ptype := req.ProtocolType
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(service.JoinGroupResult, error)) {
		c.Join(s.now(), jr, func(res groups.JoinResult, err error) {
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
func (s *nodeService) SyncGroup(from *shard.Shard, req *service.SyncGroupRequest, done func(service.SyncGroupResult, error)) {
	sr := groups.SyncRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation, Assignments: req.Assignments}
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(service.SyncGroupResult, error)) {
		c.Sync(s.now(), sr, func(assignment []byte, err error) {
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
func (s *nodeService) Heartbeat(from *shard.Shard, req *service.HeartbeatRequest, done func(error)) {
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(struct{}, error)) {
		reply(struct{}{}, s.groupErr(c.Heartbeat(s.now(), req.Group, req.MemberID, req.Generation)))
	}, func(_ struct{}, err error) { done(err) })
}

// LeaveGroup implements service.Groups.
func (s *nodeService) LeaveGroup(from *shard.Shard, req *service.LeaveGroupRequest, done func([]error, error)) {
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func([]error, error)) {
		ids := make([]string, len(req.Members))
		for i, m := range req.Members {
			ids[i] = m.MemberID
			if m.MemberID == "" && m.InstanceID != "" {
				ids[i] = c.MemberOfInstance(req.Group, m.InstanceID)
			}
		}
		errs := c.Leave(s.now(), req.Group, ids)
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
func (s *nodeService) CommitGroupOffsets(from *shard.Shard, req *service.CommitGroupOffsetsRequest, done func([]error, error)) {
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
		c.Commit(s.now(), req.Group, req.MemberID, req.Generation, offs, func(err error) { reply(struct{}{}, s.groupErr(err)) })
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
func (s *nodeService) FetchGroupOffsets(from *shard.Shard, req *service.FetchGroupOffsetsRequest, done func([]service.CommittedOffset, error)) {
	var tps []groups.TopicPartition
	if len(req.Partitions) > 0 {
		tps = make([]groups.TopicPartition, len(req.Partitions))
		for i, tp := range req.Partitions {
			tps[i] = groups.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
		}
	}
	groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func([]groups.Offset, error)) {
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
			done(mergeGroupOffsets(have, old, tps == nil), nil)
		})
	})
}

// currentOffsets leaves out (all) or answers -1 for the offsets
// committed for a topic that no longer exists or was created again
// under its name since (another topic id): the new topic does not
// inherit them.
func (s *nodeService) currentOffsets(have []groups.Offset, all bool) []groups.Offset {
	v := s.view()
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

// mergeGroupOffsets is the coordinator's offsets with the metadata
// group's copy filling the partitions the coordinator has none of; with
// all, every partition either has, sorted, else in have's order.
func mergeGroupOffsets(have []groups.Offset, old []service.CommittedOffset, all bool) []service.CommittedOffset {
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
func (s *nodeService) ListGroups(from *shard.Shard, req *service.ListGroupsRequest, done func([]service.GroupSummary, error)) {
	if s.groups == nil {
		done(nil, nil)
		return
	}
	want := map[string]bool{}
	for _, st := range req.States {
		want[st] = true
	}
	groupsAll(s.groups, from, func(gs *groupsShard) []service.GroupSummary {
		var out []service.GroupSummary
		for _, pt := range gs.sorted() {
			if !pt.loaded {
				continue
			}
			for _, d := range pt.coord.List() {
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
func (s *nodeService) DescribeGroup(from *shard.Shard, group string, done func(service.GroupDescription, error)) {
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
