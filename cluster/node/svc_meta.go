package node

import (
	"sort"
	"strconv"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard/partition"
)

// The service's read-only calls: answered on the caller's goroutine from
// the published View and the route table.

// Identity implements service.Meta.
func (s *nodeService) Identity() service.Identity {
	return service.Identity{NodeID: int32(s.self), ClusterID: s.clusterID(), Version: Version}
}

// MetadataRoute implements service.Meta.
func (s *nodeService) MetadataRoute() (int32, int32) { return s.metaRoute() }

// Brokers implements service.Meta.
func (s *nodeService) Brokers() []service.Broker {
	roster := s.roster()
	out := make([]service.Broker, 0, len(roster))
	for _, m := range roster {
		id := int32(m.ID)
		out = append(out, service.Broker{ID: id, ClientAddr: s.addrOf(id), HTTPAddr: m.HTTPAddr, KafkaAddr: s.kafkaAddrOf(id),
			Alive: s.alive(id), Rack: m.Rack})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Locate implements service.Meta.
func (s *nodeService) Locate(topic string, p int32) (service.PartitionRef, int32, error) {
	t, err := s.topicFor(topic, p)
	if err != nil {
		return service.PartitionRef{}, -1, err
	}
	lead := int32(-1)
	if rt, ok := s.routes.Get(shardKey(t.ID, p)); ok && rt.Leader > 0 {
		lead = rt.Leader
	}
	return service.PartitionRef{Topic: t.Name, Partition: p, TopicID: t.ID, Generation: service.GenerationUnknown}, lead, nil
}

// Metadata implements service.Meta.
func (s *nodeService) Metadata(req service.MetadataRequest) (res service.MetadataResult, err error) {
	defer func(start time.Time) { s.meter.observe(apiMetadata, start, err) }(s.meter.now())
	if err := s.ready(); err != nil {
		return service.MetadataResult{}, s.svcErr(err)
	}
	v := s.view()
	res = service.MetadataResult{Brokers: s.Brokers()}
	res.MetadataPrimaryID, res.MetadataGeneration = s.metaRoute()
	if len(req.Topics) == 0 {
		for _, t := range v.Sorted {
			if metadata.IsInternalTopic(t.Name) {
				continue // listed only when asked for by name
			}
			res.Topics = append(res.Topics, s.topicMetadata(t))
		}
		return res, nil
	}
	for _, name := range req.Topics {
		t := v.Topics[name]
		if t == nil {
			res.Topics = append(res.Topics, service.TopicMetadata{Name: name,
				Err: service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q does not exist", name)})
			continue
		}
		res.Topics = append(res.Topics, s.topicMetadata(t))
	}
	return res, nil
}

// ListTopics implements service.Meta.
func (s *nodeService) ListTopics() ([]service.TopicSummary, error) {
	if err := s.ready(); err != nil {
		return nil, s.svcErr(err)
	}
	out := []service.TopicSummary{}
	for _, t := range s.view().Sorted {
		if metadata.IsInternalTopic(t.Name) {
			continue // described only when asked for by name
		}
		out = append(out, service.TopicSummary{Name: t.Name, ID: t.ID, Partitions: int32(t.Partitions()),
			ReplicationFactor: int16(t.ReplicationFactor)})
	}
	return out, nil
}

// DescribeTopic implements service.Meta.
func (s *nodeService) DescribeTopic(name string) (service.TopicDescription, error) {
	if err := s.ready(); err != nil {
		return service.TopicDescription{}, s.svcErr(err)
	}
	t := s.view().Topics[name]
	if t == nil {
		return service.TopicDescription{}, unknownPartition(name, 0, nil)
	}
	return service.TopicDescription{Topic: s.topicMetadata(t), Configs: s.topicConfigs(t)}, nil
}

// topicConfigs lists a topic's effective configuration, sorted by key.
func (s *nodeService) topicConfigs(t *metadata.Topic) []service.ConfigEntry {
	st := s.storage
	entry := func(key string, override, def int64) service.ConfigEntry {
		if override != 0 {
			return service.ConfigEntry{Key: key, Value: strconv.FormatInt(override, 10)}
		}
		return service.ConfigEntry{Key: key, Value: strconv.FormatInt(def, 10), IsDefault: true}
	}
	return []service.ConfigEntry{
		{Key: "fsync", Value: st.Fsync, IsDefault: true},
		entry("max_message_bytes", t.Config.MaxMessageBytes, int64(st.MaxBatchBytes)),
		entry("retention_bytes", t.Config.RetentionBytes, st.RetentionBytes),
		entry("retention_ms", t.Config.RetentionMs, st.RetentionMs),
		{Key: "segment_bytes", Value: strconv.FormatInt(st.SegmentBytes, 10), IsDefault: true},
	}
}

func (s *nodeService) topicMetadata(t *metadata.Topic) service.TopicMetadata {
	tm := service.TopicMetadata{Name: t.Name, ID: t.ID, ReplicationFactor: int16(t.ReplicationFactor),
		Partitions: make([]service.PartitionRoute, t.Partitions())}
	for p := range t.Replicas {
		tm.Partitions[p] = s.partitionRoute(t, int32(p))
	}
	return tm
}

// partitionRoute is partition p of t's route as this node sees it.
func (s *nodeService) partitionRoute(t *metadata.Topic, p int32) service.PartitionRoute {
	reps := t.Replicas[p]
	pr := service.PartitionRoute{Partition: p, PrimaryID: -1, Generation: -1, PreferredPrimaryID: int32(reps[0]),
		Replicas: make([]int32, len(reps))}
	for i, r := range reps {
		pr.Replicas[i] = int32(r)
	}
	key := shardKey(t.ID, p)
	rt, ok := s.routes.Get(key)
	if ok && rt.Leader > 0 && s.alive(rt.Leader) {
		pr.PrimaryID, pr.Generation = rt.Leader, rt.Term
	} else {
		// No primary, or its node is down (a factor-1 partition there is
		// unavailable until it returns; others elect a new one).
		pr.Err = partition.ErrPrimaryNotAvailable
		live := 0
		for _, r := range pr.Replicas {
			if s.alive(r) {
				live++
			}
		}
		if len(reps) > 1 && live < len(reps)/2+1 {
			// Too few replicas reachable to elect one: nothing is
			// under way, writes wait until a replica returns. Say so, as
			// the primary itself would (partition.Replica.quorumErr).
			pr.Err = partition.ErrNotEnoughReplicas
		}
		if s.openFailed(key, t.Name, p) != nil {
			// This node's replica could not be opened (openfail.go):
			// the cause is on its disk, not in an election.
			pr.Err = partition.ErrStorage
		}
	}
	for _, r := range pr.Replicas {
		switch {
		case !s.alive(r):
			pr.Offline = append(pr.Offline, r)
		case rt.InSync == nil || containsID(rt.InSync, r):
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

// ClusterStatus implements service.Meta. The counts come from the View:
// before it is loaded they would say the cluster holds nothing.
func (s *nodeService) ClusterStatus() (service.ClusterStatus, error) {
	if err := s.ready(); err != nil {
		return service.ClusterStatus{}, s.svcErr(err)
	}
	return s.clusterStatus(), nil
}

func (s *nodeService) clusterStatus() service.ClusterStatus {
	var res service.ClusterStatus
	res.MetadataPrimaryID, res.MetadataGeneration = s.metaRoute()
	res.RebalanceInProgress = s.rebalancing()
	brokers := s.Brokers()
	stats := map[int32]*service.NodeStatus{}
	v := s.view()
	if !v.ClusterID.IsZero() {
		res.ClusterID = v.ClusterID.String()
	}
	for _, b := range brokers {
		stats[b.ID] = &service.NodeStatus{Broker: b, Draining: v.Drains[b.ID] != nil}
	}
	for _, t := range v.Sorted {
		for p := range t.Replicas {
			pr := s.partitionRoute(t, int32(p))
			res.Partitions++
			if pr.PrimaryID < 0 {
				res.Offline++
			} else if st := stats[pr.PrimaryID]; st != nil {
				st.Primaries++
			}
			if len(pr.InSync) < len(pr.Replicas) {
				res.UnderReplicated++
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
	for _, b := range brokers {
		res.Nodes = append(res.Nodes, *stats[b.ID])
	}
	return res
}

// InitProducer implements service.Meta.
func (s *nodeService) InitProducer(req service.InitProducerRequest) (res service.InitProducerResult, err error) {
	defer func(start time.Time) { s.meter.observe(apiInitProducer, start, err) }(s.meter.now())
	if req.ProducerID >= 0 && req.ProducerEpoch < 32767 {
		return service.InitProducerResult{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch + 1}, nil
	}
	id, err := s.pids.allocate()
	if err != nil {
		return service.InitProducerResult{}, service.Errorf(service.ErrInternal, "%v", err)
	}
	return service.InitProducerResult{ProducerID: id}, nil
}

// clusterStatus and topicMetadata are the service's, for the node's
// tests and metrics.
func (n *Node) clusterStatus() service.ClusterStatus                  { return n.svc.clusterStatus() }
func (n *Node) topicMetadata(t *metadata.Topic) service.TopicMetadata { return n.svc.topicMetadata(t) }
