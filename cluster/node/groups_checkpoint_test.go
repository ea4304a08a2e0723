package node

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/groupshost"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
)

// A measurement, not a check: BENCHMARKS.md's __groups checkpoint
// figures.
//
//	go test ./cluster/node -run TestGroupsCheckpointFigures -v -groups-checkpoint-figures
var groupsCheckpointFiguresFlag = flag.Bool("groups-checkpoint-figures", false,
	"TestGroupsCheckpointFigures: run the __groups checkpoint measurement")

// groupsCommitRun is a 3-node cluster with one __groups partition, 1 MiB
// segments and a retention pass every 100 ms, into which one group
// commits rounds of 50 partitions.
type groupsCommitRun struct {
	t     *testing.T
	tc    *testCluster
	ctx   context.Context
	group string
	// last are the offsets of the last acknowledged commit, by partition.
	last map[int32]int64
}

const groupsCommitPartitions = 50

func startGroupsCommitRun(t *testing.T, checkpointRecords int64) *groupsCommitRun {
	tc := startCluster(t, 3, func(c *config.Config) {
		c.Cluster.GroupsPartitions = 1
		c.Cluster.GroupsCheckpointRecords, c.Cluster.GroupsCheckpointBytes = checkpointRecords, 0
		c.Storage.SegmentBytes = 1 << 20
		c.Storage.RetentionCheckIntervalMs = 100
	})
	tc.waitLoaded()
	ctx, cl := tc.dial(t, 240*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "ck", Partitions: groupsCommitPartitions, ReplicationFactor: 3})
	return &groupsCommitRun{t: t, tc: tc, ctx: ctx, group: "ckg", last: map[int32]int64{}}
}

// coordinator is the live node that coordinates the group now, nil
// while none is known.
func (g *groupsCommitRun) coordinator() *Node {
	for _, n := range g.tc.nodes {
		if n == nil {
			continue
		}
		c, err := n.groups.Find(g.group)
		if err == nil && c.NodeID > 0 && g.tc.nodes[c.NodeID-1] != nil {
			return g.tc.nodes[c.NodeID-1]
		}
	}
	return nil
}

// commit commits offset round*10+p for every partition p (metadata of
// 200 bytes, so that the log grows), retrying while the coordinator
// loads or moves.
func (g *groupsCommitRun) commit(round int) {
	g.t.Helper()
	req := &service.CommitGroupOffsetsRequest{Group: g.group, Generation: -1}
	meta := strings.Repeat("m", 200)
	for p := int32(0); p < groupsCommitPartitions; p++ {
		req.Offsets = append(req.Offsets, service.OffsetCommit{Topic: "ck", Partition: p, Offset: int64(round*10) + int64(p), Metadata: meta})
	}
	var last error
	clusterWait(g.t, 30*time.Second, fmt.Sprintf("commit round %d (last error: %v)", round, &last), func() bool {
		n := g.coordinator()
		if n == nil {
			return false
		}
		ch := make(chan error, 1)
		n.svc.CommitGroupOffsets(nil, req, func(entries []error, err error) {
			for _, e := range entries {
				if err == nil {
					err = e
				}
			}
			ch <- err
		})
		last = <-ch
		return last == nil
	})
	for _, o := range req.Offsets {
		g.last[o.Partition] = o.Offset
	}
}

// fetch is the group's committed offsets as the coordinator answers
// them, once one answers.
func (g *groupsCommitRun) fetch() map[int32]int64 {
	g.t.Helper()
	var got map[int32]int64
	clusterWait(g.t, 60*time.Second, "a coordinator to answer the group's offsets", func() bool {
		n := g.coordinator()
		if n == nil {
			return false
		}
		type answer struct {
			offs []service.CommittedOffset
			err  error
		}
		ch := make(chan answer, 1)
		n.svc.FetchGroupOffsets(nil, &service.FetchGroupOffsetsRequest{Group: g.group}, func(offs []service.CommittedOffset, err error) {
			ch <- answer{offs, err}
		})
		a := <-ch
		if a.err != nil {
			return false
		}
		got = map[int32]int64{}
		for _, o := range a.offs {
			got[o.Partition] = o.Offset
		}
		return true
	})
	return got
}

// replicaLog is node n's __groups replica's log start, size in bytes
// and segment count, read on its shard.
func replicaLog(n *Node) (start, size int64, segs int32, err error) {
	t := n.view.Load().Topics[metadata.GroupsTopic]
	if t == nil {
		return 0, 0, 0, fmt.Errorf("no %s in node %d's metadata", metadata.GroupsTopic, n.self)
	}
	i := n.shardOf(t.ID, 0)
	var missing error
	if err := n.group.Shard(i).Do(func(*shard.Shard) {
		r := n.hosts[i].Get(shardKey(t.ID, 0))
		if r == nil {
			missing = fmt.Errorf("node %d holds no replica of %s/0", n.self, metadata.GroupsTopic)
			return
		}
		l := r.Log()
		start, size, segs = l.LogStartOffset(), l.Size(), int32(l.SegmentCount())
	}); err != nil {
		return 0, 0, 0, err
	}
	return start, size, segs, missing
}

// TestGroupsCheckpointRetention commits enough offsets for several 1 MiB
// segments of __groups with a checkpoint every 2,000 records: every
// replica deletes its old segments, the log's start lies on a complete
// checkpoint, and after the coordinator's node stops the new
// coordinator's replay answers every committed offset (none lost or
// moved backwards); commits go on after it.
func TestGroupsCheckpointRetention(t *testing.T) {
	g := startGroupsCommitRun(t, 2000)
	for round := 0; round < 300; round++ { // 15,000 records, about 4 MiB
		g.commit(round)
	}
	clusterWait(t, 60*time.Second, "every replica of __groups to delete segments below a checkpoint", func() bool {
		for _, n := range g.tc.nodes {
			if start, _, _, err := replicaLog(n); err != nil || start == 0 {
				return false
			}
		}
		return true
	})
	for i, n := range g.tc.nodes {
		start, size, segs, _ := replicaLog(n)
		t.Logf("node %d: __groups log start %d, %d bytes in %d segments", i+1, start, size, segs)
		if size > 4<<20 {
			t.Errorf("node %d keeps %d bytes of __groups, more than the 4 MiB written", i+1, size)
		}
	}
	records, took := checkReplay(t, g, true)
	t.Logf("the partition replays %d records in %v", records, took.Round(time.Microsecond))

	coord := g.coordinator()
	var idx int
	for i, n := range g.tc.nodes {
		if n == coord {
			idx = i
		}
	}
	stopped := time.Now()
	g.tc.stopNode(idx)
	got := g.fetch()
	t.Logf("node %d stopped; a new coordinator answered the offsets %v later", idx+1, time.Since(stopped).Round(time.Millisecond))
	for p, want := range g.last {
		if got[p] != want {
			t.Errorf("partition %d: committed %d, the new coordinator answers %d", p, want, got[p])
		}
	}
	g.commit(300)
	if got := g.fetch(); got[7] != g.last[7] {
		t.Errorf("a commit after the failover: %d, want %d", got[7], g.last[7])
	}
}

// replayPartition reads the coordinator's __groups partition from its
// log start, as a new coordinator's load does, into a fresh coordinator
// and a checkpoint tracker: the records read and how long it took.
func replayPartition(t *testing.T, g *groupsCommitRun) (*groups.Coordinator, *groups.CheckpointTracker, int, time.Duration) {
	t.Helper()
	n := g.coordinator()
	routes, err := n.svc.GroupsRoutes()
	if err != nil || len(routes) != 1 {
		t.Fatalf("routes: %v %v", routes, err)
	}
	log := groupshost.NewPartLog(n.svc, nil, 0, routes[0].Generation, n.clock)
	c, tr := groups.New(groups.DefaultConfig), groups.NewCheckpointTracker()
	start := time.Now()
	records := 0
	for from := int64(0); ; {
		type answer struct {
			recs []groups.Record
			next int64
			err  error
		}
		ch := make(chan answer, 1)
		log.Fetch(from, func(recs []groups.Record, next int64, err error) { ch <- answer{recs, next, err} })
		a := <-ch
		recs, next, err := a.recs, a.next, a.err
		if err != nil {
			t.Fatalf("fetch at %d: %v", from, err)
		}
		if next == from {
			break
		}
		for _, r := range recs {
			tr.Observe(int64(records), r.Key, r.Value) // a position, for order only
			records++
			if err := c.Replay(start, r); err != nil {
				t.Fatalf("replay: %v", err)
			}
		}
		from = next
	}
	return c, tr, records, time.Since(start)
}

// checkReplay replays the partition and checks it holds a complete
// checkpoint (when want) and every committed offset.
func checkReplay(t *testing.T, g *groupsCommitRun, wantCheckpoint bool) (int, time.Duration) {
	t.Helper()
	c, tr, records, took := replayPartition(t, g)
	if wantCheckpoint && tr.Complete() < 0 {
		t.Fatalf("no complete checkpoint in the %d records the log keeps", records)
	}
	offs := c.Offsets(g.group, nil)
	if len(offs) != len(g.last) {
		t.Fatalf("replay of %d records holds %d offsets, %d committed", records, len(offs), len(g.last))
	}
	for _, o := range offs {
		if o.Offset != g.last[o.Partition] {
			t.Fatalf("replay: partition %d at %d, committed %d", o.Partition, o.Offset, g.last[o.Partition])
		}
	}
	return records, took
}

// TestGroupsCheckpointFigures: __groups bytes on disk and the replay of
// the partition after 300 and 1,200 commits of 50 partitions, with a
// checkpoint every 2,000 records and without checkpoints.
func TestGroupsCheckpointFigures(t *testing.T) {
	if !*groupsCheckpointFiguresFlag {
		t.Skip("a measurement: run with -groups-checkpoint-figures")
	}
	for _, rounds := range []int{300, 1200} {
		for _, every := range []int64{2000, 0} {
			t.Run(fmt.Sprintf("%d commits, checkpoint every %d", rounds, every), func(t *testing.T) {
				g := startGroupsCommitRun(t, every)
				for round := 0; round < rounds; round++ {
					g.commit(round)
				}
				if every > 0 {
					clusterWait(t, 60*time.Second, "segments deleted", func() bool {
						start, _, _, err := replicaLog(g.coordinator())
						return err == nil && start > 0
					})
				}
				_, size, segs, _ := replicaLog(g.coordinator())
				records, took := checkReplay(t, g, every > 0)
				coord := g.coordinator()
				for i, n := range g.tc.nodes {
					if n == coord {
						stopped := time.Now()
						g.tc.stopNode(i)
						g.fetch()
						t.Logf("%d commits, checkpoint every %d records: __groups %d bytes in %d segments; replay of %d records %v; failover to offsets answered in %v",
							rounds, every, size, segs, records, took.Round(time.Microsecond), time.Since(stopped).Round(time.Millisecond))
					}
				}
			})
		}
	}
}
