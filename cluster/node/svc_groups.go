package node

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// groupsTick is how often the coordinator expires sessions and ends
// rebalances that ran out of time: a member is removed at most this late
// past its session timeout.
const groupsTick = 100 * time.Millisecond

// groupsRunner is the node's consumer group coordinator and the
// goroutine that ticks it (the coordinator reads no clock of its own).
type groupsRunner struct {
	coord *groups.Coordinator
	// term is the metadata term in which this node last coordinated: a
	// node that becomes primary again in a later term starts from empty
	// groups (members it had may have moved to another coordinator
	// meanwhile, and rejoin).
	term atomic.Int32
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// startGroups starts the coordinator's ticks.
func startGroups() *groupsRunner {
	r := &groupsRunner{coord: groups.New(groups.DefaultConfig), done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(groupsTick)
		defer t.Stop()
		for {
			select {
			case <-r.done:
				return
			case now := <-t.C:
				r.coord.Tick(now)
			}
		}
	}()
	return r
}

// stop ends the ticks and answers parked group calls (their connections
// are closing); a nil runner has nothing to stop.
func (r *groupsRunner) stop() {
	if r == nil {
		return
	}
	r.once.Do(func() {
		close(r.done)
		r.wg.Wait()
		r.coord.Reset()
	})
}

// groupKinds gives the coordinator's errors their service kinds.
var groupKinds = []struct {
	is, kind error
}{
	{groups.ErrUnknownMember, service.ErrUnknownMember},
	{groups.ErrIllegalGeneration, service.ErrIllegalGeneration},
	{groups.ErrRebalanceInProgress, service.ErrRebalanceInProgress},
	{groups.ErrMemberIDRequired, service.ErrMemberIDRequired},
	{groups.ErrInconsistentProtocol, service.ErrInconsistentProtocol},
	{groups.ErrInvalidSessionTimeout, service.ErrInvalidSessionTimeout},
	{groups.ErrUnknownGroup, service.ErrUnknownGroup},
	{groups.ErrNonEmptyGroup, service.ErrNonEmptyGroup},
	{groups.ErrGroupFull, service.ErrGroupFull},
	{groups.ErrFencedInstance, service.ErrFencedInstance},
	// The coordinator is full: no node can take the group now.
	{groups.ErrTooManyGroups, service.ErrCoordinatorNotAvailable},
}

// groupErr gives a coordinator error its service kind, message kept.
func (s *nodeService) groupErr(err error) error {
	if err == nil {
		return nil
	}
	for _, g := range groupKinds {
		if errors.Is(err, g.is) {
			return service.Errorf(g.kind, "%v", err)
		}
	}
	return s.svcErr(err)
}

// onShard runs fn on from (inline when already there): the coordinator
// answers a parked call on the goroutine that completed it (another
// connection's shard, or the ticker). With from nil fn runs where it is.
func onShard(from *shard.Shard, fn func()) {
	if from == nil || from.OnThread() {
		fn()
		return
	}
	// A refused post (the shard is stopping, or its inbox is full) loses
	// the answer; the client times the request out and retries.
	_ = from.Post(fn)
}

// coordinator is the node's coordinator when this node coordinates
// group (it is the metadata primary), else the error to answer with.
func (s *nodeService) coordinator(group string) (*groups.Coordinator, error) {
	if s.groups == nil {
		return nil, service.Errorf(service.ErrCoordinatorNotAvailable, "this node runs no group coordinator")
	}
	if err := wire.ValidateConsumerName(group); err != nil {
		return nil, service.Errorf(service.ErrInvalidConsumerName, "group %q: %v", group, err)
	}
	id, gen := s.metaRoute()
	switch {
	case id <= 0:
		return nil, service.Errorf(service.ErrCoordinatorNotAvailable, "no metadata primary is known, so no node coordinates group %q now; retry shortly", group)
	case id != int32(s.self):
		e := service.Errorf(service.ErrNotCoordinator, "node %d does not coordinate group %q: node %d does", s.self, group, id)
		e.Hint = &service.Hint{NodeID: id, Generation: gen, ClientAddr: s.addrOf(id)}
		return nil, e
	}
	if prev := s.groups.term.Swap(gen); prev != gen {
		s.groups.coord.Reset()
	}
	return s.groups.coord, nil
}

// FindCoordinator implements service.Groups: the metadata primary
// coordinates every group (docs/design/groups.md).
func (s *nodeService) FindCoordinator(group string) (service.GroupCoordinator, error) {
	if err := wire.ValidateConsumerName(group); err != nil {
		return service.GroupCoordinator{NodeID: -1}, service.Errorf(service.ErrInvalidConsumerName, "group %q: %v", group, err)
	}
	id, _ := s.metaRoute()
	if id <= 0 {
		return service.GroupCoordinator{NodeID: -1}, service.Errorf(service.ErrCoordinatorNotAvailable, "no metadata primary is known, so no node coordinates group %q now; retry shortly", group)
	}
	return service.GroupCoordinator{NodeID: id, ClientAddr: s.addrOf(id), KafkaAddr: s.kafkaAddrOf(id)}, nil
}

// JoinGroup implements service.Groups.
func (s *nodeService) JoinGroup(from *shard.Shard, req *service.JoinGroupRequest, done func(service.JoinGroupResult, error)) {
	c, err := s.coordinator(req.Group)
	if err != nil {
		done(service.JoinGroupResult{Generation: -1, MemberID: req.MemberID}, err)
		return
	}
	jr := groups.JoinRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, ClientID: req.ClientID,
		Host: req.Host, ProtocolType: req.ProtocolType, SessionTimeout: req.SessionTimeout,
		RebalanceTimeout: req.RebalanceTimeout, RequireKnownMember: req.RequireKnownMember}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, groups.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	ptype := req.ProtocolType
	c.Join(s.now(), jr, func(res groups.JoinResult, err error) {
		out := service.JoinGroupResult{Generation: res.Generation, MemberID: res.MemberID}
		if err == nil {
			out.ProtocolType, out.Protocol, out.LeaderID = ptype, res.Protocol, res.LeaderID
			for _, m := range res.Members {
				out.Members = append(out.Members, service.GroupMember{MemberID: m.ID, Metadata: m.Metadata})
			}
		}
		err = s.groupErr(err)
		onShard(from, func() { done(out, err) })
	})
}

// SyncGroup implements service.Groups.
func (s *nodeService) SyncGroup(from *shard.Shard, req *service.SyncGroupRequest, done func(service.SyncGroupResult, error)) {
	c, err := s.coordinator(req.Group)
	if err != nil {
		done(service.SyncGroupResult{}, err)
		return
	}
	sr := groups.SyncRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation, Assignments: req.Assignments}
	c.Sync(s.now(), sr, func(assignment []byte, err error) {
		var out service.SyncGroupResult
		if err == nil {
			out.Assignment = assignment
			if d, derr := c.Describe(req.Group); derr == nil {
				out.ProtocolType, out.Protocol = d.ProtocolType, d.Protocol
			}
		}
		err = s.groupErr(err)
		onShard(from, func() { done(out, err) })
	})
}

// Heartbeat implements service.Groups.
func (s *nodeService) Heartbeat(_ *shard.Shard, req *service.HeartbeatRequest, done func(error)) {
	c, err := s.coordinator(req.Group)
	if err != nil {
		done(err)
		return
	}
	done(s.groupErr(c.Heartbeat(s.now(), req.Group, req.MemberID, req.Generation)))
}

// LeaveGroup implements service.Groups.
func (s *nodeService) LeaveGroup(_ *shard.Shard, req *service.LeaveGroupRequest, done func([]error, error)) {
	c, err := s.coordinator(req.Group)
	if err != nil {
		done(nil, err)
		return
	}
	ids := make([]string, len(req.Members))
	for i, m := range req.Members {
		ids[i] = m.MemberID
		if m.MemberID == "" && m.InstanceID != "" {
			ids[i] = c.MemberOfInstance(req.Group, m.InstanceID)
		}
	}
	errs := c.Leave(s.now(), req.Group, ids)
	for i := range errs {
		errs[i] = s.groupErr(errs[i])
	}
	done(errs, nil)
}

// CommitGroupOffsets implements service.Groups: the coordinator checks
// the member and generation, then the offsets are stored as the group's
// named-consumer offsets (the metadata group).
func (s *nodeService) CommitGroupOffsets(from *shard.Shard, req *service.CommitGroupOffsetsRequest, done func([]error, error)) {
	c, err := s.coordinator(req.Group)
	if err != nil {
		done(nil, err)
		return
	}
	if err := c.CheckCommit(s.now(), req.Group, req.MemberID, req.Generation); err != nil {
		done(nil, s.groupErr(err))
		return
	}
	if len(req.Offsets) == 0 {
		done(nil, nil)
		return
	}
	s.CommitOffsets(from, &service.CommitOffsetsRequest{Consumer: req.Group, Offsets: req.Offsets}, done)
}

// FetchGroupOffsets implements service.Groups.
func (s *nodeService) FetchGroupOffsets(from *shard.Shard, req *service.FetchGroupOffsetsRequest, done func([]service.CommittedOffset, error)) {
	if _, err := s.coordinator(req.Group); err != nil {
		done(nil, err)
		return
	}
	s.FetchOffsets(from, &service.FetchOffsetsRequest{Consumer: req.Group, Partitions: req.Partitions}, done)
}

// ListGroups implements service.Groups: the groups this node
// coordinates (none on a node that is not the metadata primary, as a
// Kafka broker lists its own).
func (s *nodeService) ListGroups(_ *shard.Shard, req *service.ListGroupsRequest, done func([]service.GroupSummary, error)) {
	if id, _ := s.metaRoute(); id != int32(s.self) || s.groups == nil {
		done(nil, nil)
		return
	}
	want := map[string]bool{}
	for _, st := range req.States {
		want[st] = true
	}
	var out []service.GroupSummary
	for _, d := range s.groups.coord.List() {
		if len(want) > 0 && !want[d.State.String()] {
			continue
		}
		out = append(out, service.GroupSummary{Name: d.Name, ProtocolType: d.ProtocolType, State: d.State.String()})
	}
	done(out, nil)
}

// DescribeGroup implements service.Groups.
func (s *nodeService) DescribeGroup(_ *shard.Shard, group string, done func(service.GroupDescription, error)) {
	c, err := s.coordinator(group)
	if err != nil {
		done(service.GroupDescription{Name: group, State: groups.Dead.String()}, err)
		return
	}
	d, err := c.Describe(group)
	out := service.GroupDescription{Name: group, State: d.State.String(), ProtocolType: d.ProtocolType, Protocol: d.Protocol,
		Generation: d.Generation}
	for _, m := range d.Members {
		out.Members = append(out.Members, service.GroupMemberDescription{MemberID: m.ID, InstanceID: m.InstanceID,
			ClientID: m.ClientID, Host: m.Host, Metadata: m.Metadata, Assignment: m.Assignment})
	}
	done(out, s.groupErr(err))
}

// DeleteGroup implements service.Groups. The group's committed offsets
// stay for now: the metadata group has no command that drops a named
// consumer's offsets yet.
func (s *nodeService) DeleteGroup(_ *shard.Shard, group string, done func(error)) {
	c, err := s.coordinator(group)
	if err != nil {
		done(err)
		return
	}
	done(s.groupErr(c.Delete(group)))
}

// DeleteGroupOffsets implements service.Groups.
func (s *nodeService) DeleteGroupOffsets(_ *shard.Shard, req *service.DeleteGroupOffsetsRequest, done func([]error, error)) {
	if _, err := s.coordinator(req.Group); err != nil {
		done(nil, err)
		return
	}
	done(nil, service.Errorf(service.ErrInvalidRequest, "deleting a group's offsets is not served yet"))
}
