package nodesvc

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard/partition"
)

// The service's read-only calls: answered on the caller's goroutine from
// the published View and the route table.

// Identity implements service.Meta.
func (s *Service) Identity() service.Identity {
	return service.Identity{NodeID: int32(s.d.Self), ClusterID: s.d.ClusterID(), Version: s.d.Version}
}

// MetadataRoute implements service.Meta.
func (s *Service) MetadataRoute() (int32, int32) { return s.d.MetaRoute() }

// Brokers implements service.Meta.
func (s *Service) Brokers() []service.Broker {
	roster := s.d.Roster()
	out := make([]service.Broker, 0, len(roster))
	for _, m := range roster {
		id := int32(m.ID)
		out = append(out, service.Broker{ID: id, ClientAddr: s.d.AddrOf(id), HTTPAddr: m.HTTPAddr, KafkaAddr: s.d.KafkaAddrOf(id),
			Alive: s.d.Alive(id), Rack: m.Rack})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Locate implements service.Meta.
func (s *Service) Locate(topic string, p int32) (service.PartitionRef, int32, error) {
	t, err := s.topicFor(topic, p)
	if err != nil {
		return service.PartitionRef{}, -1, err
	}
	lead := int32(-1)
	if rt, ok := s.d.Routes.Get(routes.Key(t.ID, p)); ok && rt.Leader > 0 {
		lead = rt.Leader
	}
	return service.PartitionRef{Topic: t.Name, Partition: p, TopicID: t.ID, Generation: service.GenerationUnknown}, lead, nil
}

// Metadata implements service.Meta.
func (s *Service) Metadata(req service.MetadataRequest) (res service.MetadataResult, err error) {
	defer func(start time.Time) { s.d.Meter.observe(apiMetadata, start, err) }(s.d.Meter.now())
	if err := s.d.Ready(); err != nil {
		return service.MetadataResult{}, s.svcErr(err)
	}
	v := s.d.View()
	res = service.MetadataResult{Brokers: s.Brokers()}
	res.MetadataPrimaryID, res.MetadataGeneration = s.d.MetaRoute()
	if len(req.Topics) == 0 {
		for _, t := range v.Sorted {
			if metadata.IsInternalTopic(t.Name) {
				continue // listed only when asked for by name
			}
			res.Topics = append(res.Topics, s.TopicMetadata(t))
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
		res.Topics = append(res.Topics, s.TopicMetadata(t))
	}
	return res, nil
}

// ListTopics implements service.Meta.
func (s *Service) ListTopics() ([]service.TopicSummary, error) {
	if err := s.d.Ready(); err != nil {
		return nil, s.svcErr(err)
	}
	out := []service.TopicSummary{}
	for _, t := range s.d.View().Sorted {
		if metadata.IsInternalTopic(t.Name) {
			continue // described only when asked for by name
		}
		out = append(out, service.TopicSummary{Name: t.Name, ID: t.ID, Partitions: int32(t.Partitions()),
			ReplicationFactor: int16(t.ReplicationFactor)})
	}
	return out, nil
}

// DescribeTopic implements service.Meta.
func (s *Service) DescribeTopic(name string) (service.TopicDescription, error) {
	if err := s.d.Ready(); err != nil {
		return service.TopicDescription{}, s.svcErr(err)
	}
	t := s.d.View().Topics[name]
	if t == nil {
		return service.TopicDescription{}, unknownPartition(name, 0, nil)
	}
	return service.TopicDescription{Topic: s.TopicMetadata(t), Configs: s.topicConfigs(t)}, nil
}

// topicConfigs lists a topic's effective configuration, sorted by key.
func (s *Service) topicConfigs(t *metadata.Topic) []service.ConfigEntry {
	st := s.d.Storage
	entry := func(key string, override, def int64) service.ConfigEntry {
		if override != 0 {
			return service.ConfigEntry{Key: key, Value: strconv.FormatInt(override, 10)}
		}
		return service.ConfigEntry{Key: key, Value: strconv.FormatInt(def, 10), IsDefault: true}
	}
	return []service.ConfigEntry{
		{Key: "fsync", Value: st.Fsync, IsDefault: true},
		cleanupPolicyEntry(t.Config),
		entry("delete_retention_ms", t.Config.DeleteRetentionMs, s.d.CompactionDefaults.DeleteRetentionMs),
		entry("max_message_bytes", t.Config.MaxMessageBytes, int64(st.MaxBatchBytes)),
		s.minDirtyRatioEntry(t.Config),
		entry("max_compaction_lag_ms", t.Config.MaxCompactionLagMs, math.MaxInt64),
		entry("min_compaction_lag_ms", t.Config.MinCompactionLagMs, 0),
		entry("retention_bytes", t.Config.RetentionBytes, st.RetentionBytes),
		entry("retention_ms", t.Config.RetentionMs, st.RetentionMs),
		entry("segment_bytes", t.Config.SegmentBytes, st.SegmentBytes),
		entry("segment_ms", t.Config.SegmentMs, st.SegmentMs),
	}
}

// TopicMetadata is t's metadata as this node answers it.
func (s *Service) TopicMetadata(t *metadata.Topic) service.TopicMetadata {
	tm := service.TopicMetadata{Name: t.Name, ID: t.ID, ReplicationFactor: int16(t.ReplicationFactor),
		Partitions: make([]service.PartitionRoute, t.Partitions())}
	for p := range t.Replicas {
		tm.Partitions[p] = s.PartitionRoute(t, int32(p))
	}
	return tm
}

// PartitionRoute is partition p of t's route as this node sees it: the
// one every answer (metadata, status, the metrics) gives.
func (s *Service) PartitionRoute(t *metadata.Topic, p int32) service.PartitionRoute {
	reps := t.Replicas[p]
	pr := service.PartitionRoute{Partition: p, PrimaryID: -1, Generation: -1, PreferredPrimaryID: int32(reps[0]),
		Replicas: make([]int32, len(reps))}
	for i, r := range reps {
		pr.Replicas[i] = int32(r)
	}
	key := routes.Key(t.ID, p)
	rt, ok := s.d.Routes.Get(key)
	if ok && rt.Leader > 0 && s.d.Alive(rt.Leader) {
		pr.PrimaryID, pr.Generation = rt.Leader, rt.Term
	} else {
		// No primary, or its node is down (a factor-1 partition there is
		// unavailable until it returns; others elect a new one).
		pr.Err = partition.ErrPrimaryNotAvailable
		live := 0
		for _, r := range pr.Replicas {
			if s.d.Alive(r) {
				live++
			}
		}
		if len(reps) > 1 && live < len(reps)/2+1 {
			// Too few replicas reachable to elect one: nothing is
			// under way, writes wait until a replica returns. Say so, as
			// the primary itself would (partition.Replica.quorumErr).
			pr.Err = partition.ErrNotEnoughReplicas
		}
		if s.d.OpenFailed(key, t.Name, p) != nil {
			// This node's replica could not be opened (Deps.OpenFailed):
			// the cause is on its disk, not in an election.
			pr.Err = partition.ErrStorage
		}
	}
	for _, r := range pr.Replicas {
		switch {
		case !s.d.Alive(r):
			pr.Offline = append(pr.Offline, r)
		case rt.InSync == nil || slices.Contains(rt.InSync, r):
			if pr.PrimaryID > 0 {
				pr.InSync = append(pr.InSync, r)
			}
		}
	}
	return pr
}

// ClusterStatus implements service.Meta. The counts come from the View:
// before it is loaded they would say the cluster holds nothing.
func (s *Service) ClusterStatus() (service.ClusterStatus, error) {
	if err := s.d.Ready(); err != nil {
		return service.ClusterStatus{}, s.svcErr(err)
	}
	return s.Status(), nil
}

// Status is ClusterStatus without its readiness check, for the node's
// metrics and tests.
func (s *Service) Status() service.ClusterStatus {
	var res service.ClusterStatus
	res.MetadataPrimaryID, res.MetadataGeneration = s.d.MetaRoute()
	res.RebalanceInProgress = s.d.Rebalancing()
	brokers := s.Brokers()
	stats := map[int32]*service.NodeStatus{}
	v := s.d.View()
	if !v.ClusterID.IsZero() {
		res.ClusterID = v.ClusterID.String()
	}
	for _, b := range brokers {
		stats[b.ID] = &service.NodeStatus{Broker: b, Draining: v.Drains[b.ID] != nil}
	}
	for _, t := range v.Sorted {
		for p := range t.Replicas {
			pr := s.PartitionRoute(t, int32(p))
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
func (s *Service) InitProducer(req service.InitProducerRequest) (res service.InitProducerResult, err error) {
	defer func(start time.Time) { s.d.Meter.observe(apiInitProducer, start, err) }(s.d.Meter.now())
	if req.ProducerID >= 0 && req.ProducerEpoch < 32767 {
		return service.InitProducerResult{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch + 1}, nil
	}
	id, err := s.d.ProducerIDs.Allocate()
	if err != nil {
		return service.InitProducerResult{}, service.Errorf(service.ErrInternal, "%v", err)
	}
	return service.InitProducerResult{ProducerID: id}, nil
}

// cleanupPolicyEntry is the topic's cleanup_policy as DescribeConfigs
// and the topic describe show it.
func cleanupPolicyEntry(c metadata.TopicConfig) service.ConfigEntry {
	if c.CleanupPolicy == "" {
		return service.ConfigEntry{Key: "cleanup_policy", Value: metadata.CleanupDelete, IsDefault: true}
	}
	return service.ConfigEntry{Key: "cleanup_policy", Value: c.CleanupPolicy}
}

// minDirtyRatioEntry is the topic's min_cleanable_dirty_ratio entry.
func (s *Service) minDirtyRatioEntry(c metadata.TopicConfig) service.ConfigEntry {
	if c.MinCleanableDirtyRatio == 0 {
		return service.ConfigEntry{Key: "min_cleanable_dirty_ratio",
			Value: strconv.FormatFloat(s.d.CompactionDefaults.MinCleanableDirtyRatio, 'g', -1, 64), IsDefault: true}
	}
	return service.ConfigEntry{Key: "min_cleanable_dirty_ratio", Value: strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64)}
}
