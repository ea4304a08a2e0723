package native

import (
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
)

// admin decodes a native admin request and calls the service, which
// runs it on the controller's shard; the answer comes back to the
// connection's shard.
func (h *Handler) admin(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	req := wire.NewRequest(hdr.APIKey)
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	from := c.Shard()
	answer := func(resp wire.Response, err error) {
		if err != nil {
			replyErr(c, hdr, err)
			return
		}
		reply(c, hdr, resp)
	}
	switch req := req.(type) {
	case *wire.CreateTopicRequest:
		sreq := &service.CreateTopicRequest{Name: req.Name, Partitions: req.Partitions, ReplicationFactor: req.ReplicationFactor,
			ValidateOnly: req.ValidateOnly, Timeout: msDuration(req.TimeoutMs)}
		for _, e := range req.Configs {
			sreq.Configs = append(sreq.Configs, service.Config{Key: e.Key, Value: e.Value})
		}
		h.svcOf(c).CreateTopic(from, sreq, func(res service.CreateTopicResult, err error) {
			answer(&wire.CreateTopicResponse{TopicID: wire.TopicID(res.ID), Partitions: res.Partitions, ReplicationFactor: res.ReplicationFactor}, err)
		})
	case *wire.DeleteTopicRequest:
		sreq := &service.DeleteTopicRequest{Name: req.Name, ID: metadata.TopicID(req.TopicID), Timeout: msDuration(req.TimeoutMs)}
		h.svcOf(c).DeleteTopic(from, sreq, func(id metadata.TopicID, err error) {
			answer(&wire.DeleteTopicResponse{TopicID: wire.TopicID(id)}, err)
		})
	case *wire.AddPartitionsRequest:
		sreq := &service.AddPartitionsRequest{Name: req.Name, ID: metadata.TopicID(req.TopicID), Partitions: req.Partitions,
			ValidateOnly: req.ValidateOnly, Timeout: msDuration(req.TimeoutMs)}
		h.svcOf(c).AddPartitions(from, sreq, func(total int32, err error) {
			answer(&wire.AddPartitionsResponse{Partitions: total}, err)
		})
	case *wire.CommitOffsetsRequest:
		sreq := &service.CommitOffsetsRequest{Consumer: req.Consumer}
		for _, o := range req.Offsets {
			sreq.Offsets = append(sreq.Offsets, service.OffsetCommit{Topic: o.Topic, TopicID: metadata.TopicID(o.TopicID),
				Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata})
		}
		h.svcOf(c).CommitOffsets(from, sreq, func(entries []error, err error) {
			resp := &wire.CommitOffsetsResponse{Results: make([]wire.PartitionResult, len(req.Offsets))}
			for i, o := range req.Offsets {
				resp.Results[i] = wire.PartitionResult{Topic: o.Topic, Partition: o.Partition}
				if i < len(entries) {
					resp.Results[i].ErrorCode = wirecode.RouteCode(entries[i])
				}
			}
			answer(resp, err)
		})
	case *wire.FetchOffsetsRequest:
		sreq := &service.FetchOffsetsRequest{Consumer: req.Consumer}
		for _, tp := range req.Partitions {
			sreq.Partitions = append(sreq.Partitions, service.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		h.svcOf(c).FetchOffsets(from, sreq, func(offs []service.CommittedOffset, err error) {
			resp := &wire.FetchOffsetsResponse{}
			for _, o := range offs {
				resp.Offsets = append(resp.Offsets, wire.CommittedOffset{Topic: o.Topic, TopicID: wire.TopicID(o.TopicID),
					Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata})
			}
			answer(resp, err)
		})
	case *wire.MovePrimaryRequest:
		sreq := &service.MovePrimaryRequest{Topic: req.Topic, TopicID: metadata.TopicID(req.TopicID), Partition: req.Partition,
			TargetNodeID: req.TargetNodeID, Timeout: msDuration(req.TimeoutMs)}
		h.svcOf(c).MovePrimary(from, sreq, func(res service.MovePrimaryResult, err error) {
			answer(&wire.MovePrimaryResponse{PrimaryID: res.PrimaryID, Generation: res.Generation}, err)
		})
	case *wire.RebalanceRequest:
		h.svcOf(c).Rebalance(from, &service.RebalanceRequest{DryRun: req.DryRun, MovesMax: req.MovesMax, Preferred: req.Preferred}, func(res service.RebalanceResult, err error) {
			resp := &wire.RebalanceResponse{Started: res.Started}
			for _, m := range res.Moves {
				resp.Moves = append(resp.Moves, wire.PrimaryMove{Topic: m.Topic, TopicID: wire.TopicID(m.TopicID),
					Partition: m.Partition, FromNode: m.FromNode, ToNode: m.ToNode})
			}
			answer(resp, err)
		})
	case *wire.ReassignRequest:
		sreq := &service.ReassignRequest{Action: int(req.Action), DryRun: req.DryRun, Node: req.Node, Replacement: req.Replacement,
			ThrottleBytesPerSecond: req.ThrottleBytesPerSecond}
		for _, m := range req.Moves {
			sreq.Moves = append(sreq.Moves, service.ReassignMove{Topic: m.Topic, Partition: m.Partition, Replicas: m.Replicas})
		}
		h.svcOf(c).Reassign(from, sreq, func(res service.ReassignResult, err error) {
			resp := &wire.ReassignResponse{}
			for _, m := range res.Moves {
				resp.Moves = append(resp.Moves, wire.ReassignStatus{Topic: m.Topic, Partition: m.Partition, From: m.From, Target: m.Target,
					Cancelled: m.Cancelled, Driven: m.Driven, EntriesBehind: m.EntriesBehind, BytesBehind: m.BytesBehind, Steps: m.Steps,
					BytesMoved: m.BytesMoved, EtaMs: m.EtaMs})
			}
			for _, d := range res.Drains {
				resp.Drains = append(resp.Drains, wire.DrainStatus{Node: d.Node, Replacement: d.Replacement, Replicas: d.Replicas,
					Primaries: d.Primaries, Moving: d.Moving, Done: d.Done})
			}
			answer(resp, err)
		})
	case *wire.ChangeRosterRequest:
		m := req.Member
		sreq := &service.RosterRequest{Action: int(req.Action), Member: service.RosterMember{ID: m.ID, ClientAddr: m.ClientAddr,
			ReplicationAddr: m.ReplicationAddr, HTTPAddr: m.HTTPAddr, KafkaAddr: m.KafkaAddr, Rack: m.Rack}}
		h.svcOf(c).ChangeRoster(from, sreq, func(res service.RosterResult, err error) {
			resp := &wire.ChangeRosterResponse{}
			for _, m := range res.Members {
				resp.Members = append(resp.Members, wire.RosterMember{ID: m.ID, ClientAddr: m.ClientAddr, ReplicationAddr: m.ReplicationAddr,
					HTTPAddr: m.HTTPAddr, KafkaAddr: m.KafkaAddr, Rack: m.Rack, State: m.State})
			}
			answer(resp, err)
		})
	default:
		replyErr(c, hdr, wire.Errorf(wire.ErrInvalidRequest, "%s is not an admin request", req.APIKey()))
	}
}
