package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The group calls pass the permission guard on both ports: a user who
// may read a topic but has no group rule cannot join, find or commit in
// a group (GROUP_AUTHORIZATION_FAILED, native AUTHORIZATION_FAILED); a
// user with read on the group joins and commits the topics it reads,
// but not one it does not (TOPIC_AUTHORIZATION_FAILED), and may not
// delete the group without delete.
func TestGroupPermissions(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		scramNode(c)
		withKafka(c)
	})
	waitUser(t, n.svc, "root", true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	as := func(user, pw string) *kgo.Client {
		return kafkaClient(t, []string{n.KafkaAddr()}, kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha512Mechanism()),
			kgo.RetryTimeout(2*time.Second))
	}
	root := kadm.NewClient(as("root", "rootpw"))
	kafkaCreate(t, ctx, root, "gt", 1, -1)
	kafkaCreate(t, ctx, root, "other", 1, -1)
	for _, u := range []struct {
		name  string
		rules []security.Rule
	}{
		{"topiconly", []security.Rule{{Allow: true, Op: security.OpRead, Topic: "gt"}}},
		{"member", []security.Rule{{Allow: true, Op: security.OpRead, Topic: "gt"},
			{Allow: true, Op: security.OpRead, Topic: "g.", Prefix: true, Group: true}}},
	} {
		if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: u.name, Password: "pw", Rules: u.rules}); err != nil {
			t.Fatal(err)
		}
		waitUser(t, n.svc, u.name, true)
	}

	join := func(cl *kgo.Client) int16 {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "g.one", "consumer", 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		r.Protocols = append(r.Protocols, p)
		resp, err := r.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	commit := func(cl *kgo.Client, topic string) int16 {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = "g.one", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rt.Partitions = append(rt.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
		r.Topics = append(r.Topics, rt)
		resp, err := r.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	find := func(cl *kgo.Client) int16 {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey, r.CoordinatorKeys = "g.one", []string{"g.one"}
		resp, err := r.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Coordinators) > 0 {
			return resp.Coordinators[0].ErrorCode
		}
		return resp.ErrorCode
	}
	del := func(cl *kgo.Client) int16 {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{"g.one"}
		resp, err := r.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups[0].ErrorCode
	}
	waitGroupCoordinator(t, ctx, as("root", "rootpw"), "g.one")
	topicOnly, member := as("topiconly", "pw"), as("member", "pw")
	for _, tc := range []struct {
		name      string
		got, want int16
	}{
		{"join without a group rule", join(topicOnly), kerr.GroupAuthorizationFailed.Code},
		{"find the coordinator without a group rule", find(topicOnly), kerr.GroupAuthorizationFailed.Code},
		{"commit without a group rule", commit(topicOnly, "gt"), kerr.GroupAuthorizationFailed.Code},
		{"join with read on the group", join(member), kerr.MemberIDRequired.Code},
		{"find the coordinator with read on the group", find(member), 0},
		{"commit a topic read", commit(member, "gt"), 0},
		{"commit a topic not read", commit(member, "other"), kerr.TopicAuthorizationFailed.Code},
		{"delete without delete on the group", del(member), kerr.GroupAuthorizationFailed.Code},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(tc.got), kerr.ErrorForCode(tc.want))
		}
	}

	// The native port: the same guard.
	dial := func(user string) *client.Client {
		cl, err := client.DialConfig(ctx, client.Config{Brokers: []string{n.ClientAddr()}, Username: user, Password: "pw"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	if _, err := dial("topiconly").FetchGroupOffsets(ctx, "g.one", nil); !errors.Is(err, wire.ErrAuthorizationFailed) {
		t.Fatalf("native fetch of a group's offsets without a group rule: %v", err)
	}
	offs, err := dial("member").FetchGroupOffsets(ctx, "g.one", nil)
	if err != nil || len(offs) != 1 || offs[0].Topic != "gt" {
		t.Fatalf("native fetch with read on the group: %v %v", offs, err)
	}
}
