package kafka

import (
	"errors"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// broker is a node as Kafka clients see it.
type broker struct {
	id   int32
	host string
	port int32
	rack *string // nil: none
}

// brokers lists the roster's nodes that have a Kafka address, with
// their racks (Metadata v1+), which consumers with client.rack match.
func (l *Listener) brokers() []broker {
	var out []broker
	for _, b := range l.svc.Brokers() {
		host, port, err := net.SplitHostPort(b.KafkaAddr)
		if err != nil {
			continue // no Kafka address: not a broker to Kafka clients
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		var rack *string
		if b.Rack != "" {
			rack = kmsg.StringPtr(b.Rack)
		}
		out = append(out, broker{b.ID, host, int32(p), rack})
	}
	return out
}

// controllerID is the metadata primary, -1 when none is known.
func (l *Listener) controllerID() int32 {
	id, _ := l.svc.MetadataRoute()
	if id <= 0 {
		return -1
	}
	return id
}

// metadata answers Metadata from the service: brokers, the controller
// (our metadata primary), and per partition the leader (our primary),
// its epoch (our generation), the replicas, the ISR (our in-sync set)
// and the offline replicas; topic ids are ours. Topics are never created
// by a Metadata request: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
func (l *Listener) metadata(c *netio.Conn, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, b := range l.brokers() {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.id, b.host, b.port, b.rack
		resp.Brokers = append(resp.Brokers, mb)
	}
	id := l.svc.Identity().ClusterID
	resp.ClusterID = &id
	resp.ControllerID = l.controllerID()
	// A nil list asks for every topic (an empty one for none); a topic
	// named by id alone (v10+) is looked up among all of them.
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
	// Version 0 has no null list: there an empty one asks for all.
	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	if !all && len(names) == 0 && len(byID) == 0 {
		return resp
	}
	var ask service.MetadataRequest
	if !all && len(byID) == 0 {
		ask.Topics = make([]string, len(names))
		for i, n := range names {
			ask.Topics[i] = serviceTopicName(n)
		}
	}
	res, err := l.svc.Metadata(ask)
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
	if ask.Topics == nil && (all || wanted[ConsumerOffsetsTopic] || len(byID) > 0) {
		// The listing leaves internal topics out; Kafka's lists its
		// consumer-offsets topic (marked internal, so regex consumers
		// skip it): ours, once the first group request made it.
		res.Topics = l.withConsumerOffsets(res.Topics)
	}
	for i := range res.Topics {
		t := &res.Topics[i]
		if ask.Topics != nil {
			t.Name = names[i] // the name asked, __consumer_offsets for our groups topic
		}
		if len(byID) > 0 && !wanted[t.Name] && !byID[t.ID] {
			continue
		}
		if t.Name == ConsumerOffsetsTopic && t.Err == nil {
			// Fetch v13 names it by this id: answered as refused
			// (refuseConsumerOffsets), not as __groups.
			l.names.m.Store([16]byte(t.ID), ConsumerOffsetsTopic)
		}
		mt := topicMetadata(t)
		if mt.ErrorCode == kerr.UnknownTopicOrPartition.Code && l.autoCreate(c, req, t.Name) {
			// Being created: the client asks again, as against Kafka.
			mt.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// autoCreate starts the creation of topic name when the listener and the
// request allow it (Kafka's auto.create.topics.enable and Metadata's
// allow_auto_topic_creation, implied before v4), and reports whether it
// did. It does not wait: Kafka answers LEADER_NOT_AVAILABLE meanwhile and
// the client asks again. An invalid or internal name is not created (the
// client keeps UNKNOWN_TOPIC_OR_PARTITION); a creation that fails (the
// topic was created meanwhile, too few nodes) is logged.
func (l *Listener) autoCreate(c *netio.Conn, req *kmsg.MetadataRequest, name string) bool {
	if l.cfg.AutoCreatePartitions <= 0 || (req.Version >= 4 && !req.AllowAutoTopicCreation) ||
		metadata.IsInternalTopic(name) || service.ValidateTopicName(name) != nil {
		return false
	}
	l.svc.CreateTopic(c.Shard(), &service.CreateTopicRequest{Name: name, Partitions: l.cfg.AutoCreatePartitions},
		func(_ service.CreateTopicResult, err error) {
			if err != nil && !errors.Is(err, service.ErrTopicExists) {
				l.cfg.Log.Info("kafka: auto topic creation failed", "topic", name, "err", err)
			}
		})
	return true
}

func topicMetadata(t *service.TopicMetadata) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.IsInternal = metadata.IsInternalTopic(t.Name)
	if t.ID != (metadata.TopicID{}) {
		mt.TopicID = t.ID
	}
	if t.Err != nil {
		mt.ErrorCode = errorCode(t.Err)
		return mt
	}
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.PrimaryID, p.Generation
		mp.Replicas, mp.ISR, mp.OfflineReplicas = nonNil(p.Replicas), nonNil(p.InSync), p.Offline
		mp.ErrorCode = errorCode(p.Err)
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// describeCluster answers DescribeCluster (KIP-700): the brokers and the
// controller, as Metadata has them.
func (l *Listener) describeCluster(req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1 // brokers
	resp.ClusterID = l.svc.Identity().ClusterID
	resp.ControllerID = l.controllerID()
	for _, b := range l.brokers() {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = b.id, b.host, b.port, b.rack
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp
}
