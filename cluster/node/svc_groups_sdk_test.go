package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// sdkMember is a native SDK group consumer on its own client, which
// processes each record into the ledger and commits before its next
// Poll, so a clean rebalance processes nothing twice.
type sdkMember struct {
	name string
	cl   *client.Client
	gc   *client.GroupConsumer
	stop chan struct{}
	done chan struct{}
}

func startSDKMember(t *testing.T, ctx context.Context, brokers []string, group, topic, name string, led *groupLedger, session time.Duration) *sdkMember {
	t.Helper()
	cl, err := client.DialConfig(ctx, client.Config{Brokers: brokers, ClientID: name})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := cl.NewGroupConsumer(client.GroupConfig{Group: group, SessionTimeout: session, HeartbeatInterval: session / 10,
		RebalanceTimeout: 10 * time.Second, AutoCommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.Subscribe(topic); err != nil {
		t.Fatal(err)
	}
	m := &sdkMember{name: name, cl: cl, gc: gc, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			recs, err := gc.Poll(pctx)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("%s: poll: %v", name, err)
			}
			if len(recs) == 0 {
				continue
			}
			led.mu.Lock()
			for _, r := range recs {
				led.seen[string(r.Value)]++
				led.by[string(r.Value)] = name
			}
			led.mu.Unlock()
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			if err := gc.Commit(cctx); err != nil {
				t.Logf("%s: commit: %v", name, err)
			}
			ccancel()
		}
	}()
	t.Cleanup(func() {
		m.halt()
		gc.Close()
		cl.Close()
	})
	return m
}

// halt stops the member's loop (it polls no more).
func (m *sdkMember) halt() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// sdkAssigned is the group's state and each member's partition count by
// client id.
func sdkAssigned(ctx context.Context, cl *client.Client, group string) (string, map[string]int, error) {
	d, err := cl.DescribeGroup(ctx, group)
	if err != nil {
		return "", nil, err
	}
	per := map[string]int{}
	for _, m := range d.Members {
		parts, err := client.GroupAssignment(m.Assignment)
		if err != nil {
			return "", nil, err
		}
		per[m.ClientID] += len(parts)
	}
	return d.State, per, nil
}

// The scenario with the native SDK: three members share 12
// partitions of a 3-node cluster; one is killed (stops heartbeating,
// never leaves) and its partitions move to the others within its session
// timeout; every record is processed once, and the group's committed
// offsets end at the partitions' ends, readable as the named consumer's
// offsets too.
func TestSDKGroupCluster(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 150*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "sg", Partitions: 12, ReplicationFactor: 3})
	produceAll(t, ctx, cl, "sg", 0, 1200)

	const session = 3 * time.Second
	led := newGroupLedger()
	members := map[string]*sdkMember{}
	for _, name := range []string{"m1", "m2", "m3"} {
		members[name] = startSDKMember(t, ctx, tc.brokers(), "sgg", "sg", name, led, session)
	}
	clusterWait(t, 60*time.Second, "3 members with 4 partitions each", func() bool {
		st, per, err := sdkAssigned(ctx, cl, "sgg")
		return err == nil && st == "Stable" && len(per) == 3 && per["m1"] == 4 && per["m2"] == 4 && per["m3"] == 4
	})
	waitProcessed(t, led, 1200, 60*time.Second)
	if _, dup := led.count(); dup != 0 {
		t.Fatalf("%d records processed twice before any fault", dup)
	}

	// m3 is killed: it stops polling and its client closes without
	// leaving the group, so only its session's end tells the coordinator.
	members["m3"].halt()
	members["m3"].cl.Close()
	killed := time.Now()
	clusterWait(t, 30*time.Second, "m1 and m2 with 6 partitions each", func() bool {
		st, per, err := sdkAssigned(ctx, cl, "sgg")
		return err == nil && st == "Stable" && len(per) == 2 && per["m1"] == 6 && per["m2"] == 6
	})
	moved := time.Since(killed)
	t.Logf("a killed member's partitions moved in %v (session timeout %v)", moved, session)
	// The session, a tick of the coordinator, and the rebalance (the
	// others hand their partitions back at their next Poll, 300 ms).
	if limit := session + 2*time.Second; moved > limit {
		t.Errorf("partitions moved %v after the kill, over %v", moved, limit)
	}
	produceAll(t, ctx, cl, "sg", 1200, 600)
	waitProcessed(t, led, 1800, 60*time.Second)
	if _, dup := led.count(); dup != 0 {
		t.Errorf("%d records processed twice", dup)
	}

	// Every partition's committed offset is its end (the high
	// watermark: the records and a new primary's no-op batch), in the
	// group and as the named consumer of the same name.
	ends := map[int32]int64{}
	for p := int32(0); p < 12; p++ {
		lo, err := cl.ListOffsets(ctx, "sg", p, wire.TimestampLatest)
		if err != nil {
			t.Fatal(err)
		}
		ends[p] = lo.Offset
	}
	atEnds := func(offs []wire.CommittedOffset) bool {
		if len(offs) != 12 {
			return false
		}
		for _, o := range offs {
			if o.Offset != ends[o.Partition] {
				return false
			}
		}
		return true
	}
	clusterWait(t, 30*time.Second, "committed offsets at the partitions' ends", func() bool {
		offs, err := cl.FetchGroupOffsets(ctx, "sgg", nil)
		return err == nil && atEnds(offs)
	})
	if named, err := cl.FetchOffsets(ctx, "sgg", nil); err != nil || !atEnds(named) {
		t.Fatalf("the group's offsets as a named consumer's: %v %v, want the ends %v", named, err, ends)
	}
}
