package node

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/raftlite"
)

// staticRoster is a fixed roster for a hand-built service.
func staticRoster(r []config.RosterNode) func() []config.RosterNode {
	return func() []config.RosterNode { return r }
}

// changeRoster sends req to the metadata primary, retrying while none
// is known or it just lost the role; it returns the first other answer.
func (tc *testCluster) changeRoster(t *testing.T, req service.RosterRequest) (service.RosterResult, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := tc.metaPrimary(t); n != nil {
			type answer struct {
				res service.RosterResult
				err error
			}
			ch := make(chan answer, 1)
			onMeta(t, n, func() { n.ctrl.changeRoster(&req, func(r service.RosterResult, err error) { ch <- answer{r, err} }) })
			a := <-ch
			if !errors.Is(a.err, service.ErrNotMetadataPrimary) && !errors.Is(a.err, service.ErrMetadataNotReady) {
				return a.res, a.err
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no metadata primary took the roster change within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rosterOf is node n's applied roster as "id:state" items.
func rosterOf(n *Node) string {
	var out []string
	for _, m := range n.view.Load().Roster {
		out = append(out, fmt.Sprintf("%d:%s", m.ID, m.State))
	}
	return strings.Join(out, " ")
}

// metaConf is the metadata group's configuration on node n.
func metaConf(t *testing.T, n *Node) raftlite.Membership {
	var c raftlite.Membership
	onMeta(t, n, func() { c = n.ctrl.r.Membership() })
	return c
}

// addJoiningNode starts node id with cluster.join, its cluster.nodes the
// current roster plus itself, as an operator would.
func (tc *testCluster) addJoiningNode(t *testing.T, id int) config.RosterNode {
	t.Helper()
	self := tc.joiningConfig(t, id)
	tc.startNode(len(tc.cfgs) - 1)
	return self
}

// joiningConfig appends node id's configuration (cluster.join) to the
// cluster's, without starting it.
func (tc *testCluster) joiningConfig(t *testing.T, id int) config.RosterNode {
	t.Helper()
	ports := freePorts(t, 2)
	self := config.RosterNode{ID: id, ClientAddr: ports[0], ReplicationAddr: ports[1]}
	cfg := tc.cfgs[0]
	cfg.Node.ID = id
	cfg.Node.DataDir = t.TempDir()
	cfg.Node.ClientAddr, cfg.Node.ReplicationAddr = self.ClientAddr, self.ReplicationAddr
	cfg.Cluster.Nodes = append(append([]config.RosterNode(nil), tc.cfgs[0].Cluster.Nodes...), self)
	cfg.Cluster.Join = true
	tc.cfgs = append(tc.cfgs, cfg)
	return self
}

func member(r config.RosterNode) service.RosterMember {
	return service.RosterMember{ID: int32(r.ID), ClientAddr: r.ClientAddr, ReplicationAddr: r.ReplicationAddr, HTTPAddr: r.HTTPAddr, Rack: r.Rack}
}

// TestClusterGrowsAndShrinks: a 3-node cluster grows to 4 (the new node
// catches up the metadata log, every node lists it, a new topic places
// replicas on it and it leads some), refuses bad changes, and shrinks
// back once the new node is empty.
func TestClusterGrowsAndShrinks(t *testing.T) {
	tc := startCluster(t, 3, func(c *config.Config) { c.Cluster.LeaderBalanceIntervalMs = 500 })
	clusterWait(t, 30*time.Second, "the roster to be recorded on every node", func() bool {
		for _, n := range tc.nodes {
			if rosterOf(n) != "1:active 2:active 3:active" {
				return false
			}
		}
		return true
	})
	four := tc.addJoiningNode(t, 4)
	// The add goes through the native protocol, as the CLI sends it.
	ctx, cl := tc.dial(t, 120*time.Second)
	added, err := cl.ChangeRoster(ctx, &wire.ChangeRosterRequest{Action: wire.RosterAdd,
		Member: wire.RosterMember{ID: 4, ClientAddr: four.ClientAddr, ReplicationAddr: four.ReplicationAddr}})
	if err != nil {
		t.Fatalf("add node 4: %v", err)
	}
	if n := len(added.Members); n != 4 || added.Members[3].State != "joining" {
		t.Fatalf("the add answered the roster %+v", added.Members)
	}
	clusterWait(t, 60*time.Second, "node 4 to be active on every node and a voter of the metadata group", func() bool {
		for _, n := range tc.nodes {
			if rosterOf(n) != "1:active 2:active 3:active 4:active" {
				return false
			}
		}
		p := tc.metaPrimary(t)
		return p != nil && metaConf(t, p).Voters.Has(4) && tc.nodes[3].metaLoaded.Load()
	})
	if got := tc.nodes[3].view.Load().Applied; got < 0 {
		t.Fatalf("node 4 applied nothing of the metadata log (%d)", got)
	}

	// Refusals, each leaving the roster as it is.
	refusals := []struct {
		name string
		req  service.RosterRequest
		want string
	}{
		{"id in use", service.RosterRequest{Action: service.RosterAdd, Member: service.RosterMember{ID: 2, ClientAddr: "127.0.0.1:1", ReplicationAddr: "127.0.0.1:2"}}, "node id 2 is already in the roster"},
		{"33rd node", service.RosterRequest{Action: service.RosterAdd, Member: service.RosterMember{ID: 33, ClientAddr: "127.0.0.1:1", ReplicationAddr: "127.0.0.1:2"}}, "outside 1..32"},
		{"unknown node", service.RosterRequest{Action: service.RosterRemove, Member: service.RosterMember{ID: 9}}, "node 9 is not in the roster"},
	}
	for _, r := range refusals {
		if _, err := tc.changeRoster(t, r.req); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Fatalf("%s: %v, want %q", r.name, err, r.want)
		}
	}

	listed, err := cl.ChangeRoster(ctx, &wire.ChangeRosterRequest{Action: wire.RosterList})
	if err != nil || len(listed.Members) != 4 || listed.Members[3].State != "active" || listed.Members[3].ReplicationAddr != four.ReplicationAddr {
		t.Fatalf("roster listed by a client: %+v, %v", listed, err)
	}

	// Placement and the balancer use node 4.
	createTopic(t, ctx, cl, client.TopicSpec{Name: "grown", Partitions: 8, ReplicationFactor: 3})
	tp := tc.nodes[0].view.Load().Topics["grown"]
	on4 := 0
	for _, reps := range tp.Replicas {
		for _, id := range reps {
			if id == 4 {
				on4++
			}
		}
	}
	if on4 == 0 {
		t.Fatalf("no replica of the new topic on node 4: %v", tp.Replicas)
	}
	t.Logf("new topic replicas: %v (%d on node 4)", tp.Replicas, on4)
	clusterWait(t, 60*time.Second, "node 4 to lead partitions", func() bool { return primaries(t, cl)[4] > 0 })
	// The balancer weighs node 4 among the nodes it moves primaries to.
	var p *Node
	clusterWait(t, 30*time.Second, "a metadata primary", func() bool { p = tc.metaPrimary(t); return p != nil })
	var balanced []int32
	onMeta(t, p, func() {
		for _, bn := range p.ctrl.bal.View().Nodes {
			balanced = append(balanced, bn.ID)
		}
	})
	if fmt.Sprint(balanced) != "[1 2 3 4]" {
		t.Fatalf("the balancer looks at nodes %v", balanced)
	}
	produced := produceAll(t, ctx, cl, "grown", 0, 200)
	sameValues(t, consumeAll(t, ctx, cl, "grown", 8), produced)

	// Node 4 holds replicas: its removal is refused until they are gone.
	if _, err := tc.changeRoster(t, service.RosterRequest{Action: service.RosterRemove, Member: service.RosterMember{ID: 4}}); !errors.Is(err, service.ErrInvalidRequest) ||
		!strings.Contains(err.Error(), "node 4 holds") || !strings.Contains(err.Error(), "drain it first") {
		t.Fatalf("removing node 4 with %d replicas: %v", on4, err)
	}
	if _, err := cl.DeleteTopic(ctx, "grown"); err != nil {
		t.Fatal(err)
	}
	res, err := tc.changeRoster(t, service.RosterRequest{Action: service.RosterRemove, Member: service.RosterMember{ID: 4}})
	if err != nil {
		t.Fatalf("removing the empty node 4: %v", err)
	}
	if got := res.Members[3]; got.ID != 4 || got.State != string(metadata.MemberLeaving) {
		t.Fatalf("after the removal's start node 4 is %+v", got)
	}
	clusterWait(t, 60*time.Second, "node 4 to leave the roster and the metadata group", func() bool {
		for _, n := range tc.nodes[:3] {
			if rosterOf(n) != "1:active 2:active 3:active" {
				return false
			}
		}
		p := tc.metaPrimary(t)
		return p != nil && !metaConf(t, p).Members().Has(4)
	})
	tc.stopNode(3)

	// Removing node 2 while node 3 is down would leave one live voter of
	// two: refused.
	tc.stopNode(2)
	clusterWait(t, 30*time.Second, "node 3 to be seen down", func() bool { return !tc.nodes[0].alive(3) })
	_, err = tc.changeRoster(t, service.RosterRequest{Action: service.RosterRemove, Member: service.RosterMember{ID: 2}})
	if err == nil || !strings.Contains(err.Error(), "a quorum needs 2") {
		t.Fatalf("removing node 2 with node 3 down: %v", err)
	}
}

// TestClusterAddResumesAfterMetadataPrimaryStops: the metadata primary
// stops while node 4 is a learner that cannot catch up (it is not
// started yet). The two nodes left keep a quorum (a learner does not
// count), the new metadata primary resumes the add, and once node 4
// starts it is promoted and made active; the stopped node comes back into
// a group of four voters.
func TestClusterAddResumesAfterMetadataPrimaryStops(t *testing.T) {
	tc := startCluster(t, 3, nil)
	clusterWait(t, 30*time.Second, "the roster to be recorded", func() bool { return rosterOf(tc.nodes[0]) == "1:active 2:active 3:active" })
	four := tc.joiningConfig(t, 4)
	if _, err := tc.changeRoster(t, service.RosterRequest{Action: service.RosterAdd, Member: member(four)}); err != nil {
		t.Fatalf("add node 4: %v", err)
	}
	var old *Node
	clusterWait(t, 30*time.Second, "node 4 to be a learner of the metadata group", func() bool {
		old = tc.metaPrimary(t)
		return old != nil && metaConf(t, old).Learners.Has(4)
	})
	oldIdx := int(old.self) - 1
	tc.stopNode(oldIdx)
	var next *Node
	clusterWait(t, 60*time.Second, "a new metadata primary among the two nodes left", func() bool {
		next = tc.metaPrimary(t)
		return next != nil
	})
	if c := metaConf(t, next); !c.Learners.Has(4) || c.Voters.Len() != 3 {
		t.Fatalf("the new metadata primary's configuration is %v, want 3 voters and learner 4", c)
	}
	if got := rosterOf(next); got != "1:active 2:active 3:active 4:joining" {
		t.Fatalf("roster on the new metadata primary: %s", got)
	}
	tc.startNode(3)
	clusterWait(t, 60*time.Second, "node 4 to be promoted and active", func() bool {
		p := tc.metaPrimary(t)
		return p != nil && metaConf(t, p).Voters.Has(4) && rosterOf(p) == "1:active 2:active 3:active 4:active"
	})
	tc.startNode(oldIdx)
	clusterWait(t, 60*time.Second, "the stopped node to rejoin a group of four voters", func() bool {
		n := tc.nodes[oldIdx]
		return n.metaLoaded.Load() && rosterOf(n) == "1:active 2:active 3:active 4:active" && metaConf(t, n).Voters.Len() == 4
	})
}

// TestClusterRestartsWithAnAddedNode: after node 4 joined, the whole
// cluster stops and only nodes 1, 2 and 4 start again. The metadata group
// has four voters, so 1 and 2 need node 4's vote, and their cluster.nodes
// does not name it: they dial it from the roster file they kept.
func TestClusterRestartsWithAnAddedNode(t *testing.T) {
	tc := startCluster(t, 3, nil)
	clusterWait(t, 30*time.Second, "the roster to be recorded", func() bool { return rosterOf(tc.nodes[0]) == "1:active 2:active 3:active" })
	four := tc.addJoiningNode(t, 4)
	if _, err := tc.changeRoster(t, service.RosterRequest{Action: service.RosterAdd, Member: member(four)}); err != nil {
		t.Fatalf("add node 4: %v", err)
	}
	clusterWait(t, 60*time.Second, "node 4 to be active on every node", func() bool {
		for _, n := range tc.nodes {
			if rosterOf(n) != "1:active 2:active 3:active 4:active" {
				return false
			}
		}
		return true
	})
	for i := range tc.nodes {
		tc.stopNode(i)
	}
	for _, i := range []int{0, 1, 3} {
		tc.startNode(i)
	}
	clusterWait(t, 60*time.Second, "nodes 1, 2 and 4 to elect a metadata primary and load the metadata", func() bool {
		for _, i := range []int{0, 1, 3} {
			if !tc.nodes[i].metaLoaded.Load() {
				return false
			}
		}
		p := tc.metaPrimary(t)
		return p != nil && metaConf(t, p).Voters.Len() == 4
	})
}

// TestClusterJoinsAfterMetadataCompaction: the metadata log was compacted
// past its start, so the new node, a learner, gets the metadata snapshot
// (roster included) with a log reset, and is promoted from there.
func TestClusterJoinsAfterMetadataCompaction(t *testing.T) {
	old := metaSnapshotEvery
	metaSnapshotEvery = 50
	t.Cleanup(func() { metaSnapshotEvery = old })
	tc := startCluster(t, 3, func(c *config.Config) { c.Storage.SegmentBytes = 1 << 20 })
	ctx, cl := tc.dial(t, 120*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "kept", Partitions: 1, ReplicationFactor: 3})
	// Offsets are written into the metadata group itself (commits now go
	// to __groups), so that its log grows past a snapshot and compacts.
	md := strings.Repeat("m", 3500)
	s := metaPrimaryByRoute(t, tc)
	for i := 0; i < 1000; i++ {
		if err := commitMetaOffsets(s, "c", []service.OffsetCommit{{Topic: "kept", Offset: int64(i), Metadata: md}}); err != nil {
			t.Fatal(err)
		}
	}
	four := tc.addJoiningNode(t, 4)
	if _, err := tc.changeRoster(t, service.RosterRequest{Action: service.RosterAdd, Member: member(four)}); err != nil {
		t.Fatalf("add node 4: %v", err)
	}
	n4 := tc.nodes[3]
	clusterWait(t, 60*time.Second, "node 4 to be active and to hold the latest committed offset", func() bool {
		var off int64 = -1
		onMeta(t, n4, func() {
			if c, ok := n4.ctrl.State().Committed("c", metadata.OffsetKey{Topic: "kept", Partition: 0}); ok {
				off = c.Offset
			}
		})
		return off == 999 && rosterOf(n4) == "1:active 2:active 3:active 4:active"
	})
	var installed int
	onMeta(t, n4, func() { installed = n4.ctrl.installed })
	if installed == 0 {
		t.Fatal("node 4 caught up without a snapshot: the test did not compact the metadata log")
	}
}
