package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// freePorts picks n loopback ports that are free now (listen on :0, then
// close) and that no earlier call of this test binary handed out: the
// kernel gives a closed port out again, and a test that takes ports in two
// calls (HTTP ports, then the cluster's) got the same port twice.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for attempts := 0; len(out) < n; attempts++ {
		if attempts > 100*n {
			t.Fatalf("no %d fresh loopback ports after %d attempts", n, attempts)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		if a := l.Addr().String(); !portsGiven[a] {
			portsGiven[a] = true
			out = append(out, a)
		}
	}
	return out
}

// portsGiven are the ports freePorts handed out, guarded by portsMu.
var (
	portsMu    sync.Mutex
	portsGiven = map[string]bool{}
)

// cluster is n nodes in this process.
type testCluster struct {
	t     *testing.T
	nodes []*Node
	cfgs  []config.Config
}

func startCluster(t *testing.T, size int, mutate func(*config.Config)) *testCluster {
	t.Helper()
	ports := freePorts(t, 2*size)
	var roster []config.RosterNode
	for i := 0; i < size; i++ {
		roster = append(roster, config.RosterNode{ID: i + 1, ClientAddr: ports[2*i], ReplicationAddr: ports[2*i+1]})
	}
	tc := &testCluster{t: t}
	for i := 0; i < size; i++ {
		cfg := config.Default()
		cfg.Node.ID = i + 1
		cfg.Node.DataDir = t.TempDir()
		cfg.Node.ClientAddr = roster[i].ClientAddr
		cfg.Node.ReplicationAddr = roster[i].ReplicationAddr
		cfg.Node.HTTPAddr = ""
		cfg.Node.KafkaAddr = ""
		cfg.Shard.Count = 2
		cfg.Cluster.Secret = "test-secret"
		cfg.Cluster.Nodes = roster
		// The product's defaults: shorter timeouts flap elections when the
		// 2-core machine is busy with every other test package.
		cfg.Cluster.HeartbeatIntervalMs = 100
		cfg.Cluster.ElectionTimeoutMs = 1000
		if mutate != nil {
			mutate(&cfg)
		}
		tc.cfgs = append(tc.cfgs, cfg)
	}
	for i := range tc.cfgs {
		tc.startNode(i)
	}
	t.Cleanup(func() {
		for i := range tc.nodes {
			tc.stopNode(i)
		}
	})
	tc.waitLoaded()
	return tc
}

// waitLoaded waits until every running node has loaded the cluster
// metadata (until then they answer METADATA_NOT_READY, and a client
// cannot bootstrap from them).
func (tc *testCluster) waitLoaded() {
	tc.t.Helper()
	clusterWait(tc.t, 60*time.Second, "every node to load the cluster metadata", func() bool {
		for _, n := range tc.nodes {
			if n != nil && !n.metaLoaded.Load() {
				return false
			}
		}
		return true
	})
}

func (tc *testCluster) startNode(i int) {
	tc.t.Helper()
	n, err := New(tc.cfgs[i], nil)
	if err != nil {
		tc.t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		n.Stop(context.Background())
		tc.t.Fatal(err)
	}
	for len(tc.nodes) <= i {
		tc.nodes = append(tc.nodes, nil)
	}
	tc.nodes[i] = n
}

func (tc *testCluster) stopNode(i int) {
	if tc.nodes[i] == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tc.nodes[i].Stop(ctx); err != nil {
		tc.t.Errorf("stop node %d: %v", i+1, err)
	}
	tc.nodes[i] = nil
}

// dial connects a client to the cluster, with a context that ends after
// limit; both are released when the test ends (before the nodes stop).
func (tc *testCluster) dial(t *testing.T, limit time.Duration) (context.Context, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	cl, err := client.Dial(ctx, tc.brokers()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return ctx, cl
}

// sameValues fails t unless every partition consumed exactly the values
// acknowledged, in order.
func sameValues(t *testing.T, got, want map[int32][]string) {
	t.Helper()
	for part, vals := range want {
		if fmt.Sprint(got[part]) != fmt.Sprint(vals) {
			t.Fatalf("partition %d: consumed %d values, acknowledged %d", part, len(got[part]), len(vals))
		}
	}
}

func (tc *testCluster) brokers() []string {
	var out []string
	for _, c := range tc.cfgs {
		out = append(out, c.Node.ClientAddr)
	}
	return out
}

func TestClusterCreateProduceConsume(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 60*time.Second)
	var created bool
	for !created {
		_, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "orders", Partitions: 12, ReplicationFactor: 3})
		if err == nil {
			created = true
			break
		}
		t.Logf("create: %v", err)
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Println("created")
}

// waitFor polls cond until it holds or the deadline passes.
func clusterWait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func primaries(t *testing.T, cl *client.Client) map[int32]int32 {
	st, err := cl.ClusterStatus(context.Background())
	if err != nil {
		return nil
	}
	out := map[int32]int32{}
	for _, n := range st.Nodes {
		out[n.ID] = n.Primaries
	}
	return out
}

func createTopic(t *testing.T, ctx context.Context, cl *client.Client, spec client.TopicSpec) {
	t.Helper()
	for {
		_, err := cl.CreateTopic(ctx, spec)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v", spec.Name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// produceAll sends count keyed records and returns, per partition, the
// values acknowledged in offset order.
func produceAll(t *testing.T, ctx context.Context, cl *client.Client, topic string, from, count int) map[int32][]string {
	t.Helper()
	p, err := cl.NewProducer(ctx, client.ProducerConfig{Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	type ack struct {
		part int32
		off  int64
		val  string
	}
	acks := make(chan ack, count)
	for i := from; i < from+count; i++ {
		v := fmt.Sprintf("m%06d", i)
		err := p.ProduceAsync(ctx, client.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%97)), Value: []byte(v)},
			func(pr client.Produced, err error) {
				if err != nil {
					t.Errorf("produce %s: %v", v, err)
					acks <- ack{part: -1}
					return
				}
				acks <- ack{pr.Partition, pr.Offset, v}
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[int32]map[int64]string{}
	for i := 0; i < count; i++ {
		a := <-acks
		if a.part < 0 {
			continue
		}
		if got[a.part] == nil {
			got[a.part] = map[int64]string{}
		}
		got[a.part][a.off] = a.val
	}
	out := map[int32][]string{}
	for part, m := range got {
		offs := make([]int64, 0, len(m))
		for o := range m {
			offs = append(offs, o)
		}
		sortInt64s(offs)
		for _, o := range offs {
			out[part] = append(out[part], m[o])
		}
	}
	return out
}

func sortInt64s(s []int64) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// consumeAll reads every partition from the start to its high watermark.
func consumeAll(t *testing.T, ctx context.Context, cl *client.Client, topic string, parts int32) map[int32][]string {
	t.Helper()
	cs, err := cl.NewConsumer(client.ConsumerConfig{FetchMaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var all []int32
	for p := int32(0); p < parts; p++ {
		all = append(all, p)
	}
	if err := cs.Assign(ctx, topic, all, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	out := map[int32][]string{}
	done := func() bool {
		for _, p := range all {
			hw, err := cs.HighWatermark(topic, p)
			pos, _ := cs.Position(topic, p)
			if err != nil || pos < hw || hw < 0 {
				return false
			}
		}
		return true
	}
	for !done() {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
		}
	}
	return out
}

func TestClusterPrimariesSpreadAndReplicate(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 90*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "orders", Partitions: 12, ReplicationFactor: 3})
	clusterWait(t, 30*time.Second, "4 primaries per node", func() bool {
		p := primaries(t, cl)
		return p[1] == 4 && p[2] == 4 && p[3] == 4
	})
	want := produceAll(t, ctx, cl, "orders", 0, 3000)
	got := consumeAll(t, ctx, cl, "orders", 12)
	sameValues(t, got, want)
}

func TestClusterFailoverAndCatchUp(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 120*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "orders", Partitions: 6, ReplicationFactor: 3})
	clusterWait(t, 30*time.Second, "2 primaries per node", func() bool {
		p := primaries(t, cl)
		return p[1] == 2 && p[2] == 2 && p[3] == 2
	})
	want := produceAll(t, ctx, cl, "orders", 0, 500)
	// Node 2 leads two partitions; stop it. Writes must be accepted again
	// once new primaries are elected.
	stopped := time.Now()
	tc.stopNode(1)
	more := produceAll(t, ctx, cl, "orders", 500, 500)
	t.Logf("500 produces after stopping a primary's node took %v", time.Since(stopped))
	for p, v := range more {
		want[p] = append(want[p], v...)
	}
	tc.startNode(1)
	// The metadata group was idle the whole time: the returning node
	// still learns what is committed and loads it.
	tc.waitLoaded()
	clusterWait(t, 30*time.Second, "node 2 back in sync", func() bool {
		st, err := cl.ClusterStatus(ctx)
		return err == nil && st.UnderReplicated == 0 && st.Offline == 0
	})
	sameValues(t, consumeAll(t, ctx, cl, "orders", 6), want)
}

// Factor 2 with a copy on a stopped node stops accepting writes with
// NOT_ENOUGH_REPLICAS; factor 1 on it is unavailable; both come back.
func TestClusterLowFactorsWithANodeDown(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 120*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "two", Partitions: 3, ReplicationFactor: 2})
	createTopic(t, ctx, cl, client.TopicSpec{Name: "one", Partitions: 3, ReplicationFactor: 1})
	md, err := cl.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Find, in each topic, a partition with a replica on node 3.
	onThree := map[string]int32{}
	for _, tp := range md.Topics {
		for _, p := range tp.Partitions {
			for _, r := range p.Replicas {
				if r == 3 {
					onThree[tp.Name] = p.Partition
				}
			}
		}
	}
	if len(onThree) != 2 {
		t.Fatalf("no partition on node 3 in %v", onThree)
	}
	prod, err := cl.NewProducer(ctx, client.ProducerConfig{Partitioner: client.ManualPartitioner(), DeliveryTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close(ctx)
	for name, p := range onThree {
		if _, err := prod.Produce(ctx, client.Record{Topic: name, Partition: p, Value: []byte("before")}); err != nil {
			t.Fatalf("%s/%d before: %v", name, p, err)
		}
	}
	tc.stopNode(2)
	_, err = prod.Produce(ctx, client.Record{Topic: "two", Partition: onThree["two"], Value: []byte("during")})
	t.Logf("factor 2 with a copy down: %v", err)
	if !errors.Is(err, wire.ErrNotEnoughReplicas) {
		t.Fatalf("factor 2 with a copy down: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	_, err = prod.Produce(ctx, client.Record{Topic: "one", Partition: onThree["one"], Value: []byte("during")})
	t.Logf("factor 1 on the stopped node: %v", err)
	if err == nil {
		t.Fatal("factor 1 on a stopped node accepted a write")
	}
	tc.startNode(2)
	for name, p := range onThree {
		clusterWait(t, 30*time.Second, name+" writable again", func() bool {
			_, err := prod.Produce(ctx, client.Record{Topic: name, Partition: p, Value: []byte("after")})
			return err == nil
		})
	}
}

// The balancer moves primaries back after a node returns, one at a time.
func TestClusterBalancerRestoresBalance(t *testing.T) {
	tc := startCluster(t, 3, func(c *config.Config) { c.Cluster.LeaderBalanceIntervalMs = 300 })
	ctx, cl := tc.dial(t, 120*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "orders", Partitions: 12, ReplicationFactor: 3})
	balanced := func() bool {
		p := primaries(t, cl)
		return p[1] == 4 && p[2] == 4 && p[3] == 4
	}
	clusterWait(t, 30*time.Second, "4 primaries per node", balanced)
	tc.stopNode(2)
	clusterWait(t, 30*time.Second, "primaries on the two live nodes", func() bool {
		p := primaries(t, cl)
		return p[1]+p[2] == 12
	})
	returned := time.Now()
	tc.startNode(2)
	clusterWait(t, 60*time.Second, "4 primaries per node again", balanced)
	t.Logf("balanced %v after node 3 returned", time.Since(returned))
	// The last move's primary is in place before the balancer sees its
	// transfer finish: wait for no move to be in flight.
	var started, finished, failed uint64
	clusterWait(t, 10*time.Second, "no move in flight", func() bool {
		started, finished, failed = 0, 0, 0
		for _, n := range tc.nodes {
			started += n.balanceStats.Started.Load()
			finished += n.balanceStats.Finished.Load()
			failed += n.balanceStats.Failed.Load()
		}
		return started == finished+failed
	})
	t.Logf("moves: %d started, %d finished, %d failed", started, finished, failed)
	if finished < 4 {
		t.Fatalf("only %d moves finished", finished)
	}
}

// TestBalancerUnderLoad is issue 6's end-to-end check: 3 nodes, 12
// partitions of factor 3, a producer that keeps producing while a node is
// stopped and returns; the cluster is back at 4/4/4 within a bounded time,
// moves never overlap, and no acknowledged record is lost or duplicated.
func TestBalancerUnderLoad(t *testing.T) {
	tc := startCluster(t, 3, func(c *config.Config) { c.Cluster.LeaderBalanceIntervalMs = 500 })
	ctx, cl := tc.dial(t, 150*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "load", Partitions: 12, ReplicationFactor: 3})
	balanced := func() bool {
		p := primaries(t, cl)
		return p[1] == 4 && p[2] == 4 && p[3] == 4
	}
	clusterWait(t, 30*time.Second, "4 primaries per node", balanced)

	// The producer: one record at a time (so each latency is one
	// produce), keyed over every partition, until told to stop.
	load := startSteadyLoad(ctx, cl, "load", 1<<16)
	checkStats := func() {
		for _, n := range tc.nodes {
			if n == nil {
				continue
			}
			s, f, x := n.balanceStats.Started.Load(), n.balanceStats.Finished.Load(), n.balanceStats.Failed.Load()
			if s-f-x > 1 {
				t.Fatalf("node %d has %d moves in flight at once", n.self, s-f-x)
			}
		}
	}
	clusterWait(t, 30*time.Second, "the producer under way", func() bool { return len(load.acks) >= 50 })
	tc.stopNode(2)
	clusterWait(t, 30*time.Second, "primaries on the two live nodes", func() bool {
		checkStats()
		p := primaries(t, cl)
		return p[1]+p[2] == 12
	})
	returned := time.Now()
	tc.startNode(2)
	clusterWait(t, 60*time.Second, "4 primaries per node again", func() bool {
		checkStats()
		return balanced()
	})
	toBalance := time.Since(returned)
	if err := load.stop(); err != nil {
		t.Fatal(err)
	}
	n := checkAckedRead(t, ctx, cl, "load", 12, load.acks)
	var worst time.Duration
	for _, s := range load.lat {
		if !s.at.Before(returned) {
			worst = max(worst, s.d)
		}
	}
	t.Logf("%d records acknowledged; balanced %v after the node returned; worst produce latency while primaries moved back %v", n, toBalance, worst)
}

// A node that was down while the metadata log was compacted past its
// position receives the snapshot with the log reset and installs it.
func TestClusterMetadataSnapshotInstall(t *testing.T) {
	old := metaSnapshotEvery
	metaSnapshotEvery = 50
	t.Cleanup(func() { metaSnapshotEvery = old })
	tc := startCluster(t, 3, func(c *config.Config) { c.Storage.SegmentBytes = 1 << 20 })
	ctx, cl := tc.dial(t, 120*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "kept", Partitions: 1, ReplicationFactor: 3})
	tc.stopNode(2)
	md := strings.Repeat("m", 3500)
	primary := metaPrimaryByRoute(t, tc)
	for i := 0; i < 1000; i++ {
		if err := commitMetaOffsets(primary, "c", []service.OffsetCommit{{Topic: "kept", Offset: int64(i), Metadata: md}}); err != nil {
			t.Fatal(err)
		}
	}
	tc.startNode(2)
	n3 := tc.nodes[2]
	clusterWait(t, 30*time.Second, "node 3 to hold the latest committed offset", func() bool {
		var off int64 = -1
		n3.group.Shard(metaShard).Do(func(*shard.Shard) {
			if c, ok := n3.ctrl.State().Committed("c", metadata.OffsetKey{Topic: "kept", Partition: 0}); ok {
				off = c.Offset
			}
		})
		return off == 999
	})
	var installed int
	n3.group.Shard(metaShard).Do(func(*shard.Shard) { installed = n3.ctrl.installed })
	if installed == 0 {
		t.Fatal("node 3 caught up without a snapshot: the test did not compact past it")
	}
}

// Preferred primaries come back after a node returns even where counts
// alone would leave them: with cluster.leader_imbalance_percent at 100,
// counts of 2/1/0 are within bounds, and only the preferred-primary rule
// (cluster.leader_imbalance_percentage) moves node 3's partition back.
func TestClusterPreferredPrimariesRestored(t *testing.T) {
	tc := startCluster(t, 3, func(c *config.Config) {
		c.Cluster.LeaderBalanceIntervalMs = 300
		c.Cluster.LeaderImbalanceCheckIntervalMs = 300
		c.Cluster.LeaderImbalancePercent = 100
	})
	ctx, cl := tc.dial(t, 120*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 3})
	away := func() (n int, desc string) {
		d, err := cl.DescribeTopic(ctx, "orders")
		if err != nil {
			return -1, err.Error()
		}
		for _, p := range d.Topic.Partitions {
			if p.PrimaryID != p.PreferredPrimaryID {
				n++
			}
			desc += fmt.Sprintf(" %d:%d(pref %d)", p.Partition, p.PrimaryID, p.PreferredPrimaryID)
		}
		return n, desc
	}
	home := func() bool { n, _ := away(); return n == 0 }
	clusterWait(t, 30*time.Second, "every partition led by its preferred primary", home)
	tc.stopNode(2)
	clusterWait(t, 30*time.Second, "node 3's partition led elsewhere", func() bool {
		p := primaries(t, cl)
		return p[1]+p[2] == 3
	})
	returned := time.Now()
	tc.startNode(2)
	clusterWait(t, 60*time.Second, "node 3's partition back on node 3", home)
	_, desc := away()
	t.Logf("preferred primaries restored %v after node 3 returned:%s", time.Since(returned).Round(time.Millisecond), desc)
	if m := tc.metricsSum(t); m["leader_imbalance_ratio"] != 0 || m["preferred_primaries_led"] != 3 {
		t.Fatalf("leadership metrics after the restore: imbalance %v, preferred primaries led %v; want 0 and 3",
			m["leader_imbalance_ratio"], m["preferred_primaries_led"])
	}
}

// Rebalance with Preferred (cluster rebalance --preferred) plans and makes
// only moves back to preferred primaries, with the automatic balancer off.
func TestClusterRebalancePreferredOnDemand(t *testing.T) {
	tc := startCluster(t, 3, func(c *config.Config) { c.Cluster.AutoLeaderRebalance = false })
	ctx, cl := tc.dial(t, 120*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 3})
	var pref1 int32 = -1
	clusterWait(t, 30*time.Second, "every partition led by its preferred primary", func() bool {
		d, err := cl.DescribeTopic(ctx, "orders")
		if err != nil {
			return false
		}
		for _, p := range d.Topic.Partitions {
			if p.PrimaryID != p.PreferredPrimaryID {
				return false
			}
			if p.PreferredPrimaryID == 1 {
				pref1 = p.Partition
			}
		}
		return true
	})
	if _, err := cl.MovePrimary(ctx, "orders", pref1, 2); err != nil {
		t.Fatal(err)
	}
	// The move is muted (it was just made) and counts are within
	// bounds; the metadata primary plans it once the new primary's
	// in-sync report has reached it.
	var plan *wire.RebalanceResponse
	clusterWait(t, 10*time.Second, "the preferred plan to move the partition back", func() bool {
		var err error
		plan, err = cl.RebalanceRequest(ctx, &wire.RebalanceRequest{DryRun: true, Preferred: true})
		return err == nil && len(plan.Moves) > 0
	})
	if len(plan.Moves) != 1 || plan.Moves[0].Partition != pref1 || plan.Moves[0].FromNode != 2 || plan.Moves[0].ToNode != 1 {
		t.Fatalf("preferred plan %+v, want orders/%d 2 -> 1", plan.Moves, pref1)
	}
	var err error
	if plan, err = cl.RebalanceRequest(ctx, &wire.RebalanceRequest{Preferred: true}); err != nil || !plan.Started {
		t.Fatalf("preferred rebalance: %+v, %v", plan, err)
	}
	clusterWait(t, 30*time.Second, "the partition back on node 1", func() bool {
		d, err := cl.DescribeTopic(ctx, "orders")
		return err == nil && d.Topic.Partitions[pref1].PrimaryID == 1
	})
}

// ackedRecord is one acknowledged write: its partition, offset and value.
type ackedRecord struct {
	part int32
	off  int64
	val  string
}

// checkAckedRead reads every partition of topic back and fails unless it
// holds exactly the acknowledged writes, each once, in offset order (lost,
// duplicated or reordered writes fail). acks must be closed; it returns
// how many writes were acknowledged.
func checkAckedRead(t *testing.T, ctx context.Context, cl *client.Client, topic string, parts int32, acks <-chan ackedRecord) int {
	t.Helper()
	got := map[int32]map[int64]string{}
	n := 0
	for a := range acks {
		if got[a.part] == nil {
			got[a.part] = map[int64]string{}
		}
		if prev, dup := got[a.part][a.off]; dup {
			t.Fatalf("offset %d/%d acknowledged twice: %s and %s", a.part, a.off, prev, a.val)
		}
		got[a.part][a.off] = a.val
		n++
	}
	want := map[int32][]string{}
	for part, m := range got {
		offs := make([]int64, 0, len(m))
		for o := range m {
			offs = append(offs, o)
		}
		sortInt64s(offs)
		for _, o := range offs {
			want[part] = append(want[part], m[o])
		}
	}
	read := consumeAll(t, ctx, cl, topic, parts)
	for part, vals := range want {
		if fmt.Sprint(read[part]) != fmt.Sprint(vals) {
			t.Fatalf("partition %d: read %d records, %d acknowledged (lost, duplicated or reordered)", part, len(read[part]), len(vals))
		}
	}
	return n
}

// producedSample is one write's start and how long it took to be
// acknowledged.
type producedSample struct {
	at time.Time
	d  time.Duration
}

// steadyLoad produces to a topic one synchronous write at a time (so each
// latency is one produce), keyed over 48 values so that every partition
// gets writes, until stopped.
type steadyLoad struct {
	// acks receives every acknowledged write; stop closes it.
	acks chan ackedRecord
	// lat is each write's start and latency; read it after stop.
	lat  []producedSample
	quit chan struct{}
	done chan error
}

// startSteadyLoad starts the producer; acksMax bounds the writes it may
// make before stop (acks is buffered that deep and never read meanwhile).
func startSteadyLoad(ctx context.Context, cl *client.Client, topic string, acksMax int) *steadyLoad {
	l := &steadyLoad{acks: make(chan ackedRecord, acksMax), quit: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		p, err := cl.NewProducer(ctx, client.ProducerConfig{Linger: -1})
		if err != nil {
			l.done <- err
			return
		}
		defer p.Close(ctx)
		for i := 0; ; i++ {
			select {
			case <-l.quit:
				l.done <- nil
				return
			default:
			}
			v := fmt.Sprintf("r%07d", i)
			start := time.Now()
			pr, err := p.Produce(ctx, client.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 48)), Value: []byte(v)})
			if err != nil {
				l.done <- fmt.Errorf("produce %s: %w", v, err)
				return
			}
			l.lat = append(l.lat, producedSample{start, time.Since(start)})
			l.acks <- ackedRecord{pr.Partition, pr.Offset, v}
		}
	}()
	return l
}

// stop ends the producer, closes acks and returns the producer's error.
func (l *steadyLoad) stop() error {
	close(l.quit)
	err := <-l.done
	close(l.acks)
	return err
}
