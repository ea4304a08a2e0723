package node

import (
	"sort"
	"strconv"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// Read-only requests are answered by any node from its View and route
// table, on the connection's own shard.

func (h *handler) metadata(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.MetadataRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	n := h.n
	if err := n.metadataReady(); err != nil {
		replyErr(c, hdr, err)
		return
	}
	v := n.view.Load()
	resp := &wire.MetadataResponse{Nodes: n.nodes()}
	resp.MetadataPrimaryID, resp.MetadataGeneration = n.metaRoute()
	if len(req.Topics) == 0 {
		for _, t := range v.Sorted {
			resp.Topics = append(resp.Topics, n.topicMetadata(t))
		}
	} else {
		for _, name := range req.Topics {
			t := v.Topics[name]
			if t == nil {
				resp.Topics = append(resp.Topics, wire.TopicMetadata{Name: name, ErrorCode: wire.ErrUnknownTopicOrPartition.Code})
				continue
			}
			resp.Topics = append(resp.Topics, n.topicMetadata(t))
		}
	}
	reply(c, hdr, resp)
}

// nodes lists the roster as clients see it.
func (n *Node) nodes() []wire.Node {
	out := make([]wire.Node, 0, len(n.roster))
	for _, m := range n.roster {
		out = append(out, wire.Node{ID: int32(m.ID), ClientAddr: n.advertised(m), HTTPAddr: m.HTTPAddr, Alive: n.alive(int32(m.ID))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// alive reports whether node id is believed up.
func (n *Node) alive(id int32) bool { return id == int32(n.self) || n.peerAlive(id) }

// peerAlive reports whether peer id was heard from recently.
func (n *Node) peerAlive(id int32) bool { return n.peers != nil && n.peers.alive(id) }

func (n *Node) topicMetadata(t *metadata.Topic) wire.TopicMetadata {
	tm := wire.TopicMetadata{Name: t.Name, ID: wire.TopicID(t.ID), ReplicationFactor: int16(t.ReplicationFactor),
		Partitions: make([]wire.PartitionRoute, t.Partitions())}
	for p := range t.Replicas {
		tm.Partitions[p] = n.partitionRoute(t, int32(p))
	}
	return tm
}

func (n *Node) partitionRoute(t *metadata.Topic, p int32) wire.PartitionRoute {
	reps := t.Replicas[p]
	pr := wire.PartitionRoute{Partition: p, PrimaryID: -1, Generation: -1, PreferredPrimaryID: int32(reps[0]),
		Replicas: make([]int32, len(reps))}
	for i, r := range reps {
		pr.Replicas[i] = int32(r)
	}
	rt, ok := n.routes.get(shardKey(t.ID, p))
	if ok && rt.leader > 0 && n.alive(rt.leader) {
		pr.PrimaryID, pr.Generation = rt.leader, rt.term
	} else {
		// No primary, or its node is down (a factor-1 partition there is
		// unavailable until it returns; others elect a new one).
		pr.ErrorCode = wire.ErrPrimaryNotAvailable.Code
		live := 0
		for _, r := range pr.Replicas {
			if n.alive(r) {
				live++
			}
		}
		if len(reps) > 1 && live < len(reps)/2+1 {
			// Too few replicas reachable to elect one: nothing is
			// under way, writes wait until a replica returns. Say so, as
			// the primary itself would (partition.Replica.quorumErr).
			pr.ErrorCode = wire.ErrNotEnoughReplicas.Code
		}
		if _, failed := n.openErrs.get(shardKey(t.ID, p)); failed {
			// This node's replica could not be opened (openfail.go):
			// the cause is on its disk, not in an election.
			pr.ErrorCode = wire.ErrStorageError.Code
		}
	}
	for _, r := range pr.Replicas {
		switch {
		case !n.alive(r):
			pr.Offline = append(pr.Offline, r)
		case rt.inSync == nil || containsID(rt.inSync, r):
			if pr.PrimaryID > 0 {
				pr.InSync = append(pr.InSync, r)
			}
		}
	}
	return pr
}

func containsID(s []int32, id int32) bool {
	for _, x := range s {
		if x == id {
			return true
		}
	}
	return false
}

func (h *handler) listTopics(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.ListTopicsRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	if err := h.n.metadataReady(); err != nil {
		replyErr(c, hdr, err)
		return
	}
	resp := &wire.ListTopicsResponse{}
	for _, t := range h.n.view.Load().Sorted {
		resp.Topics = append(resp.Topics, wire.TopicSummary{Name: t.Name, ID: wire.TopicID(t.ID),
			Partitions: int32(t.Partitions()), ReplicationFactor: int16(t.ReplicationFactor)})
	}
	reply(c, hdr, resp)
}

func (h *handler) describeTopic(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.DescribeTopicRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	if err := h.n.metadataReady(); err != nil {
		replyErr(c, hdr, err)
		return
	}
	t := h.n.view.Load().Topics[req.Name]
	if t == nil {
		replyErr(c, hdr, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q does not exist", req.Name))
		return
	}
	resp := &wire.DescribeTopicResponse{Topic: h.n.topicMetadata(t), Configs: h.n.topicConfigs(t)}
	reply(c, hdr, resp)
}

// topicConfigs lists a topic's effective configuration, sorted by key.
func (n *Node) topicConfigs(t *metadata.Topic) []wire.ConfigEntry {
	s := n.cfg.Storage
	entry := func(key string, override, def int64) wire.ConfigEntry {
		if override != 0 {
			return wire.ConfigEntry{Key: key, Value: strconv.FormatInt(override, 10)}
		}
		return wire.ConfigEntry{Key: key, Value: strconv.FormatInt(def, 10), IsDefault: true}
	}
	return []wire.ConfigEntry{
		{Key: "fsync", Value: s.Fsync, IsDefault: true},
		entry("retention_bytes", t.Config.RetentionBytes, s.RetentionBytes),
		entry("retention_ms", t.Config.RetentionMs, s.RetentionMs),
		{Key: "segment_bytes", Value: strconv.FormatInt(s.SegmentBytes, 10), IsDefault: true},
	}
}

func (h *handler) clusterStatus(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.ClusterStatusRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	// The counts come from the View: before it is loaded they would
	// say the cluster holds nothing.
	if err := h.n.metadataReady(); err != nil {
		replyErr(c, hdr, err)
		return
	}
	reply(c, hdr, h.n.clusterStatus())
}

func (n *Node) clusterStatus() *wire.ClusterStatusResponse {
	resp := &wire.ClusterStatusResponse{}
	resp.MetadataPrimaryID, resp.MetadataGeneration = n.metaRoute()
	resp.RebalanceInProgress = n.rebalancing.Load()
	stats := map[int32]*wire.NodeStatus{}
	for _, m := range n.nodes() {
		m := m
		stats[m.ID] = &wire.NodeStatus{ID: m.ID, ClientAddr: m.ClientAddr, HTTPAddr: m.HTTPAddr, Alive: m.Alive}
	}
	for _, t := range n.view.Load().Sorted {
		for p := range t.Replicas {
			pr := n.partitionRoute(t, int32(p))
			resp.Partitions++
			if pr.PrimaryID < 0 {
				resp.Offline++
			} else if st := stats[pr.PrimaryID]; st != nil {
				st.Primaries++
			}
			if len(pr.InSync) < len(pr.Replicas) {
				resp.UnderReplicated++
			}
			for i, r := range pr.Replicas {
				if st := stats[r]; st != nil {
					st.Replicas++
					if i == 0 {
						st.PreferredPrimaries++
					}
				}
			}
		}
	}
	for _, m := range n.nodes() {
		resp.Nodes = append(resp.Nodes, *stats[m.ID])
	}
	return resp
}

// describePartition is answered by the partition's primary, on its shard.
func (h *handler) describePartition(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.DescribePartitionRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	n := h.n
	t := n.view.Load().Topics[req.Topic]
	if t == nil || req.Partition < 0 || int(req.Partition) >= t.Partitions() {
		replyErr(c, hdr, n.missingPartition(req.Topic, req.Partition, t))
		return
	}
	if err := checkTopicID(&req.PartitionRef, t); err != nil {
		replyErr(c, hdr, err)
		return
	}
	ref := req.PartitionRef
	err := shard.Call(c.Shard(), n.group.Shard(n.shardOf(t.ID, ref.Partition)), func(sh *shard.Shard) any {
		r, err := n.replicaFor(sh, t, ref.Partition)
		if err == nil {
			err = r.CheckRoute(ref.Generation)
		}
		if err != nil {
			return n.withAddress(err)
		}
		return n.describeReplica(t, r)
	}, func(v any) {
		if err, ok := v.(error); ok {
			replyErr(c, hdr, err)
			return
		}
		reply(c, hdr, v.(*wire.DescribePartitionResponse))
	})
	if err != nil {
		replyErr(c, hdr, busy(err))
	}
}

func (n *Node) describeReplica(t *metadata.Topic, r *partition.Replica) *wire.DescribePartitionResponse {
	l := r.Log()
	resp := &wire.DescribePartitionResponse{Route: n.partitionRoute(t, r.Config().Partition),
		LogStartOffset: l.LogStartOffset(), HighWatermark: r.HighWatermark(), LogEndOffset: l.LogEndOffset(),
		SizeBytes: l.Size(), Segments: int32(l.SegmentCount())}
	// In sync is the route's answer (partitionRoute), the one every other
	// answer gives; when each follower last caught up is the primary's
	// sample behind it (insync.go).
	st := r.Raft().Status()
	now := n.now().UnixMilli()
	for _, pg := range st.Progress {
		rp := wire.ReplicaProgress{NodeID: int32(pg.ID), LogEndOffset: pg.Match + 1,
			InSync: containsID(resp.Route.InSync, int32(pg.ID)), LastCaughtUpMs: n.lags.caughtUp(r.Key(), pg.ID)}
		if pg.ID == n.self {
			rp.LastCaughtUpMs = now
		}
		resp.Replicas = append(resp.Replicas, rp)
	}
	return resp
}

func (h *handler) initProducer(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.InitProducerRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	resp := &wire.InitProducerResponse{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch + 1}
	if req.ProducerID < 0 || req.ProducerEpoch >= 32767 {
		id, err := h.n.pids.allocate()
		if err != nil {
			replyErr(c, hdr, wire.Errorf(wire.ErrUnknownServerError, "%v", err))
			return
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	}
	reply(c, hdr, resp)
}
