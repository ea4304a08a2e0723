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
// Kafka answers. Manual replica assignments are refused (placement is
// ours).
func (l *Listener) createTopics(c *netio.Conn, req *kmsg.CreateTopicsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := &resp.Topics[i]
		*rt = kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if len(t.ReplicaAssignment) > 0 {
			rt.ErrorCode = kerr.InvalidRequest.Code
			rt.ErrorMessage = kmsg.StringPtr("manual replica assignment is not supported: corestream places replicas itself")
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
// partitions keep the topic's replication factor. Manual assignments are
// refused.
func (l *Listener) createPartitions(c *netio.Conn, req *kmsg.CreatePartitionsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := &resp.Topics[i]
		*rt = kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		if len(t.Assignment) > 0 {
			rt.ErrorCode = kerr.InvalidRequest.Code
			rt.ErrorMessage = kmsg.StringPtr("manual replica assignment is not supported: corestream places replicas itself")
			continue
		}
		pending++
		ask := &service.AddPartitionsRequest{Name: t.Topic, Partitions: t.Count, ValidateOnly: req.ValidateOnly,
			Timeout: adminTimeout(req.TimeoutMillis)}
		l.svc.AddPartitions(c.Shard(), ask, func(_ int32, err error) {
			rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
			finish()
		})
	}
	finish()
}

// replicationFactorMax is Kafka's bound here: 1..32, as our topics.
const replicationFactorMax = 32

// configKeys maps Kafka's topic config names onto ours; ours are accepted
// as they are.
var configKeys = map[string]string{"retention.ms": "retention_ms", "retention.bytes": "retention_bytes",
	"max.message.bytes": "max_message_bytes"}

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
	ct := &service.CreateTopicRequest{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
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
	return ct, nil
}
