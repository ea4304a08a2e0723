package node

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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
		c.whenRoutable(t, 0, deadline, func(err error) {
			if err != nil {
				done(wire.Errorf(wire.ErrUnknownServerError, "topic %q was created (id %s), but %v", t.Name, t.ID, err))
				return
			}
			done(resp)
		})
	})
}

// whenRoutable calls fn(nil) once every partition of t from index first
// on has a known primary here (elected locally or announced by its
// primary), so a produce right after the create finds it, or at the
// deadline. It calls fn with an error saying which partitions cannot
// have a primary because this node could not open its replica of them
// (openfail.go) and a quorum of their replicas needs it, once every
// other partition is routable or the deadline passed: a topic whose
// partitions cannot open is not reported "created" (it used to be, after
// the whole timeout).
func (c *controller) whenRoutable(t *metadata.Topic, first int, deadline time.Time, fn func(error)) {
	pending := false
	failed := 0
	// causes counts the failed partitions by kind, with one error each.
	causes := map[string]int{}
	examples := map[string]string{}
	for p := first; p < len(t.Replicas); p++ {
		key := shardKey(t.ID, int32(p))
		if rt, ok := c.n.routes.get(key); ok && rt.leader > 0 {
			continue
		}
		reps := len(t.Replicas[p])
		if f, ok := c.n.openErrs.get(key); ok && reps-1 < reps/2+1 {
			failed++
			if causes[f.kind]++; causes[f.kind] == 1 {
				examples[f.kind] = fmt.Sprintf("partition %d: %v", p, f.err)
			}
			continue
		}
		pending = true
	}
	if pending && time.Now().Before(deadline) {
		c.sh.AfterFunc(2*time.Millisecond, func() { c.whenRoutable(t, first, deadline, fn) })
		return
	}
	if failed == 0 {
		fn(nil)
		return
	}
	var list []string
	for kind, count := range causes {
		list = append(list, fmt.Sprintf("%s (%d partitions; %s)", kind, count, examples[kind]))
	}
	sort.Strings(list)
	fn(fmt.Errorf("%d of its %d partitions cannot be opened on node %d and stay offline: %s. "+
		"The node retries each with a back-off of up to %v, so they come online once the cause is fixed; or delete the topic",
		failed, len(t.Replicas)-first, c.n.self, strings.Join(list, "; "), openBackoffMax))
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
	before := 0
	if t := c.state.Topic(req.Name); t != nil {
		before = t.Partitions()
	}
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
		c.whenRoutable(res.Topic, before, deadline, func(err error) {
			if err != nil {
				done(wire.Errorf(wire.ErrUnknownServerError, "topic %q now has %d partitions, but of the new ones %v", res.Topic.Name, res.Topic.Partitions(), err))
				return
			}
			done(&wire.AddPartitionsResponse{Partitions: int32(res.Topic.Partitions())})
		})
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
