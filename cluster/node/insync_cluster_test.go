package node

import (
	"bufio"
	"flag"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
)

// A healthy 3-node cluster under a saturating produce never reports a
// partition under-replicated (issue 15: the old rule, "holds everything
// committed at the instant of the check", showed 2–3 of them).
func TestClusterInSyncStaysFullUnderLoad(t *testing.T) {
	// What is tested is the in-sync rule, not the failure detector: a
	// longer liveness timeout keeps a 2-core machine busy with other tests
	// from declaring a peer down (which would rightly count its replicas
	// as offline). TestClusterInSyncFiguresAtDefaults measures the same at
	// the broker's default timeouts.
	worst, worstAt, _, _ := inSyncUnderLoad(t, 4*time.Second, true, func(c *config.Config) { c.Cluster.ElectionTimeoutMs = 3000 })
	if worst > 0 {
		t.Fatalf("%d partitions reported under-replicated under load on a healthy cluster (%s)", worst, worstAt)
	}
}

var inSyncFiguresFlag = flag.Bool("insync-figures", false,
	"TestClusterInSyncFiguresAtDefaults: measure the in-sync sets under a saturating producer at the default timeouts")

// The in-sync sets of a healthy 3-node cluster under one saturating
// producer at the broker's default election timeout and replica lag
// bound, over duration (issue 32): how many status samples saw a
// partition under-replicated, and how many partitions at worst. A
// measurement (it fails only if the producer does):
//
//	go test ./cluster/node -run TestClusterInSyncFiguresAtDefaults -v -insync-figures
func TestClusterInSyncFiguresAtDefaults(t *testing.T) {
	if !*inSyncFiguresFlag {
		t.Skip("a measurement: run with -insync-figures")
	}
	worst, worstAt, bad, samples := inSyncUnderLoad(t, 30*time.Second, false, func(c *config.Config) {
		d := config.Default()
		c.Cluster.ElectionTimeoutMs, c.Cluster.HeartbeatIntervalMs, c.Cluster.ReplicaLagTimeMaxMs = d.Cluster.ElectionTimeoutMs, d.Cluster.HeartbeatIntervalMs, d.Cluster.ReplicaLagTimeMaxMs
	})
	t.Logf("at the default timeouts: %d of %d status samples saw a partition under-replicated; at worst %d (%s)", bad, samples, worst, worstAt)
}

// inSyncUnderLoad runs one saturating producer against a healthy 3-node
// cluster (6 partitions, factor 3) for duration, sampling every node's
// cluster status every 20 ms, and answers the most partitions seen
// under-replicated, where, and how many of how many samples saw any.
// strict fails the test at once when /metrics reports one.
func inSyncUnderLoad(t *testing.T, duration time.Duration, strict bool, mutate func(*config.Config)) (worst int, worstAt string, bad, samples int) {
	tc := startCluster(t, 3, mutate)
	ctx, cl := tc.dial(t, 120*time.Second)
	const parts = 6
	createTopic(t, ctx, cl, client.TopicSpec{Name: "load", Partitions: parts, ReplicationFactor: 3})
	full := func() bool {
		for _, n := range tc.nodes {
			if st := n.clusterStatus(); st.UnderReplicated != 0 || st.Offline != 0 || st.Partitions != parts {
				return false
			}
		}
		return true
	}
	clusterWait(t, 30*time.Second, "every partition fully in sync on every node", full)

	prod, err := cl.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close(ctx)
	var acked, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		val := make([]byte, 200)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := prod.ProduceAsync(ctx, client.Record{Topic: "load", Key: []byte(fmt.Sprint(i % 64)), Value: val},
				func(_ client.Produced, err error) {
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, &err)
						return
					}
					acked.Add(1)
				})
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
				return
			}
		}
	}()
	// Watch every node's answers (cluster status and metadata come from
	// one function) for the whole run.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(duration); time.Now().Before(deadline); <-tick.C {
		for i, n := range tc.nodes {
			st := n.clusterStatus()
			samples++
			if st.UnderReplicated > 0 {
				bad++
			}
			if int(st.UnderReplicated) > worst {
				worst, worstAt = int(st.UnderReplicated), fmt.Sprintf("node %d after %d records", i+1, acked.Load())
			}
		}
		if m := tc.metricsSum(t); strict && (m["partitions_under_replicated"] > 0 || m["partitions_led"] != parts) {
			t.Fatalf("under load on a healthy cluster the metrics say %v partitions under-replicated, %v led (of %d)",
				m["partitions_under_replicated"], m["partitions_led"], parts)
		}
	}
	close(stop)
	wg.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if p := firstErr.Load(); p != nil {
		t.Fatalf("produce failed (%d failures): %v", failed.Load(), *p)
	}
	t.Logf("%d records acknowledged in %v; %d status samples; most under-replicated partitions seen: %d", acked.Load(), duration, samples, worst)
	if acked.Load() < 1000 {
		t.Fatalf("only %d records acknowledged: not a load", acked.Load())
	}
	return worst, worstAt, bad, samples
}

// A stopped node leaves the in-sync set of every partition it holds and is
// shown offline, the same way, by every answer of every live node:
// metadata, topic describe, cluster status and the primary's partition
// describe, whose last catch-up time of it stops moving.
func TestClusterStoppedReplicaOfflineEverywhere(t *testing.T) {
	tc := startCluster(t, 3, func(c *config.Config) { c.Cluster.ReplicaLagTimeMaxMs = 500 })
	ctx, cl := tc.dial(t, 120*time.Second)
	const parts = 6
	createTopic(t, ctx, cl, client.TopicSpec{Name: "orders", Partitions: parts, ReplicationFactor: 3})
	clusterWait(t, 30*time.Second, "every partition fully in sync on every node", func() bool {
		for _, n := range tc.nodes {
			if st := n.clusterStatus(); st.UnderReplicated != 0 || st.Offline != 0 {
				return false
			}
		}
		return true
	})
	produceAll(t, ctx, cl, "orders", 0, 60)
	// Every follower shows when it last caught up, recently.
	for p := int32(0); p < parts; p++ {
		d, err := cl.DescribePartition(ctx, "orders", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range d.Replicas {
			if !r.InSync || r.LastCaughtUpMs < 0 || time.Since(time.UnixMilli(r.LastCaughtUpMs)) > time.Minute {
				t.Fatalf("partition %d replica %d on a healthy cluster: in sync %v, last caught up %d", p, r.NodeID, r.InSync, r.LastCaughtUpMs)
			}
		}
	}
	stopped := time.Now()
	tc.stopNode(2)
	// frozen holds, per partition, when node 3 last caught up as the
	// primary said it once node 3 was offline everywhere: it must not move.
	var frozen map[int32]int64
	// consistent reports what is wrong with the answers about node 3, or "".
	consistent := func() string {
		seen := map[int32]int64{}
		for i, n := range tc.nodes {
			if n == nil {
				continue
			}
			st := n.clusterStatus()
			if st.UnderReplicated != parts || st.Offline != 0 {
				return fmt.Sprintf("node %d: cluster status %d under-replicated, %d offline", i+1, st.UnderReplicated, st.Offline)
			}
			tm := n.topicMetadata(n.view.Load().Topics["orders"])
			for _, pr := range tm.Partitions {
				if containsID(pr.InSync, 3) || !containsID(pr.Offline, 3) || len(pr.InSync) != 2 || pr.PrimaryID == 3 {
					return fmt.Sprintf("node %d partition %d: primary %d in sync %v offline %v", i+1, pr.Partition, pr.PrimaryID, pr.InSync, pr.Offline)
				}
			}
		}
		for p := int32(0); p < parts; p++ {
			d, err := cl.DescribePartition(ctx, "orders", p)
			if err != nil {
				return fmt.Sprintf("describe %d: %v", p, err)
			}
			if containsID(d.Route.InSync, 3) || !containsID(d.Route.Offline, 3) {
				return fmt.Sprintf("describe %d: route in sync %v offline %v", p, d.Route.InSync, d.Route.Offline)
			}
			for _, r := range d.Replicas {
				if r.InSync != containsID(d.Route.InSync, r.NodeID) {
					return fmt.Sprintf("describe %d: replica %d in sync %v, route in sync %v", p, r.NodeID, r.InSync, d.Route.InSync)
				}
				if r.NodeID == 3 {
					seen[p] = r.LastCaughtUpMs
				}
			}
		}
		if frozen == nil {
			frozen = seen
		} else if fmt.Sprint(seen) != fmt.Sprint(frozen) {
			return fmt.Sprintf("node 3's last catch-up moved while it was down: %v, then %v", frozen, seen)
		}
		return ""
	}
	var why string
	for limit := time.Now().Add(30 * time.Second); ; {
		if why = consistent(); why == "" {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("30s after node 3 stopped, the answers still disagree: %s", why)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	t.Logf("node 3 offline in every answer %v after it stopped; it last caught up %v", time.Since(stopped), frozen)
	// And it stays so, with writes going on.
	produceAll(t, ctx, cl, "orders", 60, 60)
	if why = consistent(); why != "" {
		t.Fatal(why)
	}
	// The metrics say the same: every partition led by a live node, each
	// under-replicated, none offline, node 3 behind for some time.
	m := tc.metricsSum(t)
	if m["partitions_under_replicated"] != parts || m["partitions_offline"] != 0 || m["partitions_led"] != parts ||
		m["replica_max_lag_seconds"] <= 0 || m["preferred_primaries_led"] > parts {
		t.Fatalf("metrics after node 3 stopped: %v", m)
	}
}

// metricsSum scrapes every running node's /metrics and sums each
// unlabelled corestream_ metric over the nodes.
func (tc *testCluster) metricsSum(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, n := range tc.nodes {
		if n == nil {
			continue
		}
		rec := httptest.NewRecorder()
		n.metricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		sc := bufio.NewScanner(rec.Body)
		for sc.Scan() {
			name, val, ok := strings.Cut(sc.Text(), " ")
			if !ok || !strings.HasPrefix(name, "corestream_") {
				continue
			}
			v, err := strconv.ParseFloat(val, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", sc.Text(), err)
			}
			out[strings.TrimPrefix(name, "corestream_")] += v
		}
	}
	return out
}
