package service

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/shard"
)

// groupSvc answers every group call with success and counts the calls
// that reached it.
type groupSvc struct {
	Service
	reached int
}

func (f *groupSvc) FindCoordinator(string) (GroupCoordinator, error) {
	f.reached++
	return GroupCoordinator{NodeID: 1}, nil
}
func (f *groupSvc) JoinGroup(_ *shard.Shard, _ *JoinGroupRequest, done func(JoinGroupResult, error)) {
	f.reached++
	done(JoinGroupResult{}, nil)
}
func (f *groupSvc) SyncGroup(_ *shard.Shard, _ *SyncGroupRequest, done func(SyncGroupResult, error)) {
	f.reached++
	done(SyncGroupResult{}, nil)
}
func (f *groupSvc) Heartbeat(_ *shard.Shard, _ *HeartbeatRequest, done func(error)) {
	f.reached++
	done(nil)
}
func (f *groupSvc) LeaveGroup(_ *shard.Shard, _ *LeaveGroupRequest, done func([]error, error)) {
	f.reached++
	done(nil, nil)
}
func (f *groupSvc) CommitGroupOffsets(_ *shard.Shard, _ *CommitGroupOffsetsRequest, done func([]error, error)) {
	f.reached++
	done(nil, nil)
}
func (f *groupSvc) FetchGroupOffsets(_ *shard.Shard, _ *FetchGroupOffsetsRequest, done func([]CommittedOffset, error)) {
	f.reached++
	done([]CommittedOffset{{Topic: "orders"}, {Topic: "secret"}}, nil)
}
func (f *groupSvc) ListGroups(_ *shard.Shard, _ *ListGroupsRequest, done func([]GroupSummary, error)) {
	f.reached++
	done([]GroupSummary{{Name: "app.billing"}, {Name: "other"}}, nil)
}
func (f *groupSvc) DescribeGroup(_ *shard.Shard, group string, done func(GroupDescription, error)) {
	f.reached++
	done(GroupDescription{Name: group}, nil)
}
func (f *groupSvc) DeleteGroup(_ *shard.Shard, _ string, done func(error)) {
	f.reached++
	done(nil)
}
func (f *groupSvc) DeleteGroupOffsets(_ *shard.Shard, _ *DeleteGroupOffsetsRequest, done func([]error, error)) {
	f.reached++
	done(nil, nil)
}

// The group calls check Kafka's group resource: read to be a member and
// commit (plus read on the topics committed), describe to see a group,
// delete to delete it; a topic rule gives no right on a group of the
// same name.
func TestGuardGroups(t *testing.T) {
	users := &fakeUsers{m: map[string]*metadata.User{
		"app": {Name: "app", Rules: []security.Rule{
			{Allow: true, Op: security.OpRead, Topic: "app.", Prefix: true, Group: true},
			{Allow: true, Op: security.OpRead, Topic: "orders"},
			{Allow: true, Op: security.OpRead, Topic: "other"},
			{Op: security.OpRead, Topic: "app.banned", Group: true},
		}},
		"admin": {Name: "admin", Rules: []security.Rule{
			{Allow: true, Op: security.OpDelete, Topic: "app.billing", Group: true},
			{Allow: true, Op: security.OpRead, Topic: "orders"},
		}},
	}}
	app, admin := security.Principal{User: "app"}, security.Principal{User: "admin"}
	type call func(s Service) error
	join := func(group string) call {
		return func(s Service) (err error) {
			s.JoinGroup(nil, &JoinGroupRequest{Group: group}, func(_ JoinGroupResult, e error) { err = e })
			return
		}
	}
	sync := func(s Service) (err error) {
		s.SyncGroup(nil, &SyncGroupRequest{Group: "app.billing"}, func(_ SyncGroupResult, e error) { err = e })
		return
	}
	heartbeat := func(s Service) (err error) {
		s.Heartbeat(nil, &HeartbeatRequest{Group: "app.billing"}, func(e error) { err = e })
		return
	}
	leave := func(s Service) (err error) {
		s.LeaveGroup(nil, &LeaveGroupRequest{Group: "app.billing"}, func(_ []error, e error) { err = e })
		return
	}
	commit := func(group, topic string) call {
		return func(s Service) (err error) {
			s.CommitGroupOffsets(nil, &CommitGroupOffsetsRequest{Group: group, Offsets: []OffsetCommit{{Topic: topic}}},
				func(_ []error, e error) { err = e })
			return
		}
	}
	fetch := func(group string) call {
		return func(s Service) (err error) {
			s.FetchGroupOffsets(nil, &FetchGroupOffsetsRequest{Group: group}, func(_ []CommittedOffset, e error) { err = e })
			return
		}
	}
	describe := func(group string) call {
		return func(s Service) (err error) {
			s.DescribeGroup(nil, group, func(_ GroupDescription, e error) { err = e })
			return
		}
	}
	find := func(group string) call {
		return func(s Service) error { _, err := s.FindCoordinator(group); return err }
	}
	del := func(group string) call {
		return func(s Service) (err error) {
			s.DeleteGroup(nil, group, func(e error) { err = e })
			return
		}
	}
	delOffsets := func(topic string) call {
		return func(s Service) (err error) {
			s.DeleteGroupOffsets(nil, &DeleteGroupOffsetsRequest{Group: "app.billing", Partitions: []TopicPartition{{Topic: topic}}},
				func(_ []error, e error) { err = e })
			return
		}
	}
	for _, tc := range []struct {
		name string
		who  security.Principal
		call call
		ok   bool
	}{
		{"join by group prefix", app, join("app.billing"), true},
		{"join denied inside the prefix", app, join("app.banned"), false},
		{"a topic rule is not a group rule", app, join("orders"), false},
		{"sync", app, sync, true},
		{"heartbeat", app, heartbeat, true},
		{"leave", app, leave, true},
		{"commit a topic read", app, commit("app.billing", "orders"), true},
		{"commit a topic not read", app, commit("app.billing", "payments"), false},
		{"commit to a group not granted", admin, commit("app.billing", "orders"), false},
		{"fetch offsets: read implies describe", app, fetch("app.billing"), true},
		{"fetch offsets of another group", app, fetch("other"), false},
		{"describe: read implies describe", app, describe("app.billing"), true},
		{"describe not granted", admin, describe("app.billing"), false},
		{"find coordinator", app, find("app.billing"), true},
		{"find coordinator not granted", app, find("other"), false},
		{"delete needs delete", app, del("app.billing"), false},
		{"delete granted", admin, del("app.billing"), true},
		{"delete offsets of a topic read", admin, delOffsets("orders"), true},
		{"delete offsets of a topic not read", admin, delOffsets("payments"), false},
		{"delete offsets without delete", app, delOffsets("orders"), false},
	} {
		inner := &groupSvc{}
		err := tc.call(Guard(inner, users, tc.who))
		if tc.ok && (err != nil || inner.reached != 1) {
			t.Errorf("%s: err %v, reached %d; want allowed", tc.name, err, inner.reached)
		}
		if !tc.ok && (!(errors.Is(err, ErrAuthorization) || errors.Is(err, ErrGroupAuthorization)) || inner.reached != 0) {
			t.Errorf("%s: err %v, reached %d; want a refusal before the service", tc.name, err, inner.reached)
		}
	}

	// Listings leave out what the caller may not describe.
	g := Guard(&groupSvc{}, users, app)
	var list []GroupSummary
	g.ListGroups(nil, &ListGroupsRequest{}, func(l []GroupSummary, _ error) { list = l })
	if len(list) != 1 || list[0].Name != "app.billing" {
		t.Fatalf("ListGroups: %v, want app.billing only", list)
	}
	users.m["app"].Rules = append(users.m["app"].Rules, security.Rule{Op: security.OpRead, Topic: "secret"})
	var offs []CommittedOffset
	g.FetchGroupOffsets(nil, &FetchGroupOffsetsRequest{Group: "app.billing"}, func(o []CommittedOffset, _ error) { offs = o })
	if len(offs) != 1 || offs[0].Topic != "orders" {
		t.Fatalf("FetchGroupOffsets of every partition: %v, want orders only", offs)
	}
}
