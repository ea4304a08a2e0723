package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadata answers Metadata from the node's view: brokers, the
// controller (our metadata primary), and per partition the leader (our
// primary), its epoch (our generation), the replicas, the ISR (our
// in-sync set) and the offline replicas. Topics are never created by a
// Metadata request: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
func (l *Listener) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, b := range l.b.Brokers() {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.ID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, mb)
	}
	id := l.b.ClusterID()
	resp.ClusterID = &id
	resp.ControllerID = l.b.ControllerID()
	// A nil list asks for every topic; one named by id alone (v10+)
	// is looked up among all of them.
	all := req.Topics == nil
	var names []string
	byID := map[[16]byte]bool{}
	for _, t := range req.Topics {
		switch {
		case t.Topic != nil:
			names = append(names, *t.Topic)
		case t.TopicID != [16]byte{}:
			byID[t.TopicID] = true
		}
	}
	infos, err := l.b.Topics(names, all || len(byID) > 0)
	if err != nil {
		// The node cannot answer yet: every topic asked for says so,
		// retriably.
		code := errorCode(err)
		for _, name := range names {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), code
			resp.Topics = append(resp.Topics, mt)
		}
		return resp
	}
	wanted := map[string]bool{}
	for _, n := range names {
		wanted[n] = true
	}
	for i := range infos {
		t := &infos[i]
		if !all && !wanted[t.Name] && !byID[t.ID] {
			continue
		}
		resp.Topics = append(resp.Topics, topicMetadata(t))
	}
	return resp
}

func topicMetadata(t *TopicInfo) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = kmsg.StringPtr(t.Name), t.ID
	if t.Err != nil {
		mt.ErrorCode = errorCode(t.Err)
		return mt
	}
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Index, p.Leader, p.LeaderEpoch
		mp.Replicas, mp.ISR, mp.OfflineReplicas = p.Replicas, p.ISR, p.Offline
		if mp.Replicas == nil {
			mp.Replicas = []int32{}
		}
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		mp.ErrorCode = KafkaCode(p.Err)
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// describeCluster answers DescribeCluster (KIP-700): the brokers and the
// controller, as Metadata has them.
func (l *Listener) describeCluster(req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1 // brokers
	resp.ClusterID = l.b.ClusterID()
	resp.ControllerID = l.b.ControllerID()
	for _, b := range l.b.Brokers() {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = b.ID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp
}
