package node

import (
	"errors"
	"strconv"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// admin runs a metadata request on the controller's shard; the answer
// comes back to the connection's shard.
func (h *handler) admin(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	req := wire.NewRequest(hdr.APIKey)
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	n := h.n
	err := shard.CallAsync(c.Shard(), n.group.Shard(metaShard), func(_ *shard.Shard, done func(any)) {
		n.ctrl.serve(req, done)
	}, func(v any) {
		switch v := v.(type) {
		case error:
			replyErr(c, hdr, n.withAddress(v))
		case wire.Response:
			reply(c, hdr, v)
		}
	})
	if err != nil {
		replyErr(c, hdr, busy(err))
	}
}

// serve answers one admin request through done (a wire.Response or an
// error), exactly once. Runs on the controller's shard.
func (c *controller) serve(req wire.Request, done func(any)) {
	if c.r == nil {
		done(wire.Errorf(wire.ErrNodeNotAvailable, "the metadata group is not open on this node"))
		return
	}
	if _, isFetch := req.(*wire.FetchOffsetsRequest); !isFetch {
		if err := c.requireMetaPrimary(); err != nil {
			done(err)
			return
		}
	}
	// A primary plans from its state: until its term's first entry is
	// applied that state may lack committed commands (a topic it would
	// create twice, offsets it would not return).
	if err := c.n.metadataReady(); err != nil {
		done(err)
		return
	}
	switch req := req.(type) {
	case *wire.CreateTopicRequest:
		c.createTopic(req, done)
	case *wire.DeleteTopicRequest:
		c.deleteTopic(req, done)
	case *wire.AddPartitionsRequest:
		c.addPartitions(req, done)
	case *wire.CommitOffsetsRequest:
		c.commitOffsets(req, done)
	case *wire.FetchOffsetsRequest:
		c.fetchOffsets(req, done)
	case *wire.MovePrimaryRequest:
		c.movePrimary(req, done)
	case *wire.RebalanceRequest:
		c.rebalance(req, done)
	default:
		done(wire.Errorf(wire.ErrInvalidRequest, "%s is not an admin request", req.APIKey()))
	}
}

func timeoutOf(ms uint32) time.Duration {
	if ms == 0 {
		return adminTimeoutDefault
	}
	return time.Duration(ms) * time.Millisecond
}

// wireErr maps metadata errors onto the wire table.
func wireErr(err error) error {
	var er *wire.ErrorResponse
	if errors.As(err, &er) {
		return err
	}
	codes := []struct {
		is  error
		err *wire.Error
	}{
		{metadata.ErrTopicExists, wire.ErrTopicAlreadyExists},
		{metadata.ErrUnknownTopic, wire.ErrUnknownTopicOrPartition},
		{metadata.ErrInvalidPartitions, wire.ErrInvalidPartitions},
		{metadata.ErrInvalidReplication, wire.ErrInvalidReplicationFactor},
		{metadata.ErrInvalidTopicName, wire.ErrInvalidTopicName},
		{metadata.ErrInvalidConfig, wire.ErrInvalidConfig},
	}
	for _, m := range codes {
		if errors.Is(err, m.is) {
			return wire.Errorf(m.err, "%v", err)
		}
	}
	return wire.Errorf(wire.ErrInvalidRequest, "%v", err)
}

// rosterIDs lists the roster's ids; eligible lists the live ones.
func (c *controller) rosterIDs() (roster, eligible []metadata.NodeID) {
	for _, m := range c.n.roster {
		roster = append(roster, metadata.NodeID(m.ID))
		if c.n.alive(int32(m.ID)) {
			eligible = append(eligible, metadata.NodeID(m.ID))
		}
	}
	return roster, eligible
}

func topicConfig(entries []wire.Config) (metadata.TopicConfig, error) {
	var tc metadata.TopicConfig
	for _, e := range entries {
		v, err := strconv.ParseInt(e.Value, 10, 64)
		if err != nil {
			return tc, wire.Errorf(wire.ErrInvalidConfig, "config %s=%q is not an integer", e.Key, e.Value)
		}
		switch e.Key {
		case "retention_ms":
			tc.RetentionMs = v
		case "retention_bytes":
			tc.RetentionBytes = v
		default:
			return tc, wire.Errorf(wire.ErrInvalidConfig, "unknown topic config %q (known: retention_ms, retention_bytes)", e.Key)
		}
	}
	return tc, nil
}

func (c *controller) createTopic(req *wire.CreateTopicRequest, done func(any)) {
	if err := req.Validate(); err != nil {
		done(err)
		return
	}
	tc, err := topicConfig(req.Configs)
	if err != nil {
		done(err)
		return
	}
	roster, eligible := c.rosterIDs()
	defRF := c.n.cfg.Cluster.DefaultReplicationFactor.Resolve(len(roster))
	cmd, err := c.state.PlanCreateTopic(metadata.CreateRequest{Name: req.Name, Partitions: int(req.Partitions),
		ReplicationFactor: int(req.ReplicationFactor), Config: tc}, roster, eligible, defRF, time.Now().UnixMilli())
	if err != nil {
		done(wireErr(err))
		return
	}
	t := cmd.Topic
	if req.ValidateOnly {
		done(&wire.CreateTopicResponse{Partitions: int32(t.Partitions()), ReplicationFactor: int16(t.ReplicationFactor)})
		return
	}
	timeout := timeoutOf(req.TimeoutMs)
	deadline := time.Now().Add(timeout)
	c.propose(cmd, timeout, func(res metadata.Result, err error) {
		if err != nil {
			done(wireErr(err))
			return
		}
		t := res.Topic
		resp := &wire.CreateTopicResponse{TopicID: wire.TopicID(t.ID), Partitions: int32(t.Partitions()), ReplicationFactor: int16(t.ReplicationFactor)}
		c.whenRoutable(t, deadline, func() { done(resp) })
	})
}

// whenRoutable calls fn once every partition of t has a known primary
// here (elected locally or announced by its primary), so a produce right
// after the create finds it, or at the deadline.
func (c *controller) whenRoutable(t *metadata.Topic, deadline time.Time, fn func()) {
	for p := range t.Replicas {
		if rt, ok := c.n.routes.get(shardKey(t.ID, int32(p))); (!ok || rt.leader <= 0) && time.Now().Before(deadline) {
			c.sh.AfterFunc(2*time.Millisecond, func() { c.whenRoutable(t, deadline, fn) })
			return
		}
	}
	fn()
}

func (c *controller) deleteTopic(req *wire.DeleteTopicRequest, done func(any)) {
	cmd, err := c.state.PlanDeleteTopic(req.Name, metadata.TopicID(req.TopicID))
	if err != nil {
		done(wireErr(err))
		return
	}
	c.propose(cmd, timeoutOf(req.TimeoutMs), func(res metadata.Result, err error) {
		if err != nil {
			done(wireErr(err))
			return
		}
		done(&wire.DeleteTopicResponse{TopicID: wire.TopicID(res.Topic.ID)})
	})
}

func (c *controller) addPartitions(req *wire.AddPartitionsRequest, done func(any)) {
	if err := req.Validate(); err != nil {
		done(err)
		return
	}
	// The count a topic already has is refused (INVALID_PARTITIONS), as
	// by Kafka: the SDK does not resend an AddPartitions whose outcome it
	// does not know, so no retry of one that happened can arrive here.
	_, eligible := c.rosterIDs()
	cmd, err := c.state.PlanAddPartitions(req.Name, metadata.TopicID(req.TopicID), int(req.Partitions), eligible)
	if err != nil {
		done(wireErr(err))
		return
	}
	if req.ValidateOnly {
		done(&wire.AddPartitionsResponse{Partitions: req.Partitions})
		return
	}
	timeout := timeoutOf(req.TimeoutMs)
	deadline := time.Now().Add(timeout)
	c.propose(cmd, timeout, func(res metadata.Result, err error) {
		if err != nil {
			done(wireErr(err))
			return
		}
		c.whenRoutable(res.Topic, deadline, func() { done(&wire.AddPartitionsResponse{Partitions: int32(res.Topic.Partitions())}) })
	})
}

func (c *controller) commitOffsets(req *wire.CommitOffsetsRequest, done func(any)) {
	if err := req.Validate(); err != nil {
		done(err)
		return
	}
	resp := &wire.CommitOffsetsResponse{Results: make([]wire.PartitionResult, len(req.Offsets))}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpCommitOffsets, Consumer: req.Consumer}
	var idx []int
	for i, o := range req.Offsets {
		resp.Results[i] = wire.PartitionResult{Topic: o.Topic, Partition: o.Partition}
		e := metadata.OffsetEntry{OffsetKey: metadata.OffsetKey{Topic: o.Topic, Partition: o.Partition},
			Committed: metadata.Committed{TopicID: metadata.TopicID(o.TopicID), Offset: o.Offset, Metadata: o.Metadata}}
		if err := c.state.CheckOffset(e); err != nil {
			resp.Results[i].ErrorCode = offsetCode(err)
			continue
		}
		cmd.Offsets = append(cmd.Offsets, e)
		idx = append(idx, i)
	}
	if len(cmd.Offsets) == 0 {
		done(resp)
		return
	}
	c.propose(cmd, adminTimeoutDefault, func(res metadata.Result, err error) {
		if err != nil {
			done(wireErr(err))
			return
		}
		for j, e := range res.Errors {
			if e != nil {
				resp.Results[idx[j]].ErrorCode = offsetCode(e)
			}
		}
		done(resp)
	})
}

func offsetCode(err error) int16 {
	if errors.Is(err, metadata.ErrUnknownTopic) {
		return wire.ErrUnknownTopicOrPartition.Code
	}
	return wire.ErrInvalidOffset.Code
}

// fetchOffsets reads committed offsets from this node's copy of the
// metadata (the controller's state, current to what it has applied).
func (c *controller) fetchOffsets(req *wire.FetchOffsetsRequest, done func(any)) {
	if err := req.Validate(); err != nil {
		done(err)
		return
	}
	resp := &wire.FetchOffsetsResponse{}
	add := func(topic string, p int32, cm metadata.Committed, ok bool) {
		co := wire.CommittedOffset{Topic: topic, Partition: p, Offset: -1}
		if ok {
			co.TopicID, co.Offset, co.Metadata = wire.TopicID(cm.TopicID), cm.Offset, cm.Metadata
		}
		resp.Offsets = append(resp.Offsets, co)
	}
	if len(req.Partitions) == 0 {
		for _, e := range c.state.CommittedAll(req.Consumer) {
			add(e.Topic, e.Partition, e.Committed, true)
		}
	}
	for _, tp := range req.Partitions {
		cm, ok := c.state.Committed(req.Consumer, metadata.OffsetKey{Topic: tp.Topic, Partition: tp.Partition})
		add(tp.Topic, tp.Partition, cm, ok)
	}
	done(resp)
}
