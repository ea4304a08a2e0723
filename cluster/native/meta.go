package native

import (
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
)

// The native read-only requests: answered by any node, on the
// connection's own shard, from the service's synchronous calls;
// DescribePartition by the partition's primary, on its shard.

func (h *Handler) metadata(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.MetadataRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	res, err := h.svcOf(c).Metadata(service.MetadataRequest{Topics: req.Topics})
	if err != nil {
		replyErr(c, hdr, err)
		return
	}
	resp := &wire.MetadataResponse{MetadataPrimaryID: res.MetadataPrimaryID, MetadataGeneration: res.MetadataGeneration,
		Nodes: make([]wire.Node, 0, len(res.Brokers))}
	for _, b := range res.Brokers {
		resp.Nodes = append(resp.Nodes, wire.Node{ID: b.ID, ClientAddr: b.ClientAddr, HTTPAddr: b.HTTPAddr, Alive: b.Alive, Rack: b.Rack})
	}
	for i := range res.Topics {
		resp.Topics = append(resp.Topics, wireTopic(&res.Topics[i]))
	}
	reply(c, hdr, resp)
}

// wireTopic is a topic's routes in native form.
func wireTopic(t *service.TopicMetadata) wire.TopicMetadata {
	if t.Err != nil {
		return wire.TopicMetadata{Name: t.Name, ErrorCode: wirecode.RouteCode(t.Err)}
	}
	tm := wire.TopicMetadata{Name: t.Name, ID: wire.TopicID(t.ID), ReplicationFactor: t.ReplicationFactor,
		Partitions: make([]wire.PartitionRoute, len(t.Partitions))}
	for i := range t.Partitions {
		tm.Partitions[i] = wireRoute(&t.Partitions[i])
	}
	return tm
}

// wireRoute is a partition's route in native form.
func wireRoute(p *service.PartitionRoute) wire.PartitionRoute {
	return wire.PartitionRoute{Partition: p.Partition, ErrorCode: wirecode.RouteCode(p.Err), PrimaryID: p.PrimaryID, Generation: p.Generation,
		PreferredPrimaryID: p.PreferredPrimaryID, Replicas: p.Replicas, InSync: p.InSync, Offline: p.Offline}
}

func (h *Handler) listTopics(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.ListTopicsRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	topics, err := h.svcOf(c).ListTopics()
	if err != nil {
		replyErr(c, hdr, err)
		return
	}
	resp := &wire.ListTopicsResponse{}
	for _, t := range topics {
		resp.Topics = append(resp.Topics, wire.TopicSummary{Name: t.Name, ID: wire.TopicID(t.ID),
			Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor})
	}
	reply(c, hdr, resp)
}

func (h *Handler) describeTopic(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.DescribeTopicRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	d, err := h.svcOf(c).DescribeTopic(req.Name)
	if err != nil {
		replyErr(c, hdr, err)
		return
	}
	resp := &wire.DescribeTopicResponse{Topic: wireTopic(&d.Topic)}
	for _, e := range d.Configs {
		resp.Configs = append(resp.Configs, wire.ConfigEntry{Key: e.Key, Value: e.Value, IsDefault: e.IsDefault})
	}
	reply(c, hdr, resp)
}

func (h *Handler) clusterStatus(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.ClusterStatusRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	st, err := h.svcOf(c).ClusterStatus()
	if err != nil {
		replyErr(c, hdr, err)
		return
	}
	resp := &wire.ClusterStatusResponse{MetadataPrimaryID: st.MetadataPrimaryID, MetadataGeneration: st.MetadataGeneration,
		RebalanceInProgress: st.RebalanceInProgress, Partitions: st.Partitions, UnderReplicated: st.UnderReplicated, Offline: st.Offline, ClusterID: st.ClusterID}
	for _, m := range st.Nodes {
		resp.Nodes = append(resp.Nodes, wire.NodeStatus{ID: m.ID, ClientAddr: m.ClientAddr, HTTPAddr: m.HTTPAddr, KafkaAddr: m.KafkaAddr, Alive: m.Alive,
			Primaries: m.Primaries, Replicas: m.Replicas, PreferredPrimaries: m.PreferredPrimaries, Draining: m.Draining})
	}
	reply(c, hdr, resp)
}

// describePartition is answered by the partition's primary, on its shard.
func (h *Handler) describePartition(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.DescribePartitionRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	h.svcOf(c).DescribePartition(c.Shard(), serviceRef(&req.PartitionRef), func(d service.PartitionDetail, err error) {
		if err != nil {
			replyErr(c, hdr, err)
			return
		}
		resp := &wire.DescribePartitionResponse{Route: wireRoute(&d.Route), LogStartOffset: d.LogStartOffset,
			HighWatermark: d.HighWatermark, LogEndOffset: d.LogEndOffset, SizeBytes: d.SizeBytes, Segments: d.Segments}
		for _, r := range d.Replicas {
			resp.Replicas = append(resp.Replicas, wire.ReplicaProgress(r))
		}
		reply(c, hdr, resp)
	})
}

func (h *Handler) initProducer(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.InitProducerRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	res, err := h.svcOf(c).InitProducer(service.InitProducerRequest{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch})
	if err != nil {
		replyErr(c, hdr, err)
		return
	}
	reply(c, hdr, &wire.InitProducerResponse{ProducerID: res.ProducerID, ProducerEpoch: res.ProducerEpoch})
}
