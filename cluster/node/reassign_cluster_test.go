package node

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/raftlite"
)

// onMeta runs fn on node n's shard metaShard and waits for it.
func onMeta(t *testing.T, n *Node, fn func()) {
	t.Helper()
	done := make(chan struct{})
	if err := n.group.Shard(metaShard).Post(func() { fn(); close(done) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("shard metaShard did not run a posted function within 30 s")
	}
}

// metaPrimary returns the running node that leads the metadata group, or
// nil.
func (tc *testCluster) metaPrimary(t *testing.T) *Node {
	for _, n := range tc.nodes {
		if n == nil {
			continue
		}
		var lead bool
		onMeta(t, n, func() { lead = n.ctrl != nil && n.ctrl.r.IsPrimary() })
		if lead {
			return n
		}
	}
	return nil
}

// reassign asks the metadata primary to move partition p of topic to
// target, retrying while no primary is known or the proposal is refused
// for that; it returns the first other answer.
func (tc *testCluster) reassign(t *testing.T, topic string, p int32, target []metadata.NodeID, dryRun bool) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := tc.metaPrimary(t)
		if n != nil {
			errc := make(chan error, 1)
			onMeta(t, n, func() { n.ctrl.reas.ReassignPartition(topic, p, target, 0, dryRun, func(err error) { errc <- err }) })
			err := <-errc
			if err == nil || !strings.Contains(err.Error(), "NOT_PRIMARY") && !strings.Contains(strings.ToLower(err.Error()), "not the primary") {
				return err
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no metadata primary took the reassignment within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replicasOf reads partition p's replica list and whether it is moving,
// from node n's applied metadata.
func replicasOf(n *Node, topic string, p int) ([]metadata.NodeID, bool) {
	v := n.view.Load()
	tp := v.Topics[topic]
	if tp == nil {
		return nil, false
	}
	return tp.Replicas[p], v.Moving[shardKey(tp.ID, int32(p))] != nil
}

// startMoveCluster starts 4 nodes and creates topic "move" of parts
// partitions, factor 3, on nodes 1-3 (node 4 is down meanwhile); targets
// are the lists with node 1 replaced by node 4.
func startMoveCluster(t *testing.T, parts int, mutate func(*config.Config)) (*testCluster, context.Context, *client.Client, [][]metadata.NodeID) {
	t.Helper()
	tc := startCluster(t, 4, mutate)
	ctx, cl := tc.dial(t, 240*time.Second)
	// Node 4 is down while the topic is created, so its replicas land on
	// nodes 1-3.
	tc.stopNode(3)
	clusterWait(t, 30*time.Second, "node 4 seen down", func() bool {
		n := tc.metaPrimary(t)
		return n != nil && !n.alive(4)
	})
	createTopic(t, ctx, cl, client.TopicSpec{Name: "move", Partitions: int32(parts), ReplicationFactor: 3})
	tc.startNode(3)
	tc.waitLoaded()
	clusterWait(t, 30*time.Second, "node 4 seen up", func() bool {
		n := tc.metaPrimary(t)
		return n != nil && n.alive(4)
	})
	targets := make([][]metadata.NodeID, parts)
	for p := range parts {
		reps, _ := replicasOf(tc.nodes[0], "move", p)
		for _, id := range reps {
			if id == 4 {
				t.Fatalf("partition %d was placed on node 4: %v", p, reps)
			}
			if id == 1 {
				id = 4
			}
			targets[p] = append(targets[p], id)
		}
	}

	return tc, ctx, cl, targets
}

// TestClusterReassignUnderProduce moves every replica of a factor-3 topic
// from nodes 1-3 onto 2-4 while an idempotent producer writes one record
// at a time: nothing acknowledged is lost, node 1 ends up holding
// nothing of the topic, and bad plans are refused with what is wrong.
func TestClusterReassignUnderProduce(t *testing.T) {
	const parts = 6
	tc, ctx, cl, targets := startMoveCluster(t, parts, nil)
	// Bad plans.
	createTopic(t, ctx, cl, client.TopicSpec{Name: "gone", Partitions: 1, ReplicationFactor: 3})
	if _, err := cl.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		topic  string
		target []metadata.NodeID
		text   string
	}{
		{"move", []metadata.NodeID{2, 3, 9}, "node 9 is not in the roster"},
		{"move", []metadata.NodeID{2, 4}, "replication factor is 3"},
		{"move", []metadata.NodeID{2, 2, 4}, "node 2 is listed twice"},
		{"gone", []metadata.NodeID{2, 3, 4}, `"gone" does not exist`},
	}
	for _, b := range bad {
		var reps []int32
		for _, id := range b.target {
			reps = append(reps, int32(id))
		}
		_, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignStart, Moves: []wire.ReassignMove{{Topic: b.topic, Partition: 0, Replicas: reps}}})
		if err == nil || !strings.Contains(err.Error(), b.text) {
			t.Fatalf("reassign %s/0 to %v: %v, want an error with %q", b.topic, b.target, err, b.text)
		}
	}
	plan := &wire.ReassignRequest{Action: wire.ReassignStart}
	for p := range parts {
		plan.Moves = append(plan.Moves, wire.ReassignMove{Topic: "move", Partition: int32(p), Replicas: int32s(targets[p])})
	}
	// A plan with one bad move starts none.
	badPlan := *plan
	badPlan.Moves = append(append([]wire.ReassignMove(nil), plan.Moves...), wire.ReassignMove{Topic: "move", Partition: 0, Replicas: []int32{2, 3, 4}})
	if _, err := cl.Reassign(ctx, &badPlan); err == nil || !strings.Contains(err.Error(), "names move/0 twice") {
		t.Fatalf("a plan naming a partition twice: %v", err)
	}
	dry := *plan
	dry.DryRun = true
	if resp, err := cl.Reassign(ctx, &dry); err != nil || len(resp.Moves) != parts {
		t.Fatalf("dry run: %+v, %v", resp, err)
	}
	if resp, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignList}); err != nil || len(resp.Moves) != 0 {
		t.Fatalf("moves after a refused plan and a dry run: %+v, %v", resp, err)
	}

	// The producer: one record at a time, keyed over every partition.
	load := startSteadyLoad(ctx, cl, "move", 1<<18)
	clusterWait(t, 30*time.Second, "the producer under way", func() bool { return len(load.acks) >= 200 })

	began := time.Now()
	resp, err := cl.Reassign(ctx, plan)
	if err != nil || len(resp.Moves) != parts {
		t.Fatalf("start the plan: %+v, %v", resp, err)
	}
	other := []metadata.NodeID{targets[0][2], targets[0][1], targets[0][0]}
	if err := tc.reassign(t, "move", 0, other, false); err == nil || !strings.Contains(err.Error(), "in progress") {
		t.Fatalf("a second move of a moving partition: %v", err)
	}
	if resp, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignList}); err != nil || len(resp.Moves) == 0 {
		t.Fatalf("list while moving: %+v, %v", resp, err)
	} else {
		t.Logf("in progress: %+v", resp.Moves[0])
	}
	finished := make([]time.Duration, parts)
	clusterWait(t, 180*time.Second, "every move complete on every node", func() bool {
		all := true
		for p := range parts {
			for _, n := range tc.nodes {
				reps, moving := replicasOf(n, "move", p)
				if moving || fmt.Sprint(reps) != fmt.Sprint(targets[p]) {
					all = false
				}
			}
			if reps, moving := replicasOf(tc.nodes[1], "move", p); finished[p] == 0 && !moving && fmt.Sprint(reps) == fmt.Sprint(targets[p]) {
				finished[p] = time.Since(began)
			}
		}
		return all
	})
	took := time.Since(began)
	clusterWait(t, 30*time.Second, "node 1 to close its replicas of the topic", func() bool {
		n := tc.nodes[0]
		v := n.view.Load()
		tp := v.Topics["move"]
		open := 0
		for i, h := range n.hosts {
			_ = i
			for p := range parts {
				if h.Get(shardKey(tp.ID, int32(p))) != nil {
					open++
				}
			}
		}
		return open == 0
	})
	// Node 1 hosts nothing of the topic now but still routes clients to
	// its primaries.
	for p := range parts {
		tp := tc.nodes[0].view.Load().Topics["move"]
		if rt, ok := tc.nodes[0].routes.Get(shardKey(tp.ID, int32(p))); !ok || rt.Leader <= 0 {
			t.Fatalf("node 1 lost the route of move/%d when its replica moved off: %+v, %v", p, rt, ok)
		}
	}
	// The producer keeps going a moment on the new replicas.
	n0 := len(load.acks)
	clusterWait(t, 30*time.Second, "the producer past the moves", func() bool { return len(load.acks) >= n0+200 })
	if err := load.stop(); err != nil {
		t.Fatal(err)
	}
	count := checkAckedRead(t, ctx, cl, "move", int32(parts), load.acks)
	var during []time.Duration
	for _, s := range load.lat {
		if !s.at.Before(began) && s.at.Before(began.Add(took)) {
			during = append(during, s.d)
		}
	}
	sort.Slice(during, func(i, j int) bool { return during[i] < during[j] })
	var p50, p99 time.Duration
	if len(during) > 0 {
		p50, p99 = during[len(during)/2], during[len(during)*99/100]
	}
	t.Logf("%d records acknowledged and read back; %d moves took %v in all (each done at %v); produce during the moves: %d records, p50 %v, p99 %v",
		count, parts, took, finished, len(during), p50, p99)
}

// TestClusterReassignResumesAfterMetaFailover stops the metadata primary
// while a plan's moves run one at a time: the next metadata primary
// resumes them from the metadata, and every record is there after.
func TestClusterReassignResumesAfterMetaFailover(t *testing.T) {
	const parts = 4
	tc, ctx, cl, targets := startMoveCluster(t, parts, func(c *config.Config) { c.Cluster.ReassignConcurrency = 1 })
	want := produceAll(t, ctx, cl, "move", 0, 2000)
	for p := range parts {
		if err := tc.reassign(t, "move", int32(p), targets[p], false); err != nil {
			t.Fatalf("reassign move/%d: %v", p, err)
		}
	}
	done := func(n *Node) int {
		c := 0
		for p := range parts {
			if reps, moving := replicasOf(n, "move", p); !moving && fmt.Sprint(reps) == fmt.Sprint(targets[p]) {
				c++
			}
		}
		return c
	}
	var old *Node
	clusterWait(t, 60*time.Second, "the first move done", func() bool {
		old = tc.metaPrimary(t)
		return old != nil && done(old) >= 1
	})
	if done(old) == parts {
		t.Fatal("every move finished before the metadata primary stopped: nothing to resume")
	}
	stopped := int(old.self) - 1
	tc.stopNode(stopped)
	clusterWait(t, 60*time.Second, "a new metadata primary", func() bool { return tc.metaPrimary(t) != nil })
	tc.startNode(stopped)
	tc.waitLoaded()
	clusterWait(t, 120*time.Second, "every move complete on every node", func() bool {
		for _, n := range tc.nodes {
			if done(n) != parts {
				return false
			}
		}
		return true
	})
	clusterWait(t, 30*time.Second, "every node's route to a primary among the new replicas", func() bool {
		for _, n := range tc.nodes {
			for p := range parts {
				tp := n.view.Load().Topics["move"]
				rt, ok := n.routes.Get(shardKey(tp.ID, int32(p)))
				if !ok || !hosts(targets[p], raftlite.NodeID(rt.Leader)) {
					return false
				}
			}
		}
		return true
	})
	sameValues(t, consumeAll(t, ctx, cl, "move", int32(parts)), want)
}

// TestClusterReassignCancel cancels a move that waits its turn (one move
// at a time): it completes to the list it started from, and the target
// node holds no replica of it after.
func TestClusterReassignCancel(t *testing.T) {
	const parts = 2
	tc, ctx, cl, targets := startMoveCluster(t, parts, func(c *config.Config) { c.Cluster.ReassignConcurrency = 1 })
	from, _ := replicasOf(tc.nodes[0], "move", 1)
	from = append([]metadata.NodeID(nil), from...)
	plan := &wire.ReassignRequest{Action: wire.ReassignStart}
	for p := range parts {
		plan.Moves = append(plan.Moves, wire.ReassignMove{Topic: "move", Partition: int32(p), Replicas: int32s(targets[p])})
	}
	if _, err := cl.Reassign(ctx, plan); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignCancel, Moves: []wire.ReassignMove{{Topic: "move", Partition: 1}}})
	if err != nil || len(resp.Moves) != 1 || !resp.Moves[0].Cancelled || fmt.Sprint(resp.Moves[0].Target) != fmt.Sprint(int32s(from)) {
		t.Fatalf("cancel: %+v, %v", resp, err)
	}
	clusterWait(t, 60*time.Second, "both moves ended on every node", func() bool {
		for _, n := range tc.nodes {
			r0, m0 := replicasOf(n, "move", 0)
			r1, m1 := replicasOf(n, "move", 1)
			if m0 || m1 || fmt.Sprint(r0) != fmt.Sprint(targets[0]) || fmt.Sprint(r1) != fmt.Sprint(from) {
				return false
			}
		}
		return true
	})
	clusterWait(t, 30*time.Second, "node 4 without a replica of move/1", func() bool {
		n := tc.nodes[3]
		tp := n.view.Load().Topics["move"]
		for _, h := range n.hosts {
			if h.Get(shardKey(tp.ID, 1)) != nil {
				return false
			}
		}
		return true
	})
	if _, err := cl.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignCancel, Moves: []wire.ReassignMove{{Topic: "move", Partition: 1}}}); err == nil ||
		!strings.Contains(err.Error(), "no reassignment in progress") {
		t.Fatalf("cancel of a move that ended: %v", err)
	}
}

// TestClusterReassignFigures (run with CORESTREAM_REASSIGN_FIGURES=1)
// measures one move of a partition holding 64 MiB: the new replica's
// catch-up rate without a throttle.
func TestClusterReassignFigures(t *testing.T) {
	if os.Getenv("CORESTREAM_REASSIGN_FIGURES") == "" {
		t.Skip("a measurement: set CORESTREAM_REASSIGN_FIGURES=1")
	}
	const valueBytes, records = 16 << 10, 4096
	tc, ctx, cl, targets := startMoveCluster(t, 1, nil)
	fillMovePartition(t, ctx, cl, records, valueBytes)
	began := time.Now()
	if err := tc.reassign(t, "move", 0, targets[0], false); err != nil {
		t.Fatal(err)
	}
	clusterWait(t, 180*time.Second, "the move complete", func() bool {
		reps, moving := replicasOf(tc.nodes[1], "move", 0)
		return !moving && fmt.Sprint(reps) == fmt.Sprint(targets[0])
	})
	took := time.Since(began)
	mib := float64(valueBytes*records) / (1 << 20)
	t.Logf("moved %.0f MiB in %v: %.0f MiB/s", mib, took, mib/took.Seconds())
}

// fillMovePartition writes records values of valueBytes (each led by its
// index) to partition 0 of topic "move", every one acknowledged, so that
// a move has a log of a known size to copy.
func fillMovePartition(t *testing.T, ctx context.Context, cl *client.Client, records, valueBytes int) {
	t.Helper()
	p, err := cl.NewProducer(ctx, client.ProducerConfig{Linger: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	val := make([]byte, valueBytes)
	for i := range records {
		if err := p.ProduceAsync(ctx, client.Record{Topic: "move", Value: append([]byte(fmt.Sprint(i)), val...)}, func(_ client.Produced, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// int32s is ids as int32s, as a plan names them.
func int32s(ids []metadata.NodeID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
