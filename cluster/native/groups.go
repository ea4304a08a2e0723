package native

import (
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
)

// groups decodes a consumer group request, calls the service's group
// calls (service.Groups, through the connection's Guard) and encodes the
// answer. Byte fields the service keeps (metadata, assignments) are
// copied: the decoded ones alias the read buffer.
func (h *Handler) groups(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	req := wire.NewRequest(hdr.APIKey)
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	from, svc := c.Shard(), h.svcOf(c)
	answer := func(resp wire.Response, err error) {
		if err != nil {
			replyErr(c, hdr, err)
			return
		}
		reply(c, hdr, resp)
	}
	switch req := req.(type) {
	case *wire.FindCoordinatorRequest:
		co, err := svc.FindCoordinator(req.Group)
		answer(&wire.FindCoordinatorResponse{NodeID: co.NodeID, Address: co.ClientAddr, KafkaAddress: co.KafkaAddr}, err)
	case *wire.JoinGroupRequest:
		jr := &service.JoinGroupRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID,
			ClientID: c.Context().(*connState).clientID, Host: c.RemoteAddr().String(), ProtocolType: req.ProtocolType,
			SessionTimeout: msDuration(req.SessionTimeoutMs), RebalanceTimeout: msDuration(req.RebalanceTimeoutMs)}
		for _, p := range req.Protocols {
			jr.Protocols = append(jr.Protocols, service.GroupProtocol{Name: p.Name, Metadata: clone(p.Metadata)})
		}
		svc.JoinGroup(from, jr, func(res service.JoinGroupResult, err error) {
			resp := &wire.JoinGroupResponse{Generation: res.Generation, ProtocolType: res.ProtocolType, Protocol: res.Protocol,
				LeaderID: res.LeaderID, MemberID: res.MemberID}
			for _, m := range res.Members {
				resp.Members = append(resp.Members, wire.GroupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, Metadata: m.Metadata})
			}
			answer(resp, err)
		})
	case *wire.SyncGroupRequest:
		sr := &service.SyncGroupRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
		if len(req.Assignments) > 0 {
			sr.Assignments = make(map[string][]byte, len(req.Assignments))
			for _, a := range req.Assignments {
				sr.Assignments[a.MemberID] = clone(a.Assignment)
			}
		}
		svc.SyncGroup(from, sr, func(res service.SyncGroupResult, err error) {
			answer(&wire.SyncGroupResponse{ProtocolType: res.ProtocolType, Protocol: res.Protocol, Assignment: res.Assignment}, err)
		})
	case *wire.HeartbeatRequest:
		svc.Heartbeat(from, &service.HeartbeatRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation},
			func(err error) { answer(&wire.HeartbeatResponse{}, err) })
	case *wire.LeaveGroupRequest:
		lr := &service.LeaveGroupRequest{Group: req.Group}
		for _, m := range req.Members {
			lr.Members = append(lr.Members, service.LeavingMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
		}
		svc.LeaveGroup(from, lr, func(entries []error, err error) {
			resp := &wire.LeaveGroupResponse{}
			for i, m := range req.Members {
				r := wire.MemberResult{MemberID: m.MemberID}
				if i < len(entries) {
					r.ErrorCode = wirecode.RouteCode(entries[i])
				}
				resp.Results = append(resp.Results, r)
			}
			answer(resp, err)
		})
	case *wire.CommitGroupOffsetsRequest:
		cr := &service.CommitGroupOffsetsRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
		for _, o := range req.Offsets {
			cr.Offsets = append(cr.Offsets, service.OffsetCommit{Topic: o.Topic, TopicID: metadata.TopicID(o.TopicID),
				Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata})
		}
		svc.CommitGroupOffsets(from, cr, func(entries []error, err error) {
			answer(&wire.CommitGroupOffsetsResponse{Results: offsetResults(req.Offsets, entries)}, err)
		})
	case *wire.FetchGroupOffsetsRequest:
		fr := &service.FetchGroupOffsetsRequest{Group: req.Group}
		for _, tp := range req.Partitions {
			fr.Partitions = append(fr.Partitions, service.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		svc.FetchGroupOffsets(from, fr, func(offs []service.CommittedOffset, err error) {
			resp := &wire.FetchGroupOffsetsResponse{}
			for _, o := range offs {
				resp.Offsets = append(resp.Offsets, wire.CommittedOffset{Topic: o.Topic, TopicID: wire.TopicID(o.TopicID),
					Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata})
			}
			answer(resp, err)
		})
	case *wire.ListGroupsRequest:
		svc.ListGroups(from, &service.ListGroupsRequest{States: req.States}, func(gs []service.GroupSummary, err error) {
			resp := &wire.ListGroupsResponse{}
			for _, g := range gs {
				resp.Groups = append(resp.Groups, wire.GroupSummary{Name: g.Name, ProtocolType: g.ProtocolType, State: g.State})
			}
			answer(resp, err)
		})
	case *wire.DescribeGroupRequest:
		svc.DescribeGroup(from, req.Group, func(d service.GroupDescription, err error) {
			resp := &wire.DescribeGroupResponse{Name: d.Name, State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol,
				Generation: d.Generation}
			for _, m := range d.Members {
				resp.Members = append(resp.Members, wire.GroupMemberDescription{MemberID: m.MemberID, InstanceID: m.InstanceID,
					ClientID: m.ClientID, Host: m.Host, Metadata: m.Metadata, Assignment: m.Assignment})
			}
			answer(resp, err)
		})
	case *wire.DeleteGroupRequest:
		svc.DeleteGroup(from, req.Group, func(err error) { answer(&wire.DeleteGroupResponse{}, err) })
	case *wire.DeleteGroupOffsetsRequest:
		dr := &service.DeleteGroupOffsetsRequest{Group: req.Group}
		for _, tp := range req.Partitions {
			dr.Partitions = append(dr.Partitions, service.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		svc.DeleteGroupOffsets(from, dr, func(entries []error, err error) {
			resp := &wire.DeleteGroupOffsetsResponse{}
			for i, tp := range req.Partitions {
				r := wire.PartitionResult{Topic: tp.Topic, Partition: tp.Partition}
				if i < len(entries) {
					r.ErrorCode = wirecode.RouteCode(entries[i])
				}
				resp.Results = append(resp.Results, r)
			}
			answer(resp, err)
		})
	}
}

// offsetResults is one result per committed entry, in request order.
func offsetResults(offs []wire.OffsetCommit, entries []error) []wire.PartitionResult {
	out := make([]wire.PartitionResult, len(offs))
	for i, o := range offs {
		out[i] = wire.PartitionResult{Topic: o.Topic, Partition: o.Partition}
		if i < len(entries) {
			out[i].ErrorCode = wirecode.RouteCode(entries[i])
		}
	}
	return out
}

// clone copies b (nil stays nil).
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
