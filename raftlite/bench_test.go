package raftlite

import (
	"runtime"
	"testing"
	"unsafe"
)

// benchCluster runs groups of replicas over an in-memory transport: every
// node's logs are MemLogs, every write is durable at once, and messages are
// delivered in order.
type benchCluster struct {
	groups [][]*Node   // [group][replica]
	logs   [][]*MemLog // [group][replica]
	q      []Message
	spare  []Message // the other half of a double buffer for q
}

func newBenchCluster(tb testing.TB, groups, replicas int, lim *Limits) *benchCluster {
	c := &benchCluster{groups: make([][]*Node, groups), logs: make([][]*MemLog, groups)}
	var set ReplicaSet
	for r := 1; r <= replicas; r++ {
		set = set.Add(NodeID(r))
	}
	for g := range c.groups {
		c.groups[g] = make([]*Node, replicas)
		c.logs[g] = make([]*MemLog, replicas)
		for r := range c.groups[g] {
			c.logs[g][r] = NewMemLog()
			n, err := New(Config{ID: NodeID(r + 1), Group: GroupID(g), Replicas: set, Log: c.logs[g][r],
				Seed: uint64(g*replicas + r), Limits: lim})
			if err != nil {
				tb.Fatal(err)
			}
			c.groups[g][r] = n
		}
		// Spread the leaders evenly over the replicas.
		c.groups[g][g%replicas].Campaign()
	}
	c.pump()
	return c
}

// handle plays the node layer for one Ready.
func (c *benchCluster) handle(n *Node, log *MemLog) {
	rd := n.Ready()
	if rd.Reset != nil {
		log.Reset(rd.Reset.Start, rd.Reset.PrevTerm)
	}
	if len(rd.Entries) > 0 {
		if _, err := log.Append(rd.Entries...); err != nil {
			panic(err)
		}
	}
	c.q = append(c.q, rd.Messages...)
	n.Advance(rd)
	if len(rd.Entries) > 0 {
		last := rd.Entries[len(rd.Entries)-1]
		n.Durable(last.Last, last.Term)
	}
}

// pump handles Readys and delivers messages until nothing is left.
func (c *benchCluster) pump() {
	for {
		busy := false
		for g, nodes := range c.groups {
			for r, n := range nodes {
				if n.HasReady() {
					busy = true
					c.handle(n, c.logs[g][r])
				}
			}
		}
		if len(c.q) == 0 && !busy {
			return
		}
		q := c.q
		c.q = c.spare[:0]
		for _, m := range q {
			if err := c.groups[m.Group][m.To-1].Step(m); err != nil {
				panic(err)
			}
		}
		clear(q)
		c.spare = q
	}
}

// BenchmarkPropose measures the CPU cost of one replicated entry (a
// 100-byte batch) in a 3-node group over the in-memory transport, with
// proposals batched 64 at a time and one at a time. The 1-node group is
// the baseline measured in the same run: the ratio between them is the
// cost of replication itself.
func BenchmarkPropose(b *testing.B) {
	data := make([]byte, 100)
	for _, bc := range []struct {
		name     string
		replicas int
		batch    int
	}{
		{"nodes=1/batch=64", 1, 64},
		{"nodes=3/batch=64", 3, 64},
		{"nodes=1/batch=1", 1, 1},
		{"nodes=3/batch=1", 3, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := newBenchCluster(b, 1, bc.replicas, nil)
			leader := c.groups[0][0]
			if leader.Role() != RoleLeader {
				b.Fatal("no leader")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := leader.Propose(1, data); err != nil {
					b.Fatal(err)
				}
				if (i+1)%bc.batch == 0 || i == b.N-1 {
					c.pump()
				}
				if i%4096 == 4095 {
					// Retention keeps the in-memory logs small.
					for r, l := range c.logs[0] {
						_ = l.Compact(c.groups[0][r].Commit() + 1)
					}
				}
			}
			b.StopTimer()
			if leader.Commit() != leader.log.last() {
				b.Fatalf("commit %d, last %d", leader.Commit(), leader.log.last())
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkIdleGroups measures what 10,000 idle groups cost a node: bytes
// of memory per group replica (raftlite state plus a one-entry MemLog), and
// CPU per group per tick including the heartbeats and their answers. The
// heartbeating run is the baseline for the quiesced one.
func BenchmarkIdleGroups(b *testing.B) {
	const groups, replicas = 10000, 3
	for _, quiesce := range []bool{false, true} {
		name := "heartbeat"
		if quiesce {
			name = "quiesced"
		}
		b.Run(name, func(b *testing.B) {
			lim := DefaultLimits()
			lim.Quiesce = quiesce
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c := newBenchCluster(b, groups, replicas, lim)
			for t := 0; t < 3; t++ { // let heartbeats settle (and quiesce)
				c.tickAll()
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			// The harness's message queues are not the groups' memory.
			harness := uint64(cap(c.q)+cap(c.spare)) * uint64(unsafe.Sizeof(Message{}))
			perGroup := float64(after.HeapAlloc-before.HeapAlloc-harness) / (groups * replicas)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.tickAll()
			}
			b.StopTimer()
			b.ReportMetric(perGroup, "bytes/group")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(groups*replicas), "ns/group-tick")
			runtime.KeepAlive(c)
		})
	}
}

// tickAll ticks every replica of every group once and runs the resulting
// message exchange to the end.
func (c *benchCluster) tickAll() {
	for _, nodes := range c.groups {
		for _, n := range nodes {
			n.Tick()
		}
	}
	c.pump()
}
