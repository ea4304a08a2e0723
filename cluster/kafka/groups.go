package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
)

// Consumer groups (docs/design/groups.md). The coordinator of every
// group is the metadata primary: it holds membership in the node's
// groups.Coordinator, and stores committed offsets as the named-consumer
// offsets of the service (the group's name is the consumer's name), so a
// Kafka group and a native named consumer of one name share offsets.

// groupCodes maps the coordinator's errors onto Kafka's codes.
var groupCodes = []struct {
	err   error
	kafka *kerr.Error
}{
	{groups.ErrUnknownMember, kerr.UnknownMemberID},
	{groups.ErrIllegalGeneration, kerr.IllegalGeneration},
	{groups.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{groups.ErrMemberIDRequired, kerr.MemberIDRequired},
	{groups.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
	{groups.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{groups.ErrUnknownGroup, kerr.GroupIDNotFound},
	{groups.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{groups.ErrGroupFull, kerr.GroupMaxSizeReached},
	{groups.ErrFencedInstance, kerr.FencedInstanceID},
	// Kafka has no bound on a coordinator's groups; the retriable
	// COORDINATOR_NOT_AVAILABLE makes a client try again later.
	{groups.ErrTooManyGroups, kerr.CoordinatorNotAvailable},
}

// groupCode is err's Kafka code: the coordinator's errors by groupCodes,
// anything else as errorCode maps the service's.
func groupCode(err error) int16 {
	if err == nil {
		return 0
	}
	for _, c := range groupCodes {
		if errors.Is(err, c.err) {
			return c.kafka.Code
		}
	}
	return errorCode(err)
}

// coordinator is the node's coordinator when this node coordinates
// groups (it is the metadata primary), else the code to answer with:
// NOT_COORDINATOR, or COORDINATOR_NOT_AVAILABLE while no primary is
// known. A node that becomes primary again in a later term starts from
// empty groups: members it had may have moved to another coordinator
// meanwhile, and rejoin.
func (l *Listener) coordinator(group string) (*groups.Coordinator, int16) {
	if wire.ValidateConsumerName(group) != nil {
		return nil, kerr.InvalidGroupID.Code
	}
	id, gen := l.svc.MetadataRoute()
	switch {
	case id <= 0:
		return nil, kerr.CoordinatorNotAvailable.Code
	case id != l.svc.Identity().NodeID:
		return nil, kerr.NotCoordinator.Code
	}
	if prev := l.coordTerm.Swap(gen); prev != gen {
		l.groups.Reset()
	}
	return l.groups, 0
}

// onConnShard runs fn on c's shard: the coordinator answers a parked
// call on the goroutine that completed it (another connection's shard,
// or the node's ticker).
func onConnShard(c *netio.Conn, fn func()) {
	s := c.Shard()
	if s.OnThread() {
		fn()
		return
	}
	// A refused post (the shard is stopping, or its inbox is full) loses
	// the answer; the client times the request out and retries.
	_ = s.Post(fn)
}

// findCoordinator answers the metadata primary for consumer groups, one
// key (v0-v3) or many (v4+). Transaction coordinators are refused:
// there are no transactions.
func (l *Listener) findCoordinator(req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(key string) (id int32, host string, port int32, code int16) {
		if req.CoordinatorType != 0 {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code
		}
		if wire.ValidateConsumerName(key) != nil {
			return -1, "", -1, kerr.InvalidGroupID.Code
		}
		primary := l.controllerID()
		for _, b := range l.brokers() {
			if b.id == primary {
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
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	empty := ""
	resp.Generation, resp.MemberID, resp.Protocol = -1, req.MemberID, &empty
	g, code := l.coordinator(req.Group)
	if g == nil {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	jr := groups.JoinRequest{Group: req.Group, MemberID: req.MemberID, ClientID: clientID, Host: c.RemoteAddr().String(),
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
		jr.Protocols = append(jr.Protocols, groups.Protocol{Name: p.Name, Metadata: append([]byte{}, p.Metadata...)})
	}
	g.Join(time.Now(), jr, func(res groups.JoinResult, err error) {
		onConnShard(c, func() {
			resp.ErrorCode = groupCode(err)
			resp.Generation, resp.MemberID = res.Generation, res.MemberID
			if err == nil {
				proto, ptype := res.Protocol, req.ProtocolType
				resp.Protocol, resp.ProtocolType, resp.LeaderID = &proto, &ptype, res.LeaderID
				for _, m := range res.Members {
					rm := kmsg.NewJoinGroupResponseMember()
					rm.MemberID, rm.ProtocolMetadata = m.ID, m.Metadata
					resp.Members = append(resp.Members, rm)
				}
			}
			reply(resp)
		})
	})
}

// syncGroup parks a follower until the leader's assignment arrives.
func (l *Listener) syncGroup(c *netio.Conn, req *kmsg.SyncGroupRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	g, code := l.coordinator(req.Group)
	if g == nil {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	sr := groups.SyncRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = append([]byte{}, a.MemberAssignment...) // aliases the read buffer
		}
	}
	g.Sync(time.Now(), sr, func(assignment []byte, err error) {
		onConnShard(c, func() {
			resp.ErrorCode = groupCode(err)
			if err == nil {
				resp.MemberAssignment = assignment
				if d, derr := g.Describe(req.Group); derr == nil {
					resp.ProtocolType, resp.Protocol = &d.ProtocolType, &d.Protocol
				}
			}
			reply(resp)
		})
	})
}

func (l *Listener) heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g, code := l.coordinator(req.Group)
	if g == nil {
		resp.ErrorCode = code
		return resp
	}
	resp.ErrorCode = groupCode(g.Heartbeat(time.Now(), req.Group, req.MemberID, req.Generation))
	return resp
}

func (l *Listener) leaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	g, code := l.coordinator(req.Group)
	if g == nil {
		resp.ErrorCode = code
		return resp
	}
	if req.Version < 3 {
		resp.ErrorCode = groupCode(g.Leave(time.Now(), req.Group, []string{req.MemberID})[0])
		return resp
	}
	ids := make([]string, len(req.Members))
	for i, m := range req.Members {
		ids[i] = m.MemberID
		if m.MemberID == "" && m.InstanceID != nil {
			ids[i] = g.MemberOfInstance(req.Group, *m.InstanceID)
		}
	}
	for i, err := range g.Leave(time.Now(), req.Group, ids) {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = ids[i], req.Members[i].InstanceID, groupCode(err)
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// offsetCommit checks the member and generation with the coordinator,
// then stores the offsets through the service (the metadata group).
func (l *Listener) offsetCommit(c *netio.Conn, req *kmsg.OffsetCommitRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	all := func(code int16) {
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				resp.Topics[ti].Partitions[pi].ErrorCode = code
			}
		}
		reply(resp)
	}
	g, code := l.coordinator(req.Group)
	if g == nil {
		all(code)
		return
	}
	if err := g.CheckCommit(time.Now(), req.Group, req.MemberID, req.Generation); err != nil {
		all(groupCode(err))
		return
	}
	cr := &service.CommitOffsetsRequest{Consumer: req.Group}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			oc := service.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset}
			if p.Metadata != nil {
				oc.Metadata = *p.Metadata
			}
			cr.Offsets = append(cr.Offsets, oc)
		}
	}
	if len(cr.Offsets) == 0 {
		reply(resp)
		return
	}
	l.svc.CommitOffsets(c.Shard(), cr, func(entries []error, err error) {
		if err != nil {
			all(errorCode(err))
			return
		}
		i := 0
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				resp.Topics[ti].Partitions[pi].ErrorCode = errorCode(entries[i])
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
	if _, code := l.coordinator(req.Group); code != 0 {
		resp.ErrorCode = code
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
		return
	}
	fr := &service.FetchOffsetsRequest{Consumer: req.Group}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			fr.Partitions = append(fr.Partitions, service.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	if req.Topics != nil && len(fr.Partitions) == 0 {
		reply(resp)
		return
	}
	l.svc.FetchOffsets(c.Shard(), fr, func(offs []service.CommittedOffset, err error) {
		if err != nil {
			resp.ErrorCode = errorCode(err)
			reply(resp)
			return
		}
		byTopic := map[string]int{}
		for _, o := range offs {
			ti, ok := byTopic[o.Topic]
			if !ok {
				ti = len(resp.Topics)
				byTopic[o.Topic] = ti
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = o.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = o.Partition, o.Offset, -1
			md := o.Metadata
			rp.Metadata = &md
			resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
		}
		reply(resp)
	})
}

// listGroups lists the groups this node coordinates (none on a node that
// is not the metadata primary, as a Kafka broker lists its own).
func (l *Listener) listGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if id, _ := l.svc.MetadataRoute(); id != l.svc.Identity().NodeID {
		return resp
	}
	want := map[string]bool{}
	for _, s := range req.StatesFilter {
		want[s] = true
	}
	for _, d := range l.groups.List() {
		if len(want) > 0 && !want[d.State.String()] {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState = d.Name, d.ProtocolType, d.State.String()
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// describeGroups describes each group; one this coordinator does not
// hold is Dead with no error, as Kafka answers.
func (l *Listener) describeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		g, code := l.coordinator(name)
		if g == nil {
			rg.ErrorCode = code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, _ := g.Describe(name)
		rg.State, rg.ProtocolType, rg.Protocol = d.State.String(), d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.ClientID, rm.ClientHost = m.ID, m.ClientID, m.Host
			if m.InstanceID != "" {
				id := m.InstanceID
				rm.InstanceID = &id
			}
			rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// deleteGroups forgets empty groups' membership. Their committed offsets
// stay (the service has no call to drop a named consumer's offsets yet).
func (l *Listener) deleteGroups(req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		g, code := l.coordinator(name)
		if g == nil {
			rg.ErrorCode = code
		} else {
			rg.ErrorCode = groupCode(g.Delete(name))
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
