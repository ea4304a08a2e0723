package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicNames maps topic ids to names for the requests that name topics
// by id (Fetch v13 and later, KIP-516). An id names one topic for its
// whole life, so a name found never goes stale: a deleted topic's id
// keeps its old name, and the fetch, fenced by the id, is answered
// UNKNOWN_TOPIC_ID. It holds at most the topics the cluster has had
// since the node started (metadata.TopicsMax at a time).
type topicNames struct {
	m sync.Map // [16]byte → string
}

// topicName is the name of the topic id names, looking the topics up
// through the service when the id is not known yet.
func (l *Listener) topicName(id [16]byte) (string, bool) {
	if v, ok := l.names.m.Load(id); ok {
		return v.(string), true
	}
	topics, err := l.svc.ListTopics()
	if err != nil {
		return "", false
	}
	name, found := "", false
	for _, t := range topics {
		l.names.m.Store([16]byte(t.ID), t.Name)
		if [16]byte(t.ID) == id {
			name, found = t.Name, true
		}
	}
	return name, found
}

// resolveTopicIDs fills in the names of the topics a Fetch of v13 or
// later names only by id, in its topics and its forgotten topics. A
// topic whose id is unknown keeps an empty name, which the service does
// not know: its partitions are answered UNKNOWN_TOPIC_ID.
func (l *Listener) resolveTopicIDs(req *kmsg.FetchRequest) {
	if req.Version < 13 {
		return
	}
	for i := range req.Topics {
		req.Topics[i].Topic, _ = l.topicName(req.Topics[i].TopicID)
	}
	for i := range req.ForgottenTopics {
		req.ForgottenTopics[i].Topic, _ = l.topicName(req.ForgottenTopics[i].TopicID)
	}
}

// knownTopicID says topic exists now with id: a fetch by id of a
// deleted (or recreated) topic is UNKNOWN_TOPIC_ID, of a partition the
// topic lacks UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers them.
func (l *Listener) knownTopicID(topic string, id [16]byte) bool {
	if topic == "" {
		return false
	}
	d, err := l.svc.DescribeTopic(topic)
	return err == nil && [16]byte(d.Topic.ID) == id
}
