package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
		parts := t.NumPartitions
		if parts == -1 {
			parts = 1
		}
		ct := &CreateTopicReq{Name: t.Topic, Partitions: parts, ReplicationFactor: t.ReplicationFactor,
			Timeout: adminTimeout(req.TimeoutMillis), ValidateOnly: req.ValidateOnly, Configs: map[string]string{}}
		for _, cfg := range t.Configs {
			if cfg.Value != nil {
				ct.Configs[cfg.Name] = *cfg.Value
			}
		}
		pending++
		l.b.CreateTopic(c.Shard(), ct, func(info TopicInfo, err error) {
			if err != nil {
				rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
			} else {
				rt.TopicID, rt.NumPartitions, rt.ReplicationFactor = info.ID, int32(len(info.Partitions)), info.ReplicationFactor
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
		l.b.DeleteTopic(c.Shard(), name, adminTimeout(req.TimeoutMillis), func(err error) {
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
		l.b.AddPartitions(c.Shard(), t.Topic, t.Count, adminTimeout(req.TimeoutMillis), req.ValidateOnly, func(err error) {
			rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
			finish()
		})
	}
	finish()
}
