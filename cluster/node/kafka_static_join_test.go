package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A JoinGroup answer to the leader carries each member's
// group.instance.id (v5+), as Kafka's does: an assignor that keeps a
// static member's partitions across restarts (KIP-345) reads it there.
func TestKafkaJoinGroupCarriesInstanceID(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "static-app"
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := fc.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no coordinator: %v %+v", err, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 5
	req.Group, req.ProtocolType = "static-app", "consumer"
	req.InstanceID = kmsg.StringPtr("instance-1")
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
	req.Protocols = append(req.Protocols, p)
	var resp *kmsg.JoinGroupResponse
	for {
		var err error
		resp, err = req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the coordinator still loading: retriable
	}
	if resp.ErrorCode != 0 || resp.LeaderID != resp.MemberID || len(resp.Members) != 1 {
		t.Fatalf("join: error %d, leader %q, member %q, %d members", resp.ErrorCode, resp.LeaderID, resp.MemberID, len(resp.Members))
	}
	if got := resp.Members[0].InstanceID; got == nil || *got != "instance-1" {
		t.Fatalf("the leader's member list carries instance id %v, want instance-1", got)
	}
}
