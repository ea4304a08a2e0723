package clienttest

import (
	"sort"

	"github.com/corestream/corestream/netio/wire"
)

// notMetadataPrimary answers a metadata-changing request received by a node
// that is not the metadata primary, or nil. REQUIRES: c.mu held.
func (c *Cluster) notMetadataPrimary(node int32, e *wire.Error) error {
	if node == c.metadataPrimary {
		return nil
	}
	return &wire.ErrorResponse{Err: e, Message: "node " + itoa(node) + " is not the metadata primary",
		Hint: &wire.Hint{NodeID: c.metadataPrimary, Address: c.node(c.metadataPrimary).addr, Generation: c.metadataGen}}
}

// metadata lists nodes and routes. REQUIRES: c.mu held.
func (c *Cluster) metadata(r *wire.MetadataRequest) *wire.MetadataResponse {
	resp := &wire.MetadataResponse{MetadataPrimaryID: c.metadataPrimary, MetadataGeneration: c.metadataGen}
	for _, n := range c.nodes {
		resp.Nodes = append(resp.Nodes, wire.Node{ID: n.id, ClientAddr: n.addr, Alive: n.up()})
	}
	names := r.Topics
	if len(names) == 0 {
		names = c.topicNames()
	}
	for _, name := range names {
		t := c.topics[name]
		if t == nil {
			resp.Topics = append(resp.Topics, wire.TopicMetadata{ErrorCode: wire.ErrUnknownTopicOrPartition.Code, Name: name})
			continue
		}
		resp.Topics = append(resp.Topics, c.topicMetadata(t))
	}
	return resp
}

// topicNames returns the topic names, sorted. REQUIRES: c.mu held.
func (c *Cluster) topicNames() []string {
	names := make([]string, 0, len(c.topics))
	for name := range c.topics {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// topicMetadata renders t. REQUIRES: c.mu held.
func (c *Cluster) topicMetadata(t *topic) wire.TopicMetadata {
	tm := wire.TopicMetadata{Name: t.name, ID: t.id, ReplicationFactor: t.rf}
	for _, p := range t.parts {
		tm.Partitions = append(tm.Partitions, c.routeOf(p))
	}
	return tm
}

// createTopic serves CreateTopic. REQUIRES: c.mu held.
func (c *Cluster) createTopic(node int32, r *wire.CreateTopicRequest) (wire.Response, error) {
	if err := c.notMetadataPrimary(node, wire.ErrNotMetadataPrimary); err != nil {
		return nil, err
	}
	t, err := c.createTopicLocked(r)
	if err != nil {
		return nil, err
	}
	resp := &wire.CreateTopicResponse{Partitions: int32(len(t.parts)), ReplicationFactor: t.rf}
	if !r.ValidateOnly {
		resp.TopicID = t.id
	}
	return resp, nil
}

// deleteTopic serves DeleteTopic. REQUIRES: c.mu held.
func (c *Cluster) deleteTopic(node int32, r *wire.DeleteTopicRequest) (wire.Response, error) {
	if err := c.notMetadataPrimary(node, wire.ErrNotMetadataPrimary); err != nil {
		return nil, err
	}
	t := c.topics[r.Name]
	if t == nil || (!r.TopicID.IsZero() && r.TopicID != t.id) {
		return nil, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q does not exist", r.Name)
	}
	c.deleteTopicLocked(r.Name)
	return &wire.DeleteTopicResponse{TopicID: t.id}, nil
}

// listTopics serves ListTopics. REQUIRES: c.mu held.
func (c *Cluster) listTopics() wire.Response {
	resp := &wire.ListTopicsResponse{}
	for _, name := range c.topicNames() {
		t := c.topics[name]
		resp.Topics = append(resp.Topics, wire.TopicSummary{Name: t.name, ID: t.id, Partitions: int32(len(t.parts)), ReplicationFactor: t.rf})
	}
	return resp
}

// describeTopic serves DescribeTopic. REQUIRES: c.mu held.
func (c *Cluster) describeTopic(r *wire.DescribeTopicRequest) (wire.Response, error) {
	t := c.topics[r.Name]
	if t == nil {
		return nil, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q does not exist", r.Name)
	}
	resp := &wire.DescribeTopicResponse{Topic: c.topicMetadata(t)}
	for _, cfg := range t.configs {
		resp.Configs = append(resp.Configs, wire.ConfigEntry{Key: cfg.Key, Value: cfg.Value})
	}
	return resp, nil
}

// addPartitions serves AddPartitions. REQUIRES: c.mu held.
func (c *Cluster) addPartitions(node int32, r *wire.AddPartitionsRequest) (wire.Response, error) {
	if err := c.notMetadataPrimary(node, wire.ErrNotMetadataPrimary); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	t := c.topics[r.Name]
	if t == nil || (!r.TopicID.IsZero() && r.TopicID != t.id) {
		return nil, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q does not exist", r.Name)
	}
	if int(r.Partitions) <= len(t.parts) {
		return nil, wire.Errorf(wire.ErrInvalidPartitions, "topic %q has %d partitions; the new total %d must be larger", r.Name, len(t.parts), r.Partitions)
	}
	if !r.ValidateOnly {
		c.addPartitionsLocked(t, r.Partitions)
	}
	return &wire.AddPartitionsResponse{Partitions: r.Partitions}, nil
}

// commitOffsets serves CommitOffsets. REQUIRES: c.mu held.
func (c *Cluster) commitOffsets(node int32, r *wire.CommitOffsetsRequest) (wire.Response, error) {
	if err := c.notMetadataPrimary(node, wire.ErrNotCoordinator); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	m := c.offsets[r.Consumer]
	if m == nil {
		m = map[partKey]wire.CommittedOffset{}
		c.offsets[r.Consumer] = m
	}
	resp := &wire.CommitOffsetsResponse{}
	for _, o := range r.Offsets {
		res := wire.PartitionResult{Topic: o.Topic, Partition: o.Partition}
		t := c.topics[o.Topic]
		switch {
		case t == nil || o.Partition < 0 || int(o.Partition) >= len(t.parts) || (!o.TopicID.IsZero() && o.TopicID != t.id):
			res.ErrorCode = wire.ErrUnknownTopicOrPartition.Code
		case o.Offset < 0:
			res.ErrorCode = wire.ErrInvalidOffset.Code
		default:
			m[partKey{o.Topic, o.Partition}] = wire.CommittedOffset{Topic: o.Topic, TopicID: t.id, Partition: o.Partition,
				Offset: o.Offset, Metadata: o.Metadata}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// fetchOffsets serves FetchOffsets. REQUIRES: c.mu held.
func (c *Cluster) fetchOffsets(node int32, r *wire.FetchOffsetsRequest) (wire.Response, error) {
	if err := c.notMetadataPrimary(node, wire.ErrNotCoordinator); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	m := c.offsets[r.Consumer]
	resp := &wire.FetchOffsetsResponse{}
	if len(r.Partitions) == 0 {
		keys := make([]partKey, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].topic != keys[j].topic {
				return keys[i].topic < keys[j].topic
			}
			return keys[i].partition < keys[j].partition
		})
		for _, k := range keys {
			resp.Offsets = append(resp.Offsets, m[k])
		}
		return resp, nil
	}
	for _, tp := range r.Partitions {
		o, ok := m[partKey{tp.Topic, tp.Partition}]
		if !ok {
			o = wire.CommittedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: wire.OffsetNone}
		}
		resp.Offsets = append(resp.Offsets, o)
	}
	return resp, nil
}

// initProducer serves InitProducer. REQUIRES: c.mu held.
func (c *Cluster) initProducer(r *wire.InitProducerRequest) (wire.Response, error) {
	if r.ProducerID == wire.ProducerIDNone {
		c.nextPID++
		return &wire.InitProducerResponse{ProducerID: c.nextPID, ProducerEpoch: 0}, nil
	}
	// As the broker: the epoch asked about plus one, with no record of
	// which epoch is current (fencing happens at the partitions), so a
	// bump retried after its answer was lost gets the same epoch again.
	if r.ProducerEpoch >= 32767 {
		c.nextPID++
		return &wire.InitProducerResponse{ProducerID: c.nextPID, ProducerEpoch: 0}, nil
	}
	return &wire.InitProducerResponse{ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch + 1}, nil
}

// clusterStatus serves ClusterStatus. REQUIRES: c.mu held.
func (c *Cluster) clusterStatus() wire.Response {
	resp := &wire.ClusterStatusResponse{MetadataPrimaryID: c.metadataPrimary, MetadataGeneration: c.metadataGen}
	counts := map[int32]*wire.NodeStatus{}
	for _, n := range c.nodes {
		ns := wire.NodeStatus{ID: n.id, ClientAddr: n.addr, Alive: n.up()}
		resp.Nodes = append(resp.Nodes, ns)
	}
	for i := range resp.Nodes {
		counts[resp.Nodes[i].ID] = &resp.Nodes[i]
	}
	for _, t := range c.topics {
		for _, p := range t.parts {
			resp.Partitions++
			counts[p.primary].Primaries++
			counts[p.replicas[0]].PreferredPrimaries++
			alive := 0
			for _, id := range p.replicas {
				counts[id].Replicas++
				if c.node(id).alive {
					alive++
				}
			}
			if alive < len(p.replicas) {
				resp.UnderReplicated++
			}
			if !c.node(p.primary).alive {
				resp.Offline++
			}
		}
	}
	return resp
}

// movePrimary serves MovePrimary. REQUIRES: c.mu held.
func (c *Cluster) movePrimary(node int32, r *wire.MovePrimaryRequest) (wire.Response, error) {
	if err := c.notMetadataPrimary(node, wire.ErrNotMetadataPrimary); err != nil {
		return nil, err
	}
	t := c.topics[r.Topic]
	if t == nil || (!r.TopicID.IsZero() && r.TopicID != t.id) || r.Partition < 0 || int(r.Partition) >= len(t.parts) {
		return nil, wire.Errorf(wire.ErrUnknownTopicOrPartition, "no partition %s/%d", r.Topic, r.Partition)
	}
	p := t.parts[r.Partition]
	found := false
	for _, id := range p.replicas {
		found = found || id == r.TargetNodeID
	}
	if !found {
		return nil, wire.Errorf(wire.ErrNotReplica, "node %d is not a replica of %s/%d (replicas %v)", r.TargetNodeID, r.Topic, r.Partition, p.replicas)
	}
	if !c.node(r.TargetNodeID).alive {
		return nil, wire.Errorf(wire.ErrNodeNotAvailable, "node %d is not alive", r.TargetNodeID)
	}
	if p.primary != r.TargetNodeID {
		p.primary = r.TargetNodeID
		p.gen++
		c.newGenerationLocked(p)
	}
	return &wire.MovePrimaryResponse{PrimaryID: p.primary, Generation: p.gen}, nil
}

// rebalance plans moving every primary back to its preferred (first)
// replica when that node is alive, and unless DryRun applies the plan at
// once. REQUIRES: c.mu held.
func (c *Cluster) rebalance(node int32, r *wire.RebalanceRequest) (wire.Response, error) {
	if err := c.notMetadataPrimary(node, wire.ErrNotMetadataPrimary); err != nil {
		return nil, err
	}
	resp := &wire.RebalanceResponse{}
	for _, name := range c.topicNames() {
		t := c.topics[name]
		for _, p := range t.parts {
			want := p.replicas[0]
			if p.primary == want || !c.node(want).alive {
				continue
			}
			if r.MovesMax > 0 && len(resp.Moves) >= int(r.MovesMax) {
				break
			}
			resp.Moves = append(resp.Moves, wire.PrimaryMove{Topic: t.name, TopicID: t.id, Partition: p.index, FromNode: p.primary, ToNode: want})
		}
	}
	if !r.DryRun && len(resp.Moves) > 0 {
		for _, m := range resp.Moves {
			p := c.topics[m.Topic].parts[m.Partition]
			p.primary = m.ToNode
			p.gen++
			c.newGenerationLocked(p)
		}
		resp.Started = true
		c.rebalances++
	}
	return resp, nil
}

func itoa(v int32) string {
	return itoa64(int64(v))
}
