package node

import (
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
)

// Scripted scenarios on the control-plane simulator: the sleep-and-poll
// cluster tests' stories (cluster_test.go, restart_test.go) told on
// simulated time, with every check of the seeded runs still on. They
// take milliseconds, where the real-socket versions take tens of seconds.

// quietParams is a cluster of n nodes with no faults but the script's,
// the balancer looking every 300 ms.
func quietParams(n int) *simParams {
	return &simParams{n: n, latencyMin: 2 * time.Millisecond, partitionTicks: 1, downTicksMax: 1,
		balanceEvery: 300 * time.Millisecond, imbalancePercent: 10, lagWindow: 30 * time.Second}
}

// simScript drives a scripted cluster, failing t on any violation.
type simScript struct {
	t  *testing.T
	sc *simCluster
}

func newSimScript(t *testing.T, p *simParams) *simScript {
	var trace []string
	o := simClusterOptions{Seed: 1, Trace: func(l string) { trace = append(trace, l) }}
	s := &simScript{t: t, sc: newSimCluster(o, p)}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range trace {
				t.Log(l)
			}
		}
	})
	return s
}

// run advances simulated time by d.
func (s *simScript) run(d time.Duration) {
	s.t.Helper()
	if err := s.sc.runUntil(s.sc.now + d); err != nil {
		s.t.Fatal(err)
	}
}

// wait runs until cond holds, at most limit of simulated time.
func (s *simScript) wait(limit time.Duration, what string, cond func() bool) {
	s.t.Helper()
	deadline := s.sc.now + limit
	for !cond() {
		if s.sc.now >= deadline {
			s.t.Fatalf("%v of simulated time waiting for %s", limit, what)
		}
		s.run(100 * time.Millisecond)
	}
}

// create creates a topic through node 1 (following its hint to the
// metadata primary) and waits for the acknowledgement.
func (s *simScript) create(name string, parts int) {
	s.t.Helper()
	s.wait(30*time.Second, "a metadata primary to take "+name, func() bool { return s.sc.create(s.sc.nodes[0], name, parts) })
	s.wait(30*time.Second, name+" acknowledged", func() bool { _, ok := s.sc.acked[name]; return ok })
}

// primaries counts, per node, the partitions it leads (from the groups).
func (s *simScript) primaries() map[int32]int {
	out := map[int32]int{}
	for _, nd := range s.sc.nodes {
		if !nd.up {
			continue
		}
		for _, g := range nd.groups {
			if !g.meta && g.rn.Role() == raftlite.RoleLeader {
				out[nd.id]++
			}
		}
	}
	return out
}

// TestClusterBalancerRestoresBalance's story: 12 partitions spread 4/4/4,
// a node stops and its primaries move to the others, it returns and the
// balancer moves 4 back, one at a time.
func TestSimBalancerRestoresBalance(t *testing.T) {
	s := newSimScript(t, quietParams(3))
	s.create("orders", 12)
	even := func() bool { p := s.primaries(); return p[1] == 4 && p[2] == 4 && p[3] == 4 }
	s.wait(30*time.Second, "4 primaries per node", even)
	s.sc.nodes[2].crash()
	s.wait(30*time.Second, "primaries on the two live nodes", func() bool { p := s.primaries(); return p[1]+p[2] == 12 })
	returned := s.sc.now
	s.sc.nodes[2].start()
	s.wait(60*time.Second, "4 primaries per node again", even)
	var started, finished, failed uint64
	s.wait(10*time.Second, "no move in flight", func() bool {
		started, finished, failed = 0, 0, 0
		for _, nd := range s.sc.nodes {
			started += nd.stats.Started.Load()
			finished += nd.stats.Finished.Load()
			failed += nd.stats.Failed.Load()
		}
		return started == finished+failed
	})
	t.Logf("balanced %v of simulated time after node 3 returned; moves: %d started, %d finished, %d failed",
		s.sc.now-returned, started, finished, failed)
	if finished < 4 {
		t.Fatalf("only %d moves finished", finished)
	}
	s.wait(10*time.Second, "the cluster to settle", func() bool { return s.sc.settled() == "" })
}

// TestWholeClusterRestartServesNoPartialMetadata's story, with metadata
// snapshots: after a whole-cluster restart a node alone does not load
// its metadata (no primary to follow); once a quorum runs, every node
// loads with every topic, including a follower whose snapshot covers
// everything committed (seed 146's bug).
func TestSimWholeClusterRestart(t *testing.T) {
	p := quietParams(3)
	p.snapEvery = 2
	s := newSimScript(t, p)
	for _, name := range []string{"orders", "payments", "audit"} {
		s.create(name, 2)
	}
	s.wait(30*time.Second, "every node to apply the topics", func() bool {
		for _, nd := range s.sc.nodes {
			if len(nd.view.Sorted) != 3 {
				return false
			}
		}
		return true
	})
	for _, nd := range s.sc.nodes {
		nd.crash()
	}
	s.run(time.Second)
	s.sc.nodes[0].start()
	s.run(10 * time.Second)
	if s.sc.nodes[0].loaded {
		t.Fatal("a node restarted alone loaded its metadata without a primary to follow")
	}
	s.sc.nodes[1].start()
	s.wait(30*time.Second, "nodes 1 and 2 to load", func() bool { return s.sc.nodes[0].loaded && s.sc.nodes[1].loaded })
	s.sc.nodes[2].start()
	s.wait(30*time.Second, "node 3 to load", func() bool { return s.sc.nodes[2].loaded })
	for _, nd := range s.sc.nodes {
		if len(nd.view.Sorted) != 3 {
			t.Fatalf("node %d loaded with %d topics, want 3", nd.id, len(nd.view.Sorted))
		}
	}
	s.wait(60*time.Second, "the cluster to settle", func() bool { return s.sc.settled() == "" })
}

// TestRestartFromCompleteSnapshotLoads's story (seed 146's bug): a
// follower restarted, in a quiet cluster, from a snapshot that covers
// everything committed loads once it follows the primary, with no new
// metadata write to apply.
func TestSimFollowerRestartFromCompleteSnapshot(t *testing.T) {
	p := quietParams(3)
	p.snapEvery = 1
	s := newSimScript(t, p)
	s.create("quiet", 1)
	var lead *simNode
	s.wait(30*time.Second, "every node's snapshot to cover the commit", func() bool {
		lead = nil
		for _, nd := range s.sc.nodes {
			if nd.meta.rn.Role() == raftlite.RoleLeader {
				lead = nd
			}
		}
		if lead == nil {
			return false
		}
		for _, nd := range s.sc.nodes {
			if nd.core.Applied() != lead.meta.rn.Commit() || nd.meta.log.StartOffset() != nd.core.Applied()+1 {
				return false
			}
		}
		return true
	})
	f := s.sc.nodes[lead.id%3] // a follower
	// Back within the liveness timeout, so that no peer sees it down and
	// no election brings a new term whose no-op would load it anyway.
	f.crash()
	s.run(300 * time.Millisecond)
	f.start()
	s.wait(10*time.Second, "the restarted follower to load", func() bool { return f.loaded })
	if lead.meta.rn.Role() != raftlite.RoleLeader {
		t.Fatalf("the metadata primary changed (now node %d in term %d): the story needs a quiet cluster", lead.meta.rn.Leader(), lead.meta.rn.Term())
	}
}
