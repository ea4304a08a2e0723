package main

// The multi-process cluster tests (e2e_cluster_*_test.go) run clusters of
// real `corestream serve` processes on loopback. Their configurations
// come from tools/localcluster/launch, the operator's launcher, and each
// node runs under the single-node harness (server, e2e_harness_test.go):
// free ports, a temporary data directory per node, every process killed
// and waited for in the test's cleanup, waits with deadlines.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// Bounds of the cluster harness.
const (
	// clusterFormTimeout bounds a cluster's (or a restarted node's) wait
	// until every node sees every other alive.
	clusterFormTimeout = 60 * time.Second
	// clusterWaitTimeout bounds the waits for placement, catch-up and
	// writability.
	clusterWaitTimeout = 60 * time.Second
)

// clusterOpts configures a cluster started by startCluster.
type clusterOpts struct {
	nodes int
	// heartbeatMs and electionMs default to the fast test timing (50 and
	// 500 ms); the failover measurement passes the broker defaults.
	heartbeatMs, electionMs int
	// k is replica_connections_per_peer (1 when 0); shards per node (2
	// when 0); fsync (always when empty).
	k, shards int
	fsync     string
	// mutate, when set, changes the plan before it is written (one node
	// with another secret or K).
	mutate func(*launch.Plan)
	// noWait skips the wait for the cluster to form.
	noWait bool
	// http serves each node's HTTP API on its planned address.
	http bool
	// historyMs is http.history_interval_ms (the broker's 5 s when 0).
	historyMs int
}

// e2eCluster is a cluster of `corestream serve` processes.
type e2eCluster struct {
	t    *testing.T
	plan *launch.Plan
	http bool
	// nodes[i] runs node id i+1 (its last start; it may have been killed).
	nodes []*server
}

// startCluster plans, writes and starts a cluster and waits until it has
// formed (every node sees a metadata primary and every node alive).
func startCluster(t *testing.T, o clusterOpts) *e2eCluster {
	t.Helper()
	if o.heartbeatMs == 0 {
		o.heartbeatMs, o.electionMs = 50, 500
	}
	if o.shards == 0 {
		o.shards = 2
	}
	plan, err := launch.New(launch.Options{Nodes: o.nodes, Dir: t.TempDir(), K: o.k, Shards: o.shards, Fsync: o.fsync,
		HeartbeatIntervalMs: o.heartbeatMs, ElectionTimeoutMs: o.electionMs, Secret: "e2e-cluster-secret", HistoryIntervalMs: o.historyMs})
	if err != nil {
		t.Fatal(err)
	}
	if o.mutate != nil {
		o.mutate(plan)
	}
	if err := plan.Write(); err != nil {
		t.Fatal(err)
	}
	c := &e2eCluster{t: t, plan: plan, http: o.http}
	for i := range plan.Nodes {
		c.nodes = append(c.nodes, spawnServer(t, c.serverOpts(i)))
	}
	for _, s := range c.nodes {
		if err := s.waitServing(); err != nil {
			t.Fatal(err)
		}
	}
	if !o.noWait {
		c.waitFormed()
	}
	return c
}

// serverOpts runs node index i on its planned address and data directory
// with its planned configuration.
func (c *e2eCluster) serverOpts(i int) serverOpts {
	n := c.plan.Nodes[i]
	o := serverOpts{dir: n.DataDir, config: c.plan.TOML(i), addr: n.ClientAddr, shards: c.plan.Options.Shards, kafkaAddr: n.KafkaAddr}
	if c.http {
		o.httpAddr = n.HTTPAddr
	}
	return o
}

// node returns the server of node id.
func (c *e2eCluster) node(id int32) *server { return c.nodes[id-1] }

// waitFormed waits until every running node sees every node alive.
func (c *e2eCluster) waitFormed() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterFormTimeout)
	defer cancel()
	if err := c.plan.WaitFormed(ctx, c.exited); err != nil {
		c.t.Fatal(err)
	}
}

// exited reports a node process that has exited.
func (c *e2eCluster) exited() error {
	for i, s := range c.nodes {
		select {
		case <-s.exited:
			return fmt.Errorf("node %d exited (%v):\n%s", i+1, s.waitErr, tail(s.stderr.String(), 4096))
		default:
		}
	}
	return nil
}

// kill sends SIGKILL to node id and waits for the process.
func (c *e2eCluster) kill(id int32) { c.node(id).kill() }

// restart starts node id again on its data directory and address (after
// kill) and waits until it serves clients.
func (c *e2eCluster) restart(id int32) {
	c.t.Helper()
	c.nodes[id-1] = startServer(c.t, c.serverOpts(int(id-1)))
}

// brokers is every node's client address.
func (c *e2eCluster) brokers() []string { return strings.Split(c.plan.Brokers(), ",") }

// dial returns an SDK client of the whole cluster, closed at the end of
// the test.
func (c *e2eCluster) dial(cfg client.Config) *client.Client {
	c.t.Helper()
	cfg.Brokers = c.brokers()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.DialConfig(ctx, cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// cli runs the binary's client commands against the cluster.
func (c *e2eCluster) cli(stdin string, args ...string) (int, string, string) {
	c.t.Helper()
	return runBin(c.t, stdin, append([]string{"--brokers", c.plan.Brokers(), "--timeout", "20s"}, args...)...)
}

// cliOK runs a client command that must succeed and returns its stdout.
func (c *e2eCluster) cliOK(stdin string, args ...string) string {
	c.t.Helper()
	code, out, errs := c.cli(stdin, args...)
	if code != 0 {
		c.t.Fatalf("corestream %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, tail(out, 4096), errs)
	}
	return out
}

// status asks node id (over its own connection) for its cluster view.
func (c *e2eCluster) status(id int32) (*wire.ClusterStatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return launch.Status(ctx, c.plan.Nodes[id-1].ClientAddr)
}

// primaries returns node id -> partitions it leads, as node `from` sees it.
func (c *e2eCluster) primaries(from int32) map[int32]int32 {
	st, err := c.status(from)
	if err != nil {
		return nil
	}
	out := map[int32]int32{}
	for _, n := range st.Nodes {
		out[n.ID] = n.Primaries
	}
	return out
}

// createTopic creates a topic through the SDK, retrying while the
// cluster settles. An attempt that timed out may have created it: a
// retry answered TOPIC_ALREADY_EXISTS then counts as done.
func createTopic(t *testing.T, cl *client.Client, spec client.TopicSpec) wire.TopicID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var errs []string
	for {
		rctx, rcancel := context.WithTimeout(ctx, clusterWaitTimeout)
		resp, err := cl.CreateTopic(rctx, spec)
		rcancel()
		switch {
		case err == nil:
			return resp.TopicID
		case len(errs) > 0 && errors.Is(err, wire.ErrTopicAlreadyExists):
			d, err := cl.DescribeTopic(ctx, spec.Name)
			if err != nil {
				t.Fatalf("create %s: %v", spec.Name, err)
			}
			return d.Topic.ID
		}
		if len(errs) < 10 {
			errs = append(errs, err.Error())
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v; first errors: %q", spec.Name, err, errs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// topicRoutes returns partition -> route of topic, fresh from the cluster.
func topicRoutes(t *testing.T, cl *client.Client, topic string) map[int32]wire.PartitionRoute {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := cl.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]wire.PartitionRoute{}
	for _, tm := range md.Topics {
		if tm.Name == topic {
			for _, p := range tm.Partitions {
				out[p.Partition] = p
			}
		}
	}
	return out
}

// ledBy lists the partitions of topic whose primary is node id.
func ledBy(routes map[int32]wire.PartitionRoute, id int32) []int32 {
	var out []int32
	for p, r := range routes {
		if r.PrimaryID == id {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// hostedOn lists the partitions of topic with a replica on node id.
func hostedOn(routes map[int32]wire.PartitionRoute, id int32) []int32 {
	var out []int32
	for p, r := range routes {
		for _, rep := range r.Replicas {
			if rep == id {
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// waitInSync waits until node `from` reports every node alive, no
// partition offline and none under-replicated (a returned node has
// caught up with every group it belongs to).
func (c *e2eCluster) waitInSync(from int32) {
	c.t.Helper()
	waitUntil(c.t, clusterWaitTimeout, "every replica in sync", func() (bool, string) {
		st, err := c.status(from)
		if err != nil {
			return false, err.Error()
		}
		why := fmt.Sprintf("node %d sees %d of %d partitions offline, %d under-replicated", from, st.Offline, st.Partitions, st.UnderReplicated)
		for _, n := range st.Nodes {
			if !n.Alive {
				return false, fmt.Sprintf("%s; node %d not alive", why, n.ID)
			}
		}
		return st.Offline == 0 && st.UnderReplicated == 0, why
	})
}

// waitUntil polls cond until it holds or timeout passes; the failure
// says what cond last reported.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loadProducer produces e2eMessage(i) to partition i mod partitions, for
// i = 0, 1, ... until stopped (at most loadMessagesMax), through one
// idempotent producer, recording every acknowledgement with its time.
// mu guards the fields below it.
type loadProducer struct {
	partitions int
	stop       chan struct{}
	done       chan error
	mu         sync.Mutex
	sent       int
	acks       map[int]int64 // message index -> offset (-1: a duplicate acknowledged)
	errs       []error
}

// loadMessagesMax bounds a load that is never stopped.
const loadMessagesMax = 2_000_000

// startLoad runs the producer in the background until stopLoad.
func startLoad(t *testing.T, cl *client.Client, topic string, partitions int) *loadProducer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p, err := cl.NewProducer(ctx, client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: 2 * time.Millisecond,
		BatchBytesMax: 16 << 10, BufferedBytesMax: 1 << 20, DeliveryTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	lp := &loadProducer{partitions: partitions, stop: make(chan struct{}), done: make(chan error, 1), acks: map[int]int64{}}
	go func() {
		var err error
		for i := 0; i < loadMessagesMax && err == nil; i++ {
			select {
			case <-lp.stop:
				lp.done <- p.Close(ctx)
				return
			default:
			}
			k, v := e2eMessage(i)
			i := i
			lp.mu.Lock()
			lp.sent++
			lp.mu.Unlock()
			err = p.ProduceAsync(ctx, client.Record{Topic: topic, Partition: int32(i % partitions), Key: k, Value: v},
				func(pr client.Produced, err error) { lp.ack(i, pr, err) })
		}
		p.Close(ctx)
		lp.done <- err
	}()
	t.Cleanup(lp.halt)
	return lp
}

// halt stops the producer (once).
func (lp *loadProducer) halt() {
	select {
	case <-lp.stop:
	default:
		close(lp.stop)
	}
}

func (lp *loadProducer) ack(i int, pr client.Produced, err error) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if err != nil {
		lp.errs = append(lp.errs, fmt.Errorf("message %d: %w", i, err))
		return
	}
	lp.acks[i] = pr.Offset
}

// count is the number of acknowledged messages.
func (lp *loadProducer) count() int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return len(lp.acks)
}

// finish stops the producer, waits until it has flushed, and checks that
// every message sent was acknowledged; it returns the number sent and the
// acknowledgements.
func (lp *loadProducer) finish(t *testing.T) (int, map[int]int64) {
	t.Helper()
	lp.halt()
	select {
	case err := <-lp.done:
		if err != nil {
			t.Fatalf("producing: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the producer did not flush within 3 minutes")
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if len(lp.errs) > 0 || len(lp.acks) != lp.sent {
		t.Fatalf("%d of %d acknowledged; %d failed, first: %v", len(lp.acks), lp.sent, len(lp.errs), lp.errs)
	}
	out := make(map[int]int64, len(lp.acks))
	for k, v := range lp.acks {
		out[k] = v
	}
	return lp.sent, out
}

// checkExactlyOnce reads topic back through cl and checks that every
// message of [0, total) is present exactly once, whole, in its partition
// (index mod partitions), in index order within the partition, and at
// its acknowledged offset; and that there are probes probe records.
func checkExactlyOnce(t *testing.T, cl *client.Client, topic string, partitions, total int, acked map[int]int64, probes int) {
	t.Helper()
	seen := map[int]int64{}
	probed := 0
	for part, recs := range readAll(t, cl, topic, partitions) {
		prev := -1
		for _, r := range recs {
			if string(r.Key) == probeKey {
				probed++
				continue
			}
			i := int(beUint64(r.Key))
			if _, v := e2eMessage(i); string(r.Value) != string(v) || i%partitions != part {
				t.Fatalf("partition %d offset %d: message %d with a wrong value or partition", part, r.Offset, i)
			}
			if off, dup := seen[i]; dup {
				t.Fatalf("message %d at offsets %d and %d of partition %d: duplicated", i, off, r.Offset, part)
			}
			if i < prev {
				t.Fatalf("partition %d: message %d at offset %d after message %d: out of order", part, i, r.Offset, prev)
			}
			seen[i], prev = r.Offset, i
		}
	}
	for i, off := range acked {
		got, ok := seen[i]
		if !ok {
			t.Fatalf("message %d was acknowledged at offset %d and is lost", i, off)
		}
		if off >= 0 && got != off {
			t.Fatalf("message %d was acknowledged at offset %d, read back at %d", i, off, got)
		}
	}
	if len(seen) != total || probed != probes {
		t.Fatalf("%d distinct messages and %d probes read back; %d and %d produced", len(seen), probed, total, probes)
	}
}

func beUint64(b []byte) uint64 {
	var x uint64
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	return x
}
