package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// TestE2EClusterKillPrimaryUnderLoad is the multi-process proof of
// failover: a topic of 12 partitions, factor 3, spreads its primaries
// evenly (4 per node on 3 nodes); an idempotent producer writes under load
// while the node leading partition 0 is killed with SIGKILL; every
// partition it led accepts writes again once a new primary is elected;
// the node is restarted, catches up and rejoins every group while the
// load goes on. Then everything is read back: every acknowledged message
// is present exactly once, at its acknowledged offset, in order per
// partition. -short skips the 5-node run.
func TestE2EClusterKillPrimaryUnderLoad(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			if nodes == 5 && testing.Short() {
				t.Skip("-short: the 5-node run is skipped")
			}
			killPrimaryUnderLoad(t, nodes)
		})
	}
}

func killPrimaryUnderLoad(t *testing.T, nodes int) {
	const (
		topic      = "orders"
		partitions = 12
	)
	c := startCluster(t, clusterOpts{nodes: nodes, k: 2})
	cl := c.dial(fastRetries)
	createTopic(t, cl, client.TopicSpec{Name: topic, Partitions: partitions, ReplicationFactor: 3})
	lo, hi := int32(partitions/nodes), int32((partitions+nodes-1)/nodes)
	waitUntil(t, clusterWaitTimeout, fmt.Sprintf("%d..%d primaries per node", lo, hi), func() (bool, string) {
		p := c.primaries(1)
		for id := int32(1); id <= int32(nodes); id++ {
			if p[id] < lo || p[id] > hi {
				return false, fmt.Sprint(p)
			}
		}
		return true, ""
	})
	t.Logf("primaries per node: %v", c.primaries(1))

	lp := startLoad(t, cl, topic, partitions)
	eventually(t, clusterWaitTimeout, "10,000 messages acknowledged", func() bool { return lp.count() >= 10_000 })
	routes := topicRoutes(t, cl, topic)
	victim := routes[0].PrimaryID
	led := ledBy(routes, victim)
	killed := time.Now()
	c.kill(victim)
	t.Logf("killed node %d (primary of %v) with %d messages acknowledged", victim, led, lp.count())

	// Every partition the victim led accepts writes again: a probe record
	// sent after the process is gone can only be acknowledged by a new
	// primary.
	took := probeWritable(t, c.dial(fastRetries), topic, led, killed)
	var worst time.Duration
	for _, d := range took {
		worst = max(worst, d)
	}
	t.Logf("writes accepted again on every partition node %d led within %v of the kill (under load; heartbeat 50 ms, election 500 ms; provisional)",
		victim, worst.Round(time.Millisecond))
	survivor := victim%int32(nodes) + 1

	c.restart(victim)
	c.waitInSync(survivor)
	n := lp.count()
	t.Logf("node %d restarted and back in sync with %d messages acknowledged", victim, n)
	// On a loaded machine the catch-up can outlast the load's bound
	// (loadMessagesMax): then every message is acknowledged already, and
	// the check below still reads each back exactly once.
	more := min(n+5_000, loadMessagesMax)
	if more < n+5_000 {
		t.Logf("the load reached its bound of %d messages while node %d caught up", loadMessagesMax, victim)
	}
	eventually(t, clusterWaitTimeout, "5,000 more messages acknowledged", func() bool { return lp.count() >= more })
	total, acked := lp.finish(t)
	t.Logf("%d messages produced under load, every one acknowledged", total)
	checkExactlyOnce(t, c.dial(client.Config{}), topic, partitions, total, acked, len(led))
	checkReplicasEqual(t, cl, topic, partitions)
}

// checkReplicasEqual waits until every replica of every partition of
// topic has the primary's whole log (a returned node included).
func checkReplicasEqual(t *testing.T, cl *client.Client, topic string, partitions int) {
	t.Helper()
	for p := int32(0); p < int32(partitions); p++ {
		waitUntil(t, clusterWaitTimeout, fmt.Sprintf("every replica of %s/%d at the log end", topic, p), func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := cl.DescribePartition(ctx, topic, p)
			if err != nil {
				return false, err.Error()
			}
			if len(d.Replicas) != len(d.Route.Replicas) {
				return false, fmt.Sprintf("%d replicas reported, %d placed", len(d.Replicas), len(d.Route.Replicas))
			}
			for _, r := range d.Replicas {
				if r.LogEndOffset != d.LogEndOffset || d.HighWatermark != d.LogEndOffset {
					return false, fmt.Sprintf("node %d at %d, primary log end %d, high watermark %d", r.NodeID, r.LogEndOffset, d.LogEndOffset, d.HighWatermark)
				}
			}
			return true, ""
		})
	}
}

// fastRetries is a client that retries for long, with short pauses, so
// that what it measures is the cluster rather than its own backoff.
var fastRetries = client.Config{RetryAttemptsMax: 1000, RetryBackoffMin: 5 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond,
	ReconnectBackoffMin: 5 * time.Millisecond, ReconnectBackoffMax: 50 * time.Millisecond}

// probeKey marks probe records (load records have 8-byte keys).
const probeKey = "probe"

// probeWritable writes one probe record to each partition of topic in
// parts, all at once and each with one synchronous Produce that starts
// now, and returns per partition the time from since until it was
// acknowledged.
func probeWritable(t *testing.T, cl *client.Client, topic string, parts []int32, since time.Time) map[int32]time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWaitTimeout)
	defer cancel()
	p, err := cl.NewProducer(ctx, client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: -1, DeliveryTimeout: clusterWaitTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	type result struct {
		part int32
		took time.Duration
		err  error
	}
	results := make(chan result, len(parts))
	for _, part := range parts {
		go func() {
			_, err := p.Produce(ctx, client.Record{Topic: topic, Partition: part, Key: []byte(probeKey), Value: []byte("probe")})
			results <- result{part, time.Since(since), err}
		}()
	}
	out := map[int32]time.Duration{}
	for range parts {
		r := <-results
		if r.err != nil {
			t.Fatalf("probe of %s/%d: %v", topic, r.part, r.err)
		}
		out[r.part] = r.took
	}
	return out
}

// TestE2EClusterFailoverTime measures failover with the default timeouts
// (cluster.heartbeat_interval_ms 100, cluster.election_timeout_ms 1000):
// in each round the node leading the most partitions of a 12-partition,
// factor-3 topic is killed with SIGKILL, and the test takes, per
// partition it led, the time from the kill until a survivor's metadata
// names a new primary, and until a write sent after the kill is
// acknowledged. The node is then restarted and the cluster waits until it
// is in sync again. The target is under 2 s; the test fails above
// failoverBound only (a shared machine is noisy), and logs the figures.
func TestE2EClusterFailoverTime(t *testing.T) {
	const (
		topic      = "failover"
		partitions = 12
		rounds     = 3
	)
	c := startCluster(t, clusterOpts{nodes: 3, heartbeatMs: 100, electionMs: 1000})
	cl := c.dial(fastRetries)
	createTopic(t, cl, client.TopicSpec{Name: topic, Partitions: partitions, ReplicationFactor: 3})
	probes := 0
	var elected, writable []time.Duration
	for round := 1; round <= rounds; round++ {
		// Steady state: every node knows every partition's primary (its
		// followers have heard from it; a primary lost before that is
		// replaced only when the new replicas' start-up hold ends).
		routes := map[int32]wire.PartitionRoute{}
		waitUntil(t, clusterWaitTimeout, "every node knowing a primary for every partition", func() (bool, string) {
			for _, n := range c.plan.Nodes {
				var md wire.MetadataResponse
				if err := askNode(t, n.ClientAddr, &wire.MetadataRequest{Topics: []string{topic}}, &md); err != nil {
					return false, err.Error()
				}
				if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != partitions {
					return false, fmt.Sprintf("node %d: %+v", n.ID, md.Topics)
				}
				for _, r := range md.Topics[0].Partitions {
					if r.PrimaryID <= 0 {
						return false, fmt.Sprintf("node %d knows no primary of partition %d", n.ID, r.Partition)
					}
				}
			}
			routes = topicRoutes(t, cl, topic)
			return len(routes) == partitions, fmt.Sprintf("%d routes", len(routes))
		})
		victim := int32(1)
		for id := int32(2); id <= 3; id++ {
			if len(ledBy(routes, id)) > len(ledBy(routes, victim)) {
				victim = id
			}
		}
		led := ledBy(routes, victim)
		survivor := victim%3 + 1
		killed := time.Now()
		c.kill(victim)
		electedIn := make(chan time.Duration, 1)
		go func() { electedIn <- waitNewPrimaries(c, survivor, topic, led, victim, killed) }()
		took := probeWritable(t, cl, topic, led, killed)
		probes += len(led)
		e := <-electedIn
		var w time.Duration
		for _, d := range took {
			w = max(w, d)
		}
		elected, writable = append(elected, e), append(writable, w)
		t.Logf("round %d: killed node %d (primary of %v): new primaries in metadata after %v, writes accepted on all after %v (per partition %v)",
			round, victim, led, e.Round(time.Millisecond), w.Round(time.Millisecond), took)
		c.restart(victim)
		c.waitInSync(survivor)
	}
	t.Logf("failover with default timeouts over %d rounds (provisional, shared 2-core machine): writes accepted again after %v (max per round); new primary known after %v",
		rounds, writable, elected)
	for _, w := range writable {
		if w > failoverBound {
			t.Errorf("a failover took %v, more than %v (target 2 s)", w, failoverBound)
		}
	}
	checkExactlyOnce(t, cl, topic, partitions, 0, nil, probes)
}

// failoverBound is the failover time past which TestE2EClusterFailoverTime
// fails: well above the 2 s target, so that a loaded machine does not
// fail it, while a lost election or a stuck client still does.
const failoverBound = 5 * time.Second

// waitNewPrimaries polls node from's metadata until every partition of
// parts names a primary other than old, and returns the time since since
// (or clusterWaitTimeout when that never happens).
func waitNewPrimaries(c *e2eCluster, from int32, topic string, parts []int32, old int32, since time.Time) time.Duration {
	deadline := since.Add(clusterWaitTimeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var md wire.MetadataResponse
		err := launch.Request(ctx, c.plan.Nodes[from-1].ClientAddr, &wire.MetadataRequest{Topics: []string{topic}}, &md)
		cancel()
		if err == nil && len(md.Topics) == 1 {
			done := true
			for _, p := range parts {
				r := md.Topics[0].Partitions[p]
				done = done && r.PrimaryID > 0 && r.PrimaryID != old
			}
			if done {
				return time.Since(since)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return clusterWaitTimeout
}
