package nodesvc

import (
	"encoding/binary"
	"errors"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
)

// A group exists while its coordinator holds it (it has members, had
// them, or has committed offsets in __groups) or while it has
// named-consumer offsets in the metadata group (the fallback of
// FetchGroupOffsets), as in Kafka: an Empty group of offsets only can be
// described, deleted and have its offsets deleted or reset. Deleting
// drops both copies: the metadata group's first, then the coordinator's
// (whose tombstones go into __groups).

// groupState is what the delete calls read of a group first, on its
// coordinator's shard.
type groupState struct {
	// known: the coordinator holds the group; members and subscribed
	// (the topics its consumer members subscribe to) as it holds them.
	known      bool
	members    int
	subscribed map[string]bool
}

// readGroupState reads group's state on its coordinator's shard.
func (s *Service) readGroupState(from *shard.Shard, group string, done func(groupState, error)) {
	groupCall(s, from, group, func(c *groups.Coordinator, reply func(groupState, error)) {
		d, err := c.Describe(group)
		st := groupState{known: err == nil, members: len(d.Members), subscribed: map[string]bool{}}
		if st.known && d.ProtocolType == "consumer" {
			for _, m := range d.Members {
				for _, t := range subscriptionTopics(m.Metadata) {
					st.subscribed[t] = true
				}
			}
		}
		reply(st, nil)
	}, done)
}

// DeleteGroup implements service.Groups: an empty group is forgotten
// with its committed offsets.
func (s *Service) DeleteGroup(from *shard.Shard, group string, done func(error)) {
	s.readGroupState(from, group, func(st groupState, err error) {
		switch {
		case err != nil:
			done(err)
			return
		case st.members > 0:
			done(service.Errorf(service.ErrNonEmptyGroup, "group %q has %d members; it can be deleted once they leave or their sessions expire", group, st.members))
			return
		}
		s.metaOffsets(from, &service.FetchOffsetsRequest{Consumer: group}, func(offs []service.CommittedOffset, err error) {
			switch {
			case err != nil:
				done(err)
				return
			case !st.known && len(offs) == 0:
				done(service.Errorf(service.ErrUnknownGroup, "group %q has no members and no committed offsets", group))
				return
			}
			forget := func() {
				groupCall(s, from, group, func(c *groups.Coordinator, reply func(struct{}, error)) {
					if err := c.Delete(group); err != nil && !errors.Is(err, groups.ErrUnknownGroup) {
						reply(struct{}{}, s.groupErr(err))
						return
					}
					reply(struct{}{}, nil)
				}, func(_ struct{}, err error) { done(err) })
			}
			if len(offs) == 0 {
				forget()
				return
			}
			adminCall(s, from, true, func(a Admin, reply func(struct{}, error)) { a.DeleteOffsets(group, nil, reply) },
				func(_ struct{}, err error) {
					if err != nil {
						done(err)
						return
					}
					forget()
				})
		})
	})
}

// DeleteGroupOffsets implements service.Groups (Kafka's OffsetDelete):
// the offsets of a topic a member of the group subscribes to stay
// (ErrGroupSubscribedToTopic), the others are dropped; a partition with
// no committed offset is no error.
func (s *Service) DeleteGroupOffsets(from *shard.Shard, req *service.DeleteGroupOffsetsRequest, done func([]error, error)) {
	s.readGroupState(from, req.Group, func(st groupState, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		s.metaOffsets(from, &service.FetchOffsetsRequest{Consumer: req.Group}, func(offs []service.CommittedOffset, err error) {
			if err != nil {
				done(nil, err)
				return
			}
			if !st.known && len(offs) == 0 {
				done(nil, service.Errorf(service.ErrUnknownGroup, "group %q has no members and no committed offsets", req.Group))
				return
			}
			entries := make([]error, len(req.Partitions))
			var drop []service.TopicPartition
			for i, p := range req.Partitions {
				if st.subscribed[p.Topic] {
					entries[i] = service.Errorf(service.ErrGroupSubscribedToTopic, "a member of group %q subscribes to topic %q: its offsets stay while it does", req.Group, p.Topic)
					continue
				}
				drop = append(drop, p)
			}
			if len(drop) == 0 {
				done(entries, nil)
				return
			}
			// The coordinator's copy (in __groups), once the metadata
			// group's is gone, so that the fallback cannot bring it back.
			forget := func() {
				if !st.known {
					done(entries, nil)
					return
				}
				tps := make([]groups.TopicPartition, len(drop))
				for i, p := range drop {
					tps[i] = groups.TopicPartition{Topic: p.Topic, Partition: p.Partition}
				}
				groupCall(s, from, req.Group, func(c *groups.Coordinator, reply func(struct{}, error)) {
					c.DeleteOffsets(req.Group, tps, func(err error) { reply(struct{}{}, s.groupErr(err)) })
				}, func(_ struct{}, err error) {
					if err != nil {
						done(nil, err)
						return
					}
					done(entries, nil)
				})
			}
			if !hasAny(offs, drop) {
				forget()
				return
			}
			adminCall(s, from, true, func(a Admin, reply func(struct{}, error)) { a.DeleteOffsets(req.Group, drop, reply) },
				func(_ struct{}, err error) {
					if err != nil {
						done(nil, err)
						return
					}
					forget()
				})
		})
	})
}

// hasAny says whether offs holds a committed offset of one of tps.
func hasAny(offs []service.CommittedOffset, tps []service.TopicPartition) bool {
	for _, o := range offs {
		for _, tp := range tps {
			if o.Offset >= 0 && o.Topic == tp.Topic && o.Partition == tp.Partition {
				return true
			}
		}
	}
	return false
}

// subscriptionTopics reads the topics of a member's metadata in Kafka's
// consumer protocol (ConsumerProtocolSubscription: int16 version, then
// an array of int16-length strings; the same layout in every version),
// which Kafka clients and the native SDK both send; nil when it does
// not parse.
func subscriptionTopics(b []byte) []string {
	if len(b) < 6 {
		return nil
	}
	n := int(int32(binary.BigEndian.Uint32(b[2:6])))
	b = b[6:]
	if n < 0 || n > len(b)/2 {
		return nil
	}
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		if len(b) < 2 {
			return nil
		}
		l := int(int16(binary.BigEndian.Uint16(b)))
		if l < 0 || len(b) < 2+l {
			return nil
		}
		out = append(out, string(b[2:2+l]))
		b = b[2+l:]
	}
	return out
}
