package controller

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
)

// The controller's side of the service's topic and offset calls: each
// is planned from the applied state, proposed through the Metadata port
// and answered through done exactly once, on shard routes.MetaShard.
// The controller admits a call first (its group open, its role, its
// metadata loaded).

// AdminDeps is what the admin calls read and do.
type AdminDeps struct {
	Meta  Metadata
	Clock clock.Clock
	// After arms a timer on shard routes.MetaShard.
	After func(d time.Duration, fn func())
	Self  raftlite.NodeID
	// Roster is the roster's active members and Alive the liveness
	// signal: placement chooses among the live members not draining.
	Roster func() []config.RosterNode
	Alive  func(id int32) bool
	Routes RouteReader
	// OpenFailed says why this node could not open partition key's
	// replica (ok false: it did not fail); OpenRetryMax is the longest
	// back-off between its attempts, for the message.
	OpenFailed   func(key [20]byte) (kind string, err error, ok bool)
	OpenRetryMax time.Duration
	// DefaultRF is cluster.default_replication_factor.
	DefaultRF config.ReplicationFactor
	// TopicID draws a new topic's id; nil: the metadata's own (a random
	// UUID). The whole-node simulator draws them from its seed.
	TopicID func() metadata.TopicID
}

// Admin answers the service's topic and offset calls; owned by shard
// routes.MetaShard.
type Admin struct{ d AdminDeps }

// NewAdmin is the admin calls over d.
func NewAdmin(d AdminDeps) *Admin { return &Admin{d: d} }

// timeoutOf is an admin call's timeout: ProposeTimeout for 0.
func timeoutOf(d time.Duration) time.Duration {
	if d <= 0 {
		return ProposeTimeout
	}
	return d
}

// rosterIDs lists the roster's ids; eligible lists the live ones not
// draining (placement does not choose a draining node).
func (a *Admin) rosterIDs() (roster, eligible []metadata.NodeID) {
	for _, m := range a.d.Roster() {
		roster = append(roster, metadata.NodeID(m.ID))
		if a.d.Alive(int32(m.ID)) && a.d.Meta.State().Draining(metadata.NodeID(m.ID)) == nil {
			eligible = append(eligible, metadata.NodeID(m.ID))
		}
	}
	return roster, eligible
}

// rosterRacks is each roster node's rack (node.rack), over which
// placement spreads a partition's replicas.
func (a *Admin) rosterRacks() map[metadata.NodeID]string {
	racks := map[metadata.NodeID]string{}
	for _, m := range a.d.Roster() {
		racks[metadata.NodeID(m.ID)] = m.Rack
	}
	return racks
}

// CreateTopic plans topic req.Name from the applied state, proposes it
// and answers once every partition is routable here (whenRoutable).
// REQUIRES: on shard routes.MetaShard, admitted by the controller.
func (a *Admin) CreateTopic(req *service.CreateTopicRequest, done func(service.CreateTopicResult, error)) {
	fail := func(err error) { done(service.CreateTopicResult{}, err) }
	roster, eligible := a.rosterIDs()
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
	defRF := a.d.DefaultRF.Resolve(len(roster))
	cmd, err := a.d.Meta.State().PlanCreateTopic(metadata.CreateRequest{Name: req.Name, Partitions: int(req.Partitions),
		ReplicationFactor: int(req.ReplicationFactor), Config: tc, Racks: a.rosterRacks(), Assignment: req.Assignment},
		roster, eligible, defRF, a.d.Clock.Now().UnixMilli())
	if err != nil {
		fail(MetaKindErr(err))
		return
	}
	if a.d.TopicID != nil {
		cmd.Topic.ID = a.d.TopicID()
	}
	t := cmd.Topic
	if req.ValidateOnly {
		done(service.CreateTopicResult{Partitions: int32(t.Partitions()), ReplicationFactor: int16(t.ReplicationFactor)}, nil)
		return
	}
	timeout := timeoutOf(req.Timeout)
	deadline := a.d.Clock.Now().Add(timeout)
	a.d.Meta.Propose(cmd, timeout, func(res metadata.Result, err error) {
		if err != nil {
			fail(MetaKindErr(err))
			return
		}
		t := res.Topic
		out := service.CreateTopicResult{ID: t.ID, Partitions: int32(t.Partitions()), ReplicationFactor: int16(t.ReplicationFactor)}
		a.whenRoutable(t, 0, deadline, func(err error) {
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
func (a *Admin) whenRoutable(t *metadata.Topic, first int, deadline time.Time, fn func(error)) {
	pending := false
	failed := 0
	// causes counts the failed partitions by kind, with one error each.
	causes := map[string]int{}
	examples := map[string]string{}
	for p := first; p < len(t.Replicas); p++ {
		key := routes.Key(t.ID, int32(p))
		if rt, ok := a.d.Routes.Get(key); ok && rt.Leader > 0 {
			continue
		}
		reps := len(t.Replicas[p])
		if kind, ferr, ok := a.d.OpenFailed(key); ok && reps-1 < reps/2+1 {
			failed++
			if causes[kind]++; causes[kind] == 1 {
				examples[kind] = fmt.Sprintf("partition %d: %v", p, ferr)
			}
			continue
		}
		pending = true
	}
	if pending && a.d.Clock.Now().Before(deadline) {
		a.d.After(2*time.Millisecond, func() { a.whenRoutable(t, first, deadline, fn) })
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
		failed, len(t.Replicas)-first, a.d.Self, strings.Join(list, "; "), a.d.OpenRetryMax))
}

// DeleteTopic proposes the deletion of topic req.Name. REQUIRES: on
// shard routes.MetaShard, admitted by the controller.
func (a *Admin) DeleteTopic(req *service.DeleteTopicRequest, done func(metadata.TopicID, error)) {
	if metadata.IsInternalTopic(req.Name) {
		done(metadata.TopicID{}, service.Errorf(service.ErrAuthorization,
			"topic %q is the broker's own (consumer groups' state) and cannot be deleted; delete groups with the group calls", req.Name))
		return
	}
	cmd, err := a.d.Meta.State().PlanDeleteTopic(req.Name, req.ID)
	if err != nil {
		done(metadata.TopicID{}, MetaKindErr(err))
		return
	}
	a.d.Meta.Propose(cmd, timeoutOf(req.Timeout), func(res metadata.Result, err error) {
		if err != nil {
			done(metadata.TopicID{}, MetaKindErr(err))
			return
		}
		done(res.Topic.ID, nil)
	})
}

// AddPartitions grows topic req.Name to req.Partitions and answers once
// the new partitions are routable here. REQUIRES: on shard
// routes.MetaShard, admitted by the controller.
func (a *Admin) AddPartitions(req *service.AddPartitionsRequest, done func(int32, error)) {
	if err := service.ValidateAddPartitions(req); err != nil {
		done(0, err)
		return
	}
	// The count a topic already has is refused (INVALID_PARTITIONS), as
	// by Kafka: the SDK does not resend an AddPartitions whose outcome it
	// does not know, so no retry of one that happened can arrive here.
	_, eligible := a.rosterIDs()
	before := 0
	if t := a.d.Meta.State().Topic(req.Name); t != nil {
		before = t.Partitions()
	}
	cmd, err := a.d.Meta.State().PlanAddPartitions(req.Name, req.ID, int(req.Partitions), eligible, a.rosterRacks(), req.Assignment)
	if err != nil {
		done(0, MetaKindErr(err))
		return
	}
	if req.ValidateOnly {
		done(req.Partitions, nil)
		return
	}
	timeout := timeoutOf(req.Timeout)
	deadline := a.d.Clock.Now().Add(timeout)
	a.d.Meta.Propose(cmd, timeout, func(res metadata.Result, err error) {
		if err != nil {
			done(0, MetaKindErr(err))
			return
		}
		a.whenRoutable(res.Topic, before, deadline, func(err error) {
			if err != nil {
				done(0, service.Errorf(service.ErrInternal, "topic %q now has %d partitions, but of the new ones %v", res.Topic.Name, res.Topic.Partitions(), err))
				return
			}
			done(int32(res.Topic.Partitions()), nil)
		})
	})
}

// CommitOffsets records a consumer's committed offsets. REQUIRES: on
// shard routes.MetaShard, admitted by the controller.
func (a *Admin) CommitOffsets(req *service.CommitOffsetsRequest, done func([]error, error)) {
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
		if err := a.d.Meta.State().CheckOffset(e); err != nil {
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
	a.d.Meta.Propose(cmd, ProposeTimeout, func(res metadata.Result, err error) {
		if err != nil {
			done(nil, MetaKindErr(err))
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

// FetchOffsets reads committed offsets from this node's copy of the
// metadata (the controller's state, current to what it has applied).
// REQUIRES: on shard routes.MetaShard, admitted by the controller.
func (a *Admin) FetchOffsets(req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error)) {
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
		for _, e := range a.d.Meta.State().CommittedAll(req.Consumer) {
			add(e.Topic, e.Partition, e.Committed, true)
		}
	}
	for _, tp := range req.Partitions {
		cm, ok := a.d.Meta.State().Committed(req.Consumer, metadata.OffsetKey{Topic: tp.Topic, Partition: tp.Partition})
		add(tp.Topic, tp.Partition, cm, ok)
	}
	done(out, nil)
}
