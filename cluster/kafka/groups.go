package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// Consumer groups (docs/design/groups.md). The handlers decode, call the
// service's group calls (service.Groups, through the connection's
// Guard: READ on the group to be a member, DESCRIBE to see it, DELETE to
// delete it) and encode; the coordinator and the offsets' storage are
// the service's.

// findCoordinator answers the group's coordinator, one key (v0-v3) or
// many (v4+), at its Kafka address, or (key type 1) the transactional
// id's transaction coordinator.
func (l *Listener) findCoordinator(req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(key string) (id int32, host string, port int32, code int16) {
		find := l.svc.FindCoordinator
		switch req.CoordinatorType {
		case 0:
		case 1:
			find = l.svc.FindTxnCoordinator
		default:
			return -1, "", -1, kerr.InvalidRequest.Code
		}
		co, err := find(key)
		if err != nil {
			return -1, "", -1, errorCode(err)
		}
		for _, b := range l.brokers() {
			if b.id == co.NodeID {
				return b.id, b.host, b.port, 0
			}
		}
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	if req.Version < 4 {
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = answer(req.CoordinatorKey)
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = key
		co.NodeID, co.Host, co.Port, co.ErrorCode = answer(key)
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp
}

// joinGroup parks until the group's rebalance completes.
func (l *Listener) joinGroup(c *netio.Conn, clientID string, req *kmsg.JoinGroupRequest, reply func(kmsg.Response)) {
	jr := &service.JoinGroupRequest{Group: req.Group, MemberID: req.MemberID, ClientID: clientID, Host: c.RemoteAddr().String(),
		ProtocolType: req.ProtocolType, SessionTimeout: time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond, RequireKnownMember: req.Version >= 4}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	if req.InstanceID != nil {
		jr.InstanceID = *req.InstanceID
	}
	for _, p := range req.Protocols {
		// The decoded bytes alias the read buffer, valid only until
		// OnFrame returns; the coordinator keeps them.
		jr.Protocols = append(jr.Protocols, service.GroupProtocol{Name: p.Name, Metadata: append([]byte{}, p.Metadata...)})
	}
	l.svc.JoinGroup(c.Shard(), jr, func(res service.JoinGroupResult, err error) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		empty := ""
		resp.Protocol = &empty
		resp.ErrorCode = errorCode(err)
		resp.Generation, resp.MemberID = res.Generation, res.MemberID
		if err == nil {
			proto, ptype := res.Protocol, res.ProtocolType
			resp.Protocol, resp.ProtocolType, resp.LeaderID = &proto, &ptype, res.LeaderID
			for _, m := range res.Members {
				rm := kmsg.NewJoinGroupResponseMember()
				rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
				if m.InstanceID != "" { // v5+; kmsg leaves it out before
					id := m.InstanceID
					rm.InstanceID = &id
				}
				resp.Members = append(resp.Members, rm)
			}
		}
		reply(resp)
	})
}

// syncGroup parks a follower until the leader's assignment arrives.
func (l *Listener) syncGroup(c *netio.Conn, req *kmsg.SyncGroupRequest, reply func(kmsg.Response)) {
	sr := &service.SyncGroupRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = append([]byte{}, a.MemberAssignment...) // aliases the read buffer
		}
	}
	l.svc.SyncGroup(c.Shard(), sr, func(res service.SyncGroupResult, err error) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = errorCode(err)
		if err == nil {
			resp.MemberAssignment = res.Assignment
			resp.ProtocolType, resp.Protocol = &res.ProtocolType, &res.Protocol
		}
		reply(resp)
	})
}

func (l *Listener) heartbeat(c *netio.Conn, req *kmsg.HeartbeatRequest, reply func(kmsg.Response)) {
	l.svc.Heartbeat(c.Shard(), &service.HeartbeatRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation},
		func(err error) {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = errorCode(err)
			reply(resp)
		})
}

func (l *Listener) leaveGroup(c *netio.Conn, req *kmsg.LeaveGroupRequest, reply func(kmsg.Response)) {
	lr := &service.LeaveGroupRequest{Group: req.Group}
	if req.Version < 3 {
		lr.Members = []service.LeavingMember{{MemberID: req.MemberID}}
	}
	for _, m := range req.Members {
		lm := service.LeavingMember{MemberID: m.MemberID}
		if m.InstanceID != nil {
			lm.InstanceID = *m.InstanceID
		}
		lr.Members = append(lr.Members, lm)
	}
	l.svc.LeaveGroup(c.Shard(), lr, func(entries []error, err error) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		switch {
		case err != nil:
			resp.ErrorCode = errorCode(err)
		case req.Version < 3:
			resp.ErrorCode = errorCode(entries[0])
		default:
			for i, e := range entries {
				rm := kmsg.NewLeaveGroupResponseMember()
				rm.MemberID, rm.InstanceID, rm.ErrorCode = req.Members[i].MemberID, req.Members[i].InstanceID, errorCode(e)
				resp.Members = append(resp.Members, rm)
			}
		}
		reply(resp)
	})
}

// offsetCommit commits through the service, which checks the member and
// generation before it stores the offsets.
func (l *Listener) offsetCommit(c *netio.Conn, req *kmsg.OffsetCommitRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := &service.CommitGroupOffsetsRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
			oc := service.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset}
			if p.Metadata != nil {
				oc.Metadata = *p.Metadata
			}
			cr.Offsets = append(cr.Offsets, oc)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	l.svc.CommitGroupOffsets(c.Shard(), cr, func(entries []error, err error) {
		i := 0
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				if err != nil {
					resp.Topics[ti].Partitions[pi].ErrorCode = errorCode(err)
				} else if i < len(entries) {
					resp.Topics[ti].Partitions[pi].ErrorCode = errorCode(entries[i])
				}
				i++
			}
		}
		reply(resp)
	})
}

// offsetFetch reads the group's committed offsets (of the partitions
// asked, or all it committed), -1 where none.
func (l *Listener) offsetFetch(c *netio.Conn, req *kmsg.OffsetFetchRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var asked []service.TopicPartition
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				asked = append(asked, service.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		l.groupOffsets(c, req.Group, asked, req.Topics == nil, req.RequireStable, func(a groupOffsetsAnswer) {
			resp.ErrorCode = a.code
			for _, t := range a.topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.topic
				for _, p := range t.parts {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.partition, p.offset, -1, p.metadata, p.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			reply(resp)
		})
		return
	}
	// v8+: several groups in one request (KIP-709), each answered on its
	// own, as this node coordinates it or not.
	if len(req.Groups) == 0 {
		reply(resp)
		return
	}
	resp.Groups = make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
	left := len(req.Groups)
	for i, g := range req.Groups {
		var asked []service.TopicPartition
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				asked = append(asked, service.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		l.groupOffsets(c, g.Group, asked, g.Topics == nil, req.RequireStable, func(a groupOffsetsAnswer) {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, a.code
			for _, t := range a.topics {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.topic
				for _, p := range t.parts {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.partition, p.offset, -1, p.metadata, p.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups[i] = rg
			if left--; left == 0 {
				reply(resp)
			}
		})
	}
}

// groupOffsetsAnswer is one group's offsets as OffsetFetch answers them,
// whatever its version: a group-level error code, and per topic the
// partitions asked (or all the group committed), each with its offset,
// metadata and error code.
type groupOffsetsAnswer struct {
	code   int16
	topics []topicOffsetsAnswer
}

type topicOffsetsAnswer struct {
	topic string
	parts []partitionOffsetAnswer
}

type partitionOffsetAnswer struct {
	partition int32
	offset    int64
	metadata  *string
	code      int16
}

// groupOffsets reads group's committed offsets of asked (all with all)
// and hands done the answer, on c's shard.
func (l *Listener) groupOffsets(c *netio.Conn, group string, asked []service.TopicPartition, all, requireStable bool, done func(groupOffsetsAnswer)) {
	if !all && len(asked) == 0 {
		done(groupOffsetsAnswer{})
		return
	}
	fr := &service.FetchGroupOffsetsRequest{Group: group, RequireStable: requireStable, Partitions: asked}
	l.svc.FetchGroupOffsets(c.Shard(), fr, func(offs []service.CommittedOffset, err error) {
		var a groupOffsetsAnswer
		byTopic := map[string]int{}
		add := func(topic string, p partitionOffsetAnswer) {
			ti, ok := byTopic[topic]
			if !ok {
				ti = len(a.topics)
				byTopic[topic] = ti
				a.topics = append(a.topics, topicOffsetsAnswer{topic: topic})
			}
			a.topics[ti].parts = append(a.topics[ti].parts, p)
		}
		if err != nil {
			code := errorCode(err)
			if code != kerr.UnstableOffsetCommit.Code {
				// Unstable offsets are a partition's answer only: a
				// client retries them there, while it gives up on a
				// group-level error.
				a.code = code
			}
			for _, tp := range asked {
				add(tp.Topic, partitionOffsetAnswer{partition: tp.Partition, offset: -1, code: code})
			}
			done(a)
			return
		}
		for _, o := range offs {
			md := o.Metadata
			add(o.Topic, partitionOffsetAnswer{partition: o.Partition, offset: o.Offset, metadata: &md})
		}
		done(a)
	})
}

// listGroups lists the groups this node coordinates, as a Kafka broker
// lists its own.
func (l *Listener) listGroups(c *netio.Conn, req *kmsg.ListGroupsRequest, reply func(kmsg.Response)) {
	l.svc.ListGroups(c.Shard(), &service.ListGroupsRequest{States: req.StatesFilter}, func(gs []service.GroupSummary, err error) {
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = errorCode(err)
		for _, g := range gs {
			rg := kmsg.NewListGroupsResponseGroup()
			rg.Group, rg.ProtocolType, rg.GroupState = g.Name, g.ProtocolType, g.State
			resp.Groups = append(resp.Groups, rg)
		}
		reply(resp)
	})
}

// describeGroups describes each group; one this coordinator does not
// hold is Dead with no error, as Kafka answers.
func (l *Listener) describeGroups(c *netio.Conn, req *kmsg.DescribeGroupsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
	left := len(req.Groups)
	if left == 0 {
		reply(resp)
		return
	}
	for i, name := range req.Groups {
		l.svc.DescribeGroup(c.Shard(), name, func(d service.GroupDescription, err error) {
			// Every answer runs on the connection's shard: left needs no lock.
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group = name
			if err != nil && !errors.Is(err, service.ErrUnknownGroup) {
				rg.ErrorCode = errorCode(err)
			} else {
				rg.State, rg.ProtocolType, rg.Protocol = d.State, d.ProtocolType, d.Protocol
				for _, m := range d.Members {
					rm := kmsg.NewDescribeGroupsResponseGroupMember()
					rm.MemberID, rm.ClientID, rm.ClientHost = m.MemberID, m.ClientID, m.Host
					if m.InstanceID != "" {
						id := m.InstanceID
						rm.InstanceID = &id
					}
					rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
					rg.Members = append(rg.Members, rm)
				}
			}
			resp.Groups[i] = rg
			if left--; left == 0 {
				reply(resp)
			}
		})
	}
}

// deleteGroups deletes empty groups.
func (l *Listener) deleteGroups(c *netio.Conn, req *kmsg.DeleteGroupsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	left := len(req.Groups)
	if left == 0 {
		reply(resp)
		return
	}
	for i, name := range req.Groups {
		l.svc.DeleteGroup(c.Shard(), name, func(err error) {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = name, errorCode(err)
			resp.Groups[i] = rg
			if left--; left == 0 {
				reply(resp)
			}
		})
	}
}

// offsetDelete drops a group's committed offsets of partitions whose
// topic no member subscribes to (Kafka's OffsetDelete).
func (l *Listener) offsetDelete(c *netio.Conn, req *kmsg.OffsetDeleteRequest, reply func(kmsg.Response)) {
	dr := &service.DeleteGroupOffsetsRequest{Group: req.Group}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			dr.Partitions = append(dr.Partitions, service.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	l.svc.DeleteGroupOffsets(c.Shard(), dr, func(entries []error, err error) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = errorCode(err)
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				if err == nil && i < len(entries) {
					rp.ErrorCode = errorCode(entries[i])
				}
				i++
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
	})
}
