package kafka

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
)

// ConsumerOffsetsTopic is Kafka's name for its consumer groups' internal
// topic. Metadata presents corestream's groups topic (metadata.GroupsTopic)
// under it: in the full listing and asked by name, marked internal, with
// the groups topic's id, partitions, primaries and replicas, so that regex
// consumers skip it (as they skip Kafka's) and tools that look for it find
// the groups' partitions and leaders. Its records are corestream's group
// state, not Kafka's offset-commit key/value format, so the data APIs
// refuse it under this name (refuseConsumerOffsets) rather than hand a
// tool records it would misread: committed offsets are read with
// OffsetFetch and the admin APIs, as Kafka's tools also do.
const ConsumerOffsetsTopic = "__consumer_offsets"

// serviceTopicName is the service's name for the topic a Kafka client
// names: our groups topic for Kafka's consumer-offsets topic.
func serviceTopicName(kafkaName string) string {
	if kafkaName == ConsumerOffsetsTopic {
		return metadata.GroupsTopic
	}
	return kafkaName
}

// refuseConsumerOffsets is the error code of a Produce, Fetch or
// ListOffsets of a partition of topic: INVALID_TOPIC_EXCEPTION (not
// retriable; Kafka's answer to a client's append to its internal topics)
// for ConsumerOffsetsTopic, else 0.
func refuseConsumerOffsets(topic string) int16 {
	if topic == ConsumerOffsetsTopic {
		return kerr.InvalidTopicException.Code
	}
	return 0
}

// withConsumerOffsets is topics (the service's full listing, which leaves
// the internal topics out) with our groups topic added under
// ConsumerOffsetsTopic once it exists, in name order.
func (l *Listener) withConsumerOffsets(topics []service.TopicMetadata) []service.TopicMetadata {
	g, err := l.svc.Metadata(service.MetadataRequest{Topics: []string{metadata.GroupsTopic}})
	if err != nil || len(g.Topics) != 1 || g.Topics[0].Err != nil {
		return topics
	}
	t := g.Topics[0]
	t.Name = ConsumerOffsetsTopic
	i, _ := slices.BinarySearchFunc(topics, t.Name, func(a service.TopicMetadata, name string) int { return strings.Compare(a.Name, name) })
	return slices.Insert(topics, i, t)
}

// serviceToKafkaTopic is the name a Kafka client knows the service's
// topic by: Kafka's consumer-offsets topic for our groups topic.
func serviceToKafkaTopic(name string) string {
	if name == metadata.GroupsTopic {
		return ConsumerOffsetsTopic
	}
	return name
}
