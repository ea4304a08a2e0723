package kafka

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// adminTimeoutDefault is the wait of an admin request that names none.
const adminTimeoutDefault = 30 * time.Second

func adminTimeout(ms int32) time.Duration {
	if ms <= 0 {
		return adminTimeoutDefault
	}
	return time.Duration(ms) * time.Millisecond
}

// createTopics creates each topic through the metadata controller. The
// replication factor -1 takes cluster.default_replication_factor; the
// partition count -1 is 1 (Kafka's num.partitions default). A factor
// outside 1..32 or above the roster is INVALID_REPLICATION_FACTOR, as
// Kafka answers. A manual replica assignment places the replicas as
// given (replicaSets); each topic is answered on its own, a topic named
// twice once (byName).
func (l *Listener) createTopics(c *netio.Conn, req *kmsg.CreateTopicsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	first, dup := byName(len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(first))
	for j, i := range first {
		t := &req.Topics[i]
		rt := &resp.Topics[j]
		*rt = kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if dup[t.Topic] {
			rt.ErrorCode, rt.ErrorMessage = kerr.InvalidRequest.Code, duplicateMessage(t.Topic)
			continue
		}
		ct, err := createRequest(t)
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = errorCode(err), kafkaConfigNames(errorMessage(err))
			continue
		}
		ct.Timeout, ct.ValidateOnly = adminTimeout(req.TimeoutMillis), req.ValidateOnly
		pending++
		l.svc.CreateTopic(c.Shard(), ct, func(res service.CreateTopicResult, err error) {
			if err != nil {
				rt.ErrorCode, rt.ErrorMessage = errorCode(err), kafkaConfigNames(errorMessage(err))
			} else {
				rt.TopicID, rt.NumPartitions, rt.ReplicationFactor = res.ID, res.Partitions, res.ReplicationFactor
			}
			finish()
		})
	}
	finish()
}

// deleteTopics deletes each topic by name (v6's topic ids are not
// served).
func (l *Listener) deleteTopics(c *netio.Conn, req *kmsg.DeleteTopicsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	resp.Topics = make([]kmsg.DeleteTopicsResponseTopic, len(req.TopicNames))
	for i, name := range req.TopicNames {
		rt := &resp.Topics[i]
		*rt = kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		pending++
		l.svc.DeleteTopic(c.Shard(), &service.DeleteTopicRequest{Name: name, Timeout: adminTimeout(req.TimeoutMillis)},
			func(_ metadata.TopicID, err error) {
				rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
				finish()
			})
	}
	finish()
}

// createPartitions raises each topic's partition count; the new
// partitions keep the topic's replication factor. A manual assignment
// lists one replica set per new partition, of the topic's factor, on
// active roster nodes (else INVALID_REPLICA_ASSIGNMENT naming the
// partition, as Kafka); an empty list, not null, is refused as Kafka
// refuses it (it assigns none of the partitions to add).
func (l *Listener) createPartitions(c *netio.Conn, req *kmsg.CreatePartitionsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	first, dup := byName(len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, len(first))
	for j, i := range first {
		t := &req.Topics[i]
		rt := &resp.Topics[j]
		*rt = kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		if dup[t.Topic] {
			rt.ErrorCode, rt.ErrorMessage = kerr.InvalidRequest.Code, duplicateMessage(t.Topic)
			continue
		}
		if t.Assignment != nil && len(t.Assignment) == 0 {
			rt.ErrorCode = kerr.InvalidReplicaAssignment.Code
			rt.ErrorMessage = kmsg.StringPtr("topic " + t.Topic + ": the replica assignment is an empty list, which assigns none of " +
				"the partitions to add; send one replica set per new partition, or null to let the cluster place them")
			continue
		}
		ask := &service.AddPartitionsRequest{Name: t.Topic, Partitions: t.Count, ValidateOnly: req.ValidateOnly,
			Timeout: adminTimeout(req.TimeoutMillis)}
		for _, a := range t.Assignment {
			ask.Assignment = append(ask.Assignment, a.Replicas)
		}
		pending++
		l.svc.AddPartitions(c.Shard(), ask, func(_ int32, err error) {
			rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
			finish()
		})
	}
	finish()
}

// byName indexes a request's n topics (name(i) the i-th's name): first
// lists the index of each name's first appearance, in order, and dup
// the names that appear more than once. Kafka's controller answers a
// name given twice once, INVALID_REQUEST, and acts on none of its
// entries: which one a client meant is not for the broker to guess.
func byName(n int, name func(i int) string) (first []int, dup map[string]bool) {
	seen := make(map[string]bool, n)
	dup = map[string]bool{}
	for i := range n {
		if seen[name(i)] {
			dup[name(i)] = true
			continue
		}
		seen[name(i)] = true
		first = append(first, i)
	}
	return first, dup
}

// duplicateMessage is the refusal of a topic named twice in one request.
func duplicateMessage(topic string) *string {
	return kmsg.StringPtr("Duplicate topic name: " + topic + " appears more than once in the request; name each topic once")
}

// replicationFactorMax is Kafka's bound here: 1..32, as our topics.
const replicationFactorMax = 32

// configKeys maps Kafka's topic config names onto ours; ours are accepted
// as they are.
var configKeys = map[string]string{"retention.ms": "retention_ms", "retention.bytes": "retention_bytes",
	"max.message.bytes": "max_message_bytes",
	// Compaction.
	"cleanup.policy": "cleanup_policy", "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
	"delete.retention.ms": "delete_retention_ms", "min.compaction.lag.ms": "min_compaction_lag_ms",
	"max.compaction.lag.ms": "max_compaction_lag_ms",
	// Segments.
	"segment.bytes": "segment_bytes", "segment.ms": "segment_ms"}

// kafkaConfigNames is a refusal's message with our config keys in it
// replaced by Kafka's names (retention_ms → retention.ms), so that a
// Kafka user reads the name they sent.
func kafkaConfigNames(msg *string) *string {
	if msg == nil {
		return nil
	}
	m := *msg
	for k, ours := range configKeys {
		m = strings.ReplaceAll(m, "config "+ours+"=", "config "+k+"=")
	}
	return &m
}

// createRequest is t as the service's request: the replication factor -1
// is the cluster's default (0 to the service), any other outside 1..32
// INVALID_REPLICATION_FACTOR (the service checks it against the
// roster); the partition count -1 is 1, Kafka's num.partitions default.
func createRequest(t *kmsg.CreateTopicsRequestTopic) (*service.CreateTopicRequest, error) {
	// Kafka's controller checks the name, then the configs, then the
	// count, the factor and the assignment: the first refusal is the
	// answer, so the same one as Kafka's.
	if err := service.ValidateTopicName(t.Topic); err != nil {
		return nil, err
	}
	ct := &service.CreateTopicRequest{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
	for _, cfg := range t.Configs {
		if cfg.Value == nil {
			continue // null: the default
		}
		key, skip, err := topicConfigKey(t.Topic, cfg.Name, cfg.Value)
		if err != nil {
			return nil, err
		}
		if !skip {
			ct.Configs = append(ct.Configs, service.Config{Key: key, Value: *cfg.Value})
		}
	}
	if len(t.ReplicaAssignment) > 0 {
		assign, err := replicaSets(t)
		if err != nil {
			return nil, err
		}
		ct.Partitions, ct.ReplicationFactor, ct.Assignment = 0, 0, assign
		return ct, nil
	}
	if ct.Partitions == -1 {
		ct.Partitions = 1
	}
	switch rf := t.ReplicationFactor; {
	case rf == -1:
		ct.ReplicationFactor = 0
	case rf < 1 || rf > replicationFactorMax:
		return nil, service.Errorf(service.ErrInvalidReplicationFactor,
			"topic %s: replication factor %d is outside -1 (the cluster's default) or 1..%d", t.Topic, rf, replicationFactorMax)
	}
	return ct, nil
}

// replicaSets is t's manual replica assignment as the service's, set i
// for partition i, checked as Kafka's controller checks the request
// around it: the partition count and the factor both -1 (INVALID_REQUEST
// otherwise, Kafka's words: the assignment gives them), then each
// partition index given once and together 0..n-1
// (INVALID_REPLICA_ASSIGNMENT). The replica sets themselves (non-empty,
// no node twice, one length, active roster nodes) are the metadata's to
// check, whose refusal names the partition and the node.
func replicaSets(t *kmsg.CreateTopicsRequestTopic) ([][]int32, error) {
	if t.ReplicationFactor != -1 {
		return nil, service.Errorf(service.ErrInvalidRequest,
			"topic %s: a manual partition assignment was specified, but replication factor was not set to -1", t.Topic)
	}
	if t.NumPartitions != -1 {
		return nil, service.Errorf(service.ErrInvalidRequest,
			"topic %s: a manual partition assignment was specified, but numPartitions was not set to -1", t.Topic)
	}
	n := len(t.ReplicaAssignment)
	sets := make([][]int32, n)
	for _, a := range t.ReplicaAssignment {
		switch {
		case a.Partition < 0 || int(a.Partition) >= n:
			return nil, service.Errorf(service.ErrInvalidReplicaAssignment,
				"topic %s: the assignment names partition %d, but its %d partitions must be numbered 0..%d, each once",
				t.Topic, a.Partition, n, n-1)
		case sets[a.Partition] != nil:
			return nil, service.Errorf(service.ErrInvalidReplicaAssignment,
				"topic %s: found multiple manual partition assignments for partition %d", t.Topic, a.Partition)
		}
		sets[a.Partition] = append(make([]int32, 0, len(a.Replicas)), a.Replicas...)
	}
	return sets, nil
}
