package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete (Kafka API 47) drops a group's offsets of topics no
// member subscribes to and refuses the others GROUP_SUBSCRIBED_TO_TOPIC;
// DeleteGroups deletes an empty group with its offsets; a group with
// neither members nor offsets is GROUP_ID_NOT_FOUND.
func TestKafkaOffsetDelete(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kc := kafkaClient(t, []string{n.KafkaAddr()})
	adm := kadm.NewClient(kc)
	kafkaCreate(t, ctx, adm, "od", 2, -1)
	kafkaCreate(t, ctx, adm, "od2", 1, -1)
	cl := kc.Broker(1)

	// A consumer that assigns itself partitions commits three offsets.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "od", Partition: 0, At: 5, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "od", Partition: 1, At: 6, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "od2", Partition: 0, At: 7, LeaderEpoch: -1})
	if res, err := adm.CommitOffsets(ctx, "odg", offs); err != nil || res.Error() != nil {
		t.Fatalf("commit: %v %v", err, res.Error())
	}

	// A member joins subscribed to od.
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Topics = []string{"od"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 5, "odg", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", sub.AppendTo(nil)
	join.Protocols = append(join.Protocols, p)
	jr, err := join.RequestWith(ctx, cl)
	if err == nil && jr.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = jr.MemberID
		jr, err = join.RequestWith(ctx, cl)
	}
	if err != nil || jr.ErrorCode != 0 {
		t.Fatalf("join: %v %+v", err, jr)
	}

	offsetDelete := func(group string, topics map[string][]int32) *kmsg.OffsetDeleteResponse {
		t.Helper()
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = group
		for topic, parts := range topics {
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = topic
			for _, p := range parts {
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	codes := func(resp *kmsg.OffsetDeleteResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[rt.Topic+"/"+string(rune('0'+rp.Partition))] = rp.ErrorCode
			}
		}
		return out
	}
	resp := offsetDelete("odg", map[string][]int32{"od": {0}, "od2": {0}})
	got := codes(resp)
	if resp.ErrorCode != 0 || got["od/0"] != kerr.GroupSubscribedToTopic.Code || got["od2/0"] != 0 {
		t.Fatalf("offset delete while subscribed: top %d, %v", resp.ErrorCode, got)
	}
	fetched, err := adm.FetchOffsets(ctx, "odg")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fetched.Lookup("od2", 0); ok {
		t.Fatalf("od2/0 still committed after its delete: %v", fetched)
	}
	if o, ok := fetched.Lookup("od", 0); !ok || o.At != 5 {
		t.Fatalf("od/0 must stay while subscribed: %+v %v", o, ok)
	}

	// DeleteGroups refuses while the member is in; once it leaves the
	// group goes with its offsets.
	del := func() int16 {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Version, r.Groups = 2, []string{"odg"}
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups[0].ErrorCode
	}
	if code := del(); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %v", kerr.ErrorForCode(code))
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "odg"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = join.MemberID
	leave.Members = append(leave.Members, lm)
	if lr, err := leave.RequestWith(ctx, cl); err != nil || lr.ErrorCode != 0 || len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %v %+v", err, lr)
	}
	if got := codes(offsetDelete("odg", map[string][]int32{"od": {0}})); got["od/0"] != 0 {
		t.Fatalf("offset delete once nobody subscribes: %v", got)
	}
	if code := del(); code != 0 {
		t.Fatalf("delete an empty group: %v", kerr.ErrorForCode(code))
	}
	if fetched, err := adm.FetchOffsets(ctx, "odg"); err != nil || len(fetched) != 0 {
		t.Fatalf("offsets after the group's delete: %v %v", fetched, err)
	}
	if code := del(); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete again: %v", kerr.ErrorForCode(code))
	}
	if resp := offsetDelete("odg", map[string][]int32{"od": {1}}); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("offset delete of an unknown group: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
