package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A node that stops answers the group calls its coordinators hold (a
// JoinGroup parked for a rebalance waits up to the rebalance timeout) with
// NOT_COORDINATOR before it drains its front ends, as a Kafka broker's
// coordinator resigns at a controlled shutdown: the stop does not wait out
// the rebalance, and the client finds the group's next coordinator.
func TestStopAnswersAParkedJoin(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	join := func(instance string) *kmsg.JoinGroupRequest {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 5
		req.Group, req.ProtocolType = "parked", "consumer"
		req.InstanceID = kmsg.StringPtr(instance)
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 60000, 60000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
		req.Protocols = append(req.Protocols, p)
		return req
	}
	// The first member joins (retrying while the coordinator loads) and
	// the group forms around it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := join("a").RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == 0 {
			break
		}
		if e := kerr.ErrorForCode(resp.ErrorCode); !kerr.IsRetriable(e) || time.Now().After(deadline) {
			t.Fatalf("first join: %v", e)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A second member's join starts a rebalance and waits for the first
	// to rejoin, which it never does: parked for up to 60 s.
	parked := make(chan int16, 1)
	go func() {
		resp, err := join("b").RequestWith(ctx, cl)
		if err != nil {
			parked <- -2
			return
		}
		parked <- resp.ErrorCode
	}()
	deadline = time.Now().Add(20 * time.Second)
	for {
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{"parked"}
		resp, err := d.RequestWith(ctx, cl)
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].State == "PreparingRebalance" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second join did not start a rebalance: %+v, %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := n.Stop(sctx); err != nil {
		t.Fatalf("stop: %v after %v", err, time.Since(start))
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("stop took %v with a join parked", took)
	}
	select {
	case code := <-parked:
		if code != kerr.NotCoordinator.Code && code != -2 {
			t.Fatalf("the parked join was answered %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked join was not answered")
	}
}
