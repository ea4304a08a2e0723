package kafka

import (
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
)

// describeTopicPartitionsKey is DescribeTopicPartitions (KIP-966),
// version 0, which Kafka 3.8+ admin clients (kafka-topics.sh
// --describe, Admin.describeTopics) send instead of Metadata.
const describeTopicPartitionsKey int16 = 75

// describeTopicPartitionsMax bounds the partitions of one answer, as
// Kafka's max.request.partition.size.limit (its default): a request's
// response_partition_limit above it is lowered to it.
const describeTopicPartitionsMax = 2000

// describeTopicPartitions answers DescribeTopicPartitions as Kafka's
// broker does, from the same routes as Metadata. No topic named asks for
// every topic (internal ones excepted but __consumer_offsets, as Metadata
// lists them, and those the user may not describe left out); named topics are answered in name
// order, an unknown one UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
// for a name the naming rule refuses), and those the user may not
// describe TOPIC_AUTHORIZATION_FAILED, last, without their id. Paging:
// an answer holds at most response_partition_limit partitions (at most
// 2000); when more remain, next_cursor names the topic and partition to
// go on from, and a request's cursor starts there (its topic must be
// among those named, else INVALID_REQUEST; topics before it are
// skipped). Eligible leader replicas (ELR) are empty lists: consensus
// elects only from a majority, there is no ELR; authorized operations
// are not computed (-2147483648, as when not asked for).
func (l *Listener) describeTopicPartitions(req *kmsg.DescribeTopicPartitionsRequest) *kmsg.DescribeTopicPartitionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	cursorTopic, cursorPartition := "", int32(0)
	if req.Cursor != nil {
		cursorTopic, cursorPartition = req.Cursor.Topic, req.Cursor.Partition
	}
	// each answers every topic named with code, as Kafka answers a
	// request it refuses whole (the response has no top-level code).
	each := func(names []string, code int16) *kmsg.DescribeTopicPartitionsResponse {
		for _, name := range names {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.Partitions = kmsg.StringPtr(name), code, []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	all := len(req.Topics) == 0
	var ask service.MetadataRequest
	if !all {
		var named []string
		for _, t := range req.Topics {
			named = append(named, t.Topic)
			if t.Topic >= cursorTopic && !slices.Contains(ask.Topics, t.Topic) {
				ask.Topics = append(ask.Topics, t.Topic)
			}
		}
		if req.Cursor != nil && !slices.Contains(ask.Topics, cursorTopic) {
			// Kafka: "topic list should contain the cursor topic".
			return each(named, kerr.InvalidRequest.Code)
		}
		slices.Sort(ask.Topics)
	}
	asked := ask
	if !all {
		// Kafka's name for our groups topic is asked as ours, answered
		// as Kafka's.
		asked.Topics = make([]string, len(ask.Topics))
		for i, name := range ask.Topics {
			asked.Topics[i] = serviceTopicName(name)
		}
	}
	res, err := l.svc.Metadata(asked)
	if err == nil && all {
		res.Topics = l.withConsumerOffsets(res.Topics)
	} else if err == nil {
		for i := range res.Topics {
			res.Topics[i].Name = ask.Topics[i]
		}
	}
	if err != nil {
		// The node cannot answer yet: each topic named says so,
		// retriably (none is listed when all were asked for, as
		// Metadata answers).
		return each(ask.Topics, errorCode(err))
	}
	// Those the user may not describe are answered last, whatever the
	// paging, as Kafka answers them.
	var refused []string
	shown := make([]*service.TopicMetadata, 0, len(res.Topics))
	for i := range res.Topics {
		switch t := &res.Topics[i]; {
		case all && t.Name < cursorTopic:
		case errors.Is(t.Err, service.ErrAuthorization):
			refused = append(refused, t.Name)
		default:
			shown = append(shown, t)
		}
	}
	remaining := min(req.ResponsePartitionLimit, describeTopicPartitionsMax)
	for _, t := range shown {
		if remaining == 0 {
			// Kafka's cursor: the next topic's start (it may not exist).
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: t.Name, Partition: 0}
			break
		}
		if remaining < 0 {
			break // as Kafka: a negative limit answers no topic and no cursor
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.IsInternal = kmsg.StringPtr(t.Name), metadata.IsInternalTopic(t.Name) // __consumer_offsets too
		rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		if t.Err != nil {
			rt.ErrorCode = errorCode(t.Err)
			if errors.Is(t.Err, service.ErrUnknownTopicOrPartition) && !strings.HasPrefix(t.Name, metadata.InternalTopicPrefix) &&
				service.ValidateTopicName(t.Name) != nil {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID = t.ID
		first := int32(0)
		if t.Name == cursorTopic {
			first = cursorPartition
		}
		// Kafka's bounds: from the cursor's partition, at most remaining.
		upper := min(int32(len(t.Partitions)), first+remaining)
		for p := max(first, 0); p < upper; p++ {
			rt.Partitions = append(rt.Partitions, describedPartition(&t.Partitions[p]))
		}
		resp.Topics = append(resp.Topics, rt)
		if upper < int32(len(t.Partitions)) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: t.Name, Partition: upper}
			break
		}
		remaining -= int32(len(rt.Partitions))
	}
	return each(refused, kerr.TopicAuthorizationFailed.Code)
}

// describedPartition is p as DescribeTopicPartitions lists it: Metadata's
// fields, and empty ELR lists (null would break clients that read them).
func describedPartition(p *service.PartitionRoute) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	dp.Partition, dp.LeaderID, dp.LeaderEpoch = p.Partition, p.PrimaryID, p.Generation
	dp.Replicas, dp.ISR, dp.OfflineReplicas = nonNil(p.Replicas), nonNil(p.InSync), nonNil(p.Offline)
	dp.EligibleLeaderReplicas, dp.LastKnownELR = []int32{}, []int32{}
	dp.ErrorCode = errorCode(p.Err)
	return dp
}
