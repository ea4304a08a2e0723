package node

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard/partition"
)

// The controller's side of the service's admin calls (svc_admin.go):
// each runs on the controller's shard and answers through done exactly
// once, there.

// admit is nil when the controller can serve an admin call now.
func (c *controller) admit(needPrimary bool) error {
	if c.r == nil {
		return service.Errorf(service.ErrNodeNotAvailable, "the metadata group is not open on this node")
	}
	if needPrimary {
		if err := c.requireMetaPrimary(); err != nil {
			return err
		}
	}
	// A primary plans from its state: until its term's first entry is
	// applied that state may lack committed commands (a topic it would
	// create twice, offsets it would not return).
	return c.d.ready()
}

// timeoutOf is an admin call's timeout: adminTimeoutDefault for 0.
func timeoutOf(d time.Duration) time.Duration {
	if d <= 0 {
		return adminTimeoutDefault
	}
	return d
}

// metadataKinds maps the metadata state machine's errors onto the
// service's kinds.
var metadataKinds = []struct{ is, kind error }{
	{metadata.ErrTopicExists, service.ErrTopicExists},
	{metadata.ErrUnknownTopic, service.ErrUnknownTopicOrPartition},
	{metadata.ErrInvalidPartitions, service.ErrInvalidPartitions},
	{metadata.ErrInvalidReplication, service.ErrInvalidReplicationFactor},
	{metadata.ErrInvalidTopicName, service.ErrInvalidTopicName},
	{metadata.ErrInvalidConfig, service.ErrInvalidConfig},
	{metadata.ErrRosterNotSeeded, service.ErrMetadataNotReady},
}

// metaKindErr gives a metadata error its service kind (INVALID_REQUEST
// when it has none); an error that already has one passes.
func metaKindErr(err error) error {
	var se *service.Error
	var pe *partition.Error
	if errors.As(err, &se) || errors.As(err, &pe) {
		return err
	}
	for _, m := range metadataKinds {
		if errors.Is(err, m.is) {
			return service.Errorf(m.kind, "%v", err)
		}
	}
	return service.Errorf(service.ErrInvalidRequest, "%v", err)
}

// rosterIDs lists the roster's ids; eligible lists the live ones not
// draining (placement does not choose a draining node).
func (c *controller) rosterIDs() (roster, eligible []metadata.NodeID) {
	for _, m := range c.d.roster() {
		roster = append(roster, metadata.NodeID(m.ID))
		if c.d.alive(int32(m.ID)) && c.state.Draining(metadata.NodeID(m.ID)) == nil {
			eligible = append(eligible, metadata.NodeID(m.ID))
		}
	}
	return roster, eligible
}

// rosterRacks is each roster node's rack (node.rack), over which
// placement spreads a partition's replicas.
func (c *controller) rosterRacks() map[metadata.NodeID]string {
	racks := map[metadata.NodeID]string{}
	for _, m := range c.d.roster() {
		racks[metadata.NodeID(m.ID)] = m.Rack
	}
	return racks
}

func (c *controller) createTopic(req *service.CreateTopicRequest, done func(service.CreateTopicResult, error)) {
	fail := func(err error) { done(service.CreateTopicResult{}, err) }
	roster, eligible := c.rosterIDs()
	// The service's validators answer in its kinds, the same whichever
	// front end asked (cluster/service/validate.go).
	if err := service.ValidateCreateTopic(req, len(roster)); err != nil {
		fail(err)
		return
	}
	tc, err := service.TopicConfigOf(req.Name, req.Configs)
	if err != nil {
		fail(err)
		return
	}
	defRF := c.d.defaultRF.Resolve(len(roster))
	cmd, err := c.state.PlanCreateTopic(metadata.CreateRequest{Name: req.Name, Partitions: int(req.Partitions),
		ReplicationFactor: int(req.ReplicationFactor), Config: tc, Racks: c.rosterRacks()}, roster, eligible, defRF, c.d.clock.Now().UnixMilli())
	if err != nil {
		fail(metaKindErr(err))
		return
	}
	if c.d.topicID != nil {
		cmd.Topic.ID = c.d.topicID()
	}
	t := cmd.Topic
	if req.ValidateOnly {
		done(service.CreateTopicResult{Partitions: int32(t.Partitions()), ReplicationFactor: int16(t.ReplicationFactor)}, nil)
		return
	}
	timeout := timeoutOf(req.Timeout)
	deadline := c.d.clock.Now().Add(timeout)
	c.propose(cmd, timeout, func(res metadata.Result, err error) {
		if err != nil {
			fail(metaKindErr(err))
			return
		}
		t := res.Topic
		out := service.CreateTopicResult{ID: t.ID, Partitions: int32(t.Partitions()), ReplicationFactor: int16(t.ReplicationFactor)}
		c.whenRoutable(t, 0, deadline, func(err error) {
			if err != nil {
				fail(service.Errorf(service.ErrInternal, "topic %q was created (id %s), but %v", t.Name, t.ID, err))
				return
			}
			done(out, nil)
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
		if rt, ok := c.d.route(key); ok && rt.Leader > 0 {
			continue
		}
		reps := len(t.Replicas[p])
		if f, ok := c.d.openFailed(key); ok && reps-1 < reps/2+1 {
			failed++
			if causes[f.kind]++; causes[f.kind] == 1 {
				examples[f.kind] = fmt.Sprintf("partition %d: %v", p, f.err)
			}
			continue
		}
		pending = true
	}
	if pending && c.d.clock.Now().Before(deadline) {
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
		failed, len(t.Replicas)-first, c.d.self, strings.Join(list, "; "), openBackoffMax))
}

func (c *controller) deleteTopic(req *service.DeleteTopicRequest, done func(metadata.TopicID, error)) {
	if metadata.IsInternalTopic(req.Name) {
		done(metadata.TopicID{}, service.Errorf(service.ErrAuthorization,
			"topic %q is the broker's own (consumer groups' state) and cannot be deleted; delete groups with the group calls", req.Name))
		return
	}
	cmd, err := c.state.PlanDeleteTopic(req.Name, req.ID)
	if err != nil {
		done(metadata.TopicID{}, metaKindErr(err))
		return
	}
	c.propose(cmd, timeoutOf(req.Timeout), func(res metadata.Result, err error) {
		if err != nil {
			done(metadata.TopicID{}, metaKindErr(err))
			return
		}
		done(res.Topic.ID, nil)
	})
}

func (c *controller) addPartitions(req *service.AddPartitionsRequest, done func(int32, error)) {
	if err := service.ValidateAddPartitions(req); err != nil {
		done(0, err)
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
	cmd, err := c.state.PlanAddPartitions(req.Name, req.ID, int(req.Partitions), eligible, c.rosterRacks())
	if err != nil {
		done(0, metaKindErr(err))
		return
	}
	if req.ValidateOnly {
		done(req.Partitions, nil)
		return
	}
	timeout := timeoutOf(req.Timeout)
	deadline := c.d.clock.Now().Add(timeout)
	c.propose(cmd, timeout, func(res metadata.Result, err error) {
		if err != nil {
			done(0, metaKindErr(err))
			return
		}
		c.whenRoutable(res.Topic, before, deadline, func(err error) {
			if err != nil {
				done(0, service.Errorf(service.ErrInternal, "topic %q now has %d partitions, but of the new ones %v", res.Topic.Name, res.Topic.Partitions(), err))
				return
			}
			done(int32(res.Topic.Partitions()), nil)
		})
	})
}

func (c *controller) commitOffsets(req *service.CommitOffsetsRequest, done func([]error, error)) {
	if err := service.ValidateConsumerName(req.Consumer); err != nil {
		done(nil, err)
		return
	}
	results := make([]error, len(req.Offsets))
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpCommitOffsets, Consumer: req.Consumer}
	var idx []int
	for i, o := range req.Offsets {
		e := metadata.OffsetEntry{OffsetKey: metadata.OffsetKey{Topic: o.Topic, Partition: o.Partition},
			Committed: metadata.Committed{TopicID: o.TopicID, Offset: o.Offset, Metadata: o.Metadata}}
		if err := c.state.CheckOffset(e); err != nil {
			results[i] = offsetErr(err)
			continue
		}
		cmd.Offsets = append(cmd.Offsets, e)
		idx = append(idx, i)
	}
	if len(cmd.Offsets) == 0 {
		done(results, nil)
		return
	}
	c.propose(cmd, adminTimeoutDefault, func(res metadata.Result, err error) {
		if err != nil {
			done(nil, metaKindErr(err))
			return
		}
		for j, e := range res.Errors {
			if e != nil {
				results[idx[j]] = offsetErr(e)
			}
		}
		done(results, nil)
	})
}

// offsetErr is one offset commit's refusal.
func offsetErr(err error) error {
	if errors.Is(err, metadata.ErrUnknownTopic) {
		return service.Errorf(service.ErrUnknownTopicOrPartition, "%v", err)
	}
	return service.Errorf(service.ErrInvalidOffset, "%v", err)
}

// fetchOffsets reads committed offsets from this node's copy of the
// metadata (the controller's state, current to what it has applied).
func (c *controller) fetchOffsets(req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error)) {
	if err := service.ValidateConsumerName(req.Consumer); err != nil {
		done(nil, err)
		return
	}
	var out []service.CommittedOffset
	add := func(topic string, p int32, cm metadata.Committed, ok bool) {
		co := service.CommittedOffset{Topic: topic, Partition: p, Offset: -1}
		if ok {
			co.TopicID, co.Offset, co.Metadata = cm.TopicID, cm.Offset, cm.Metadata
		}
		out = append(out, co)
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
	done(out, nil)
}
