// Package harness is the fault harness behind tools/chaos: it starts a
// real cluster of `corestream serve` processes on loopback (planned by
// tools/localcluster/launch), drives idempotent producers and tailing
// consumers through the Go SDK, injects a seeded schedule of faults —
// kill -9 and restart, SIGSTOP/SIGCONT, a node cut from its peers, the
// clients cut from a node — each healed after a bounded time, and then
// checks every acknowledged write (present once, at its offset, in
// order; replicas byte-equal below the high watermark) and measures, for
// each fault and partition, how long writes took to resume.
//
// A seed reproduces the schedule (which faults, on which nodes, for how
// long); the cluster's timing is real, so the outcome of one run is
// not replayed exactly. Network faults need root and iptables; without
// them they are skipped with a message and the rest runs.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// Bounds of a run's phases (the fault phase is bounded by Options).
const (
	formWaitMax      = 2 * time.Minute
	createWaitMax    = 2 * time.Minute
	warmupWaitMax    = time.Minute
	drainWaitMax     = 3 * time.Minute
	readBackWaitMax  = 3 * time.Minute
	inSyncWaitMax    = 2 * time.Minute
	settlePollEvery  = 20 * time.Millisecond
	requestWaitMax   = 10 * time.Second
	topicPrefix      = "chaos-f"
	readFetchBytes   = 4 << 20
	metadataRetryMax = 5
)

// Options configure a run. Zero fields take the documented defaults.
type Options struct {
	// Bin is the corestream binary. Required.
	Bin string
	// Dir holds the nodes' data directories and logs. Required.
	Dir string
	// Nodes is the roster size. Default 3.
	Nodes int
	// Shards per node. Default 1.
	Shards int
	// Fsync is storage.fsync. Default "always".
	Fsync string
	// Partitions per topic. Default 3.
	Partitions int
	// Factors are the topics' replication factors, one topic each.
	// Default 1, 2 and 3 (capped at Nodes).
	Factors []int
	// Seed draws the fault schedule. Default 1.
	Seed uint64
	// Duration bounds the fault phase: no fault starts after it. Default
	// 5 minutes.
	Duration time.Duration
	// FaultsMax bounds the number of faults. Default 1000.
	FaultsMax int
	// Kinds are the fault kinds drawn. Default all.
	Kinds []Kind
	// HoldMin..HoldMax is a fault's length; GapMax bounds the quiet after
	// one. Defaults 3 s, 8 s, 2 s.
	HoldMin, HoldMax, GapMax time.Duration
	// SettleMax bounds the wait, after a heal, for every partition to
	// acknowledge a write again before the next fault. Default 30 s.
	SettleMax time.Duration
	// WritesMax bounds the writes attempted. Default 5,000,000.
	WritesMax int64
	// DeliveryTimeout is the producer's. Default 10 s.
	DeliveryTimeout time.Duration
	// InFlight bounds each partition's unacknowledged records. Default 1:
	// one synchronous write at a time, so that a stall is the time a
	// caller waits; more pipelines writes through the producer's batches.
	InFlight int
	// Client is the clients' protocol: ClientSDK (the Go SDK on the
	// native port) or ClientKafka (franz-go on the Kafka port, at its
	// defaults: idempotent, acks=all). Default ClientSDK.
	Client string
	// KafkaMetadataMinAge is franz-go's MetadataMinAge for every Kafka
	// client of the run (0: franz-go's default, 5 s): how soon a client
	// asks again for a partition's primary once its quick retries after
	// a failure (about 2 s) are spent.
	KafkaMetadataMinAge time.Duration
	// GroupMembers is the size of the consumer group that reads every
	// topic under the faults (Kafka runs only; its history is checked by
	// CheckGroup). Default 2 for Kafka runs; -1: no group.
	GroupMembers int
	// SampleEvery is how often each node's memory, descriptors and
	// goroutines are read from its /metrics. Default 10 s.
	SampleEvery time.Duration
	// Soak makes growth a check: after Warmup (default 10 minutes) no
	// node may hold more than 1.25× what it held in the warm-up's second
	// half plus a margin (64 MiB, 64 descriptors, 256 goroutines). A run
	// shorter than two warm-ups checks nothing and fails.
	Soak   bool
	Warmup time.Duration
	// NoNetwork skips the network faults even where iptables works.
	NoNetwork bool
	// LogLevel is the nodes' log.level; "debug" adds the lines an
	// election's timeline is read from. Default "info".
	LogLevel string
	// Log receives progress lines. Default io.Discard.
	Log io.Writer
}

func (o Options) withDefaults() (Options, error) {
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setInt(&o.Nodes, 3)
	setInt(&o.Shards, 1)
	setInt(&o.Partitions, 3)
	setInt(&o.FaultsMax, 1000)
	setInt(&o.InFlight, 1)
	setDur(&o.Duration, 5*time.Minute)
	setDur(&o.HoldMin, 3*time.Second)
	setDur(&o.HoldMax, 8*time.Second)
	setDur(&o.GapMax, 2*time.Second)
	setDur(&o.SettleMax, 30*time.Second)
	setDur(&o.DeliveryTimeout, 10*time.Second)
	setDur(&o.SampleEvery, 10*time.Second)
	setDur(&o.Warmup, 10*time.Minute)
	if o.Fsync == "" {
		o.Fsync = "always"
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.Client == "" {
		o.Client = ClientSDK
	}
	if o.GroupMembers == 0 && o.Client == ClientKafka {
		o.GroupMembers = 2
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.WritesMax == 0 {
		o.WritesMax = 5_000_000
	}
	if len(o.Factors) == 0 {
		for f := 1; f <= min(3, o.Nodes); f++ {
			o.Factors = append(o.Factors, f)
		}
	}
	if len(o.Kinds) == 0 {
		o.Kinds = append([]Kind(nil), AllKinds...)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	switch {
	case o.Bin == "" || o.Dir == "":
		return o, errors.New("chaos: Options.Bin and Options.Dir are required")
	case o.Client != ClientSDK && o.Client != ClientKafka:
		return o, fmt.Errorf("chaos: client %q is neither %q nor %q", o.Client, ClientSDK, ClientKafka)
	case o.GroupMembers > 0 && o.Client != ClientKafka:
		return o, fmt.Errorf("chaos: a consumer group runs with the %q client only", ClientKafka)
	case o.HoldMax < o.HoldMin:
		return o, fmt.Errorf("chaos: hold max %v is below hold min %v", o.HoldMax, o.HoldMin)
	}
	for _, f := range o.Factors {
		if f < 1 || f > o.Nodes {
			return o, fmt.Errorf("chaos: replication factor %d is outside 1..%d nodes", f, o.Nodes)
		}
	}
	return o, nil
}

// FaultRecord is one fault as it was run.
type FaultRecord struct {
	Fault
	// AtNs and HealNs are the injection and the heal, in ns since the
	// run's start; SettledNs is when every partition had acknowledged a
	// write started after the heal (0: not within SettleMax).
	AtNs, HealNs, SettledNs int64
	// Routes are the partitions' primaries and replicas just before.
	Routes map[string]Route
}

// Run runs the harness. It returns an error when the run could not be
// carried out (the cluster did not start, a node exited on its own, ctx
// ended); what the checks found is in the report, whose OK says whether
// every promise held. Every process it started is stopped and every
// iptables rule it added is removed before it returns.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if o, err = o.withDefaults(); err != nil {
		return nil, err
	}
	r := &run{o: o, rep: &Report{Seed: o.Seed, Options: o}, start: time.Now()}
	defer func() {
		r.cleanup()
		if err != nil {
			r.rep.Err = err.Error()
		}
		r.rep.Elapsed = time.Since(r.start)
	}()
	if err := r.setUp(ctx); err != nil {
		return r.rep, err
	}
	err = r.faults(ctx)
	r.endSampling()
	if derr := r.drain(ctx); err == nil {
		err = derr
	}
	r.measure()
	if err != nil {
		return r.rep, err
	}
	if err := r.readBack(ctx); err != nil {
		return r.rep, err
	}
	if err := r.checkGroup(ctx); err != nil {
		return r.rep, err
	}
	if err := r.compareReplicas(ctx); err != nil {
		return r.rep, err
	}
	return r.rep, nil
}

// run is one run's state; its methods are called by Run's goroutine.
type run struct {
	o       Options
	rep     *Report
	start   time.Time
	plan    *launch.Plan
	cluster *Cluster
	net     *Net
	admin   *client.Client
	writeC  *client.Client
	readC   *client.Client
	sender  sender
	topics  map[string]wire.TopicID
	writers []*writer
	tails   []*tail
	budget  *budget
	// stopWrites ends the writers after their current write; wg counts
	// the writers and tails; stopTails ends the tails.
	stopWrites, stopTails context.CancelFunc
	wg                    sync.WaitGroup
	writesEndNs           int64
	faultsRun             []FaultRecord
	// members are the consumer group's (Kafka runs); stopGroup ends them
	// and groupWG counts them.
	members   []*member
	stopGroup context.CancelFunc
	groupWG   sync.WaitGroup
	// logs are the partitions' records as read back after the run.
	logs map[string][]Written
	// sampler reads the nodes' resources until stopSampling.
	sampler      *sampler
	stopSampling context.CancelFunc
	samplingDone chan struct{}
}

func (r *run) clock() int64 { return int64(time.Since(r.start)) }

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "chaos %6.1fs: %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// setUp plans and starts the cluster, the network rules, the topics, the
// writers and the tails.
func (r *run) setUp(ctx context.Context) error {
	o := r.o
	plan, err := launch.New(launch.Options{Nodes: o.Nodes, Dir: o.Dir, Shards: o.Shards, Fsync: o.Fsync, LogLevel: o.LogLevel})
	if err != nil {
		return err
	}
	if err := plan.Write(); err != nil {
		return err
	}
	r.plan = plan
	r.rep.Dir = plan.Options.Dir
	var gids []uint32
	if o.NoNetwork {
		r.rep.NetworkSkipped = "turned off (-no-network)"
	} else {
		pid := os.Getpid()
		var nodes []NodePorts
		for _, n := range plan.Nodes {
			np := NodePorts{ID: n.ID, GID: NodeGID(pid, n.ID)}
			for _, a := range []string{n.ClientAddr, n.ReplicationAddr, n.HTTPAddr, n.KafkaAddr} {
				np.Ports = append(np.Ports, port(a))
			}
			nodes = append(nodes, np)
			gids = append(gids, np.GID)
		}
		if r.net, err = NewNet(nil, pid, nodes); err != nil {
			r.rep.NetworkSkipped = err.Error()
			gids = nil
		} else {
			r.rep.Chain = r.net.Chain()
		}
	}
	if r.rep.NetworkSkipped != "" {
		r.logf("network faults skipped: %s", r.rep.NetworkSkipped)
	}
	r.cluster = newCluster(plan, o.Bin, gids)
	for _, n := range plan.Nodes {
		if err := r.cluster.Start(ctx, n.ID); err != nil {
			return err
		}
	}
	fctx, cancel := context.WithTimeout(ctx, formWaitMax)
	defer cancel()
	if err := plan.WaitFormed(fctx, r.cluster.Exited); err != nil {
		return err
	}
	r.logf("%d nodes formed (pids %s), data in %s", o.Nodes, r.cluster.Pids(), plan.Options.Dir)
	var httpAddrs []string
	for _, n := range plan.Nodes {
		httpAddrs = append(httpAddrs, n.HTTPAddr)
	}
	sctx, stop := context.WithCancel(ctx)
	r.sampler, r.stopSampling, r.samplingDone = &sampler{}, stop, make(chan struct{})
	go func() {
		defer close(r.samplingDone)
		r.sampler.run(sctx, httpAddrs, o.SampleEvery, r.clock)
	}()
	brokers := []string{}
	for _, n := range plan.Nodes {
		brokers = append(brokers, n.ClientAddr)
	}
	for _, p := range []**client.Client{&r.admin, &r.writeC, &r.readC} {
		dctx, cancel := context.WithTimeout(ctx, requestWaitMax)
		*p, err = client.DialConfig(dctx, client.Config{Brokers: brokers, ClientID: "chaos"})
		cancel()
		if err != nil {
			return fmt.Errorf("chaos: dialling the cluster: %w", err)
		}
	}
	if err := r.createTopics(ctx); err != nil {
		return err
	}
	return r.startLoad(ctx)
}

// port is the port of HOST:PORT (0 when it has none).
func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// createTopics creates one topic per factor and waits until every
// partition has a primary.
func (r *run) createTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, createWaitMax)
	defer cancel()
	r.topics = map[string]wire.TopicID{}
	for _, f := range r.o.Factors {
		name := topicPrefix + strconv.Itoa(f)
		tried := false
		for {
			rctx, rcancel := context.WithTimeout(ctx, requestWaitMax)
			resp, err := r.admin.CreateTopic(rctx, client.TopicSpec{Name: name, Partitions: int32(r.o.Partitions), ReplicationFactor: int16(f)})
			rcancel()
			if err == nil {
				r.topics[name] = resp.TopicID
				break
			}
			if tried && errors.Is(err, wire.ErrTopicAlreadyExists) { // an attempt that timed out did create it
				break
			}
			tried = true
			if ctx.Err() != nil {
				return fmt.Errorf("chaos: creating %s: %w", name, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(settlePollEvery):
			}
		}
	}
	for {
		routes, ids, err := r.routes(ctx)
		missing := ""
		if err != nil {
			missing = err.Error()
		}
		for _, f := range r.o.Factors {
			name := topicPrefix + strconv.Itoa(f)
			for p := 0; p < r.o.Partitions && missing == ""; p++ {
				if rt, ok := routes[fmt.Sprintf("%s/%d", name, p)]; !ok || rt.Primary <= 0 {
					missing = fmt.Sprintf("%s/%d has no primary yet", name, p)
				}
			}
		}
		if missing == "" {
			for n, id := range ids {
				r.topics[n] = id
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: topics not placed within %v: %s", createWaitMax, missing)
		case <-time.After(settlePollEvery):
		}
	}
}

// routes asks the cluster (through the admin client) for every chaos
// partition's primary and replicas, and the topics' ids.
func (r *run) routes(ctx context.Context) (map[string]Route, map[string]wire.TopicID, error) {
	rctx, cancel := context.WithTimeout(ctx, requestWaitMax)
	defer cancel()
	md, err := r.admin.Metadata(rctx)
	if err != nil {
		return nil, nil, err
	}
	out, ids := map[string]Route{}, map[string]wire.TopicID{}
	for _, t := range md.Topics {
		ids[t.Name] = t.ID
		for _, p := range t.Partitions {
			rt := Route{Primary: int(p.PrimaryID)}
			for _, id := range p.Replicas {
				rt.Replicas = append(rt.Replicas, int(id))
			}
			out[fmt.Sprintf("%s/%d", t.Name, p.Partition)] = rt
		}
	}
	return out, ids, nil
}

// startLoad starts a writer per partition and a tail per topic, and waits
// until every partition has acknowledged a write.
func (r *run) startLoad(ctx context.Context) error {
	linger := time.Duration(-1) // one record, one batch, sent at once
	if r.o.InFlight > 1 {
		linger = time.Millisecond
	}
	kc := kafkaConf{metadataMinAge: r.o.KafkaMetadataMinAge}
	for _, n := range r.plan.Nodes {
		kc.seeds = append(kc.seeds, n.KafkaAddr)
	}
	if r.o.Client == ClientKafka {
		s, err := newKafkaSender(kc, linger, r.o.DeliveryTimeout)
		if err != nil {
			return err
		}
		r.sender = s
	} else {
		pctx, cancel := context.WithTimeout(ctx, requestWaitMax)
		p, err := r.writeC.NewProducer(pctx, client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: linger,
			DeliveryTimeout: r.o.DeliveryTimeout})
		cancel()
		if err != nil {
			return fmt.Errorf("chaos: producer: %w", err)
		}
		r.sender = sdkSender{p}
	}
	wctx, stopWrites := context.WithCancel(context.Background())
	tctx, stopTails := context.WithCancel(context.Background())
	r.stopWrites, r.stopTails = stopWrites, stopTails
	r.budget = &budget{clock: r.clock, left: r.o.WritesMax}
	for _, f := range r.o.Factors {
		name := topicPrefix + strconv.Itoa(f)
		for p := 0; p < r.o.Partitions; p++ {
			w := &writer{part: part{name, int32(p), f}, inflight: r.o.InFlight, clock: r.clock, errs: map[string]int{}}
			r.writers = append(r.writers, w)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				w.run(ctx, wctx, r.sender, r.budget)
			}()
		}
		cs, err := r.newTail(ctx, kc, len(r.tails), name)
		if err != nil {
			return err
		}
		t := &tail{topic: name, last: map[int32]int64{}}
		r.tails = append(r.tails, t)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer cs.close()
			t.run(tctx, cs)
		}()
	}
	if err := r.startGroup(kc); err != nil {
		return err
	}
	if !r.waitAcked(ctx, 0, warmupWaitMax) {
		return fmt.Errorf("chaos: not every partition acknowledged a write within %v of the start", warmupWaitMax)
	}
	r.logf("%d writers and %d tailing consumers running", len(r.writers), len(r.tails))
	return nil
}

// newTail starts a consumer of every partition of topic from its start,
// through the run's client; i spreads the Kafka tails over the nodes.
func (r *run) newTail(ctx context.Context, kc kafkaConf, i int, topic string) (poller, error) {
	if r.o.Client == ClientKafka {
		return newKafkaPoller(kc, i, topic, r.o.Partitions)
	}
	cs, err := r.readC.NewConsumer(client.ConsumerConfig{})
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, requestWaitMax)
	err = cs.Assign(actx, topic, nil, client.StartEarliest)
	cancel()
	if err != nil {
		cs.Close()
		return nil, fmt.Errorf("chaos: tailing %s: %w", topic, err)
	}
	return sdkPoller{cs}, nil
}

// waitAcked waits until every writer has an acknowledgement of a write
// started at or after atNs, for at most wait; it reports whether they
// did.
func (r *run) waitAcked(ctx context.Context, atNs int64, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		all := true
		for _, w := range r.writers {
			if !w.ackedSince(atNs) {
				all = false
				break
			}
		}
		if all {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil || r.budget.spent() > 0 {
			return false // out of time, stopping, or no more writes coming
		}
		select {
		case <-ctx.Done():
		case <-time.After(settlePollEvery):
		}
	}
}

// endSampling stops the resource sampler and checks what it read.
func (r *run) endSampling() {
	if r.stopSampling == nil {
		return
	}
	r.stopSampling()
	<-r.samplingDone
	r.stopSampling = nil
	r.rep.Resources = r.sampler.all()
	r.rep.Growth = CheckGrowth(r.rep.Resources, r.o.Warmup)
}

// cleanup stops whatever is still running: the load, the clients, the
// nodes, the network rules.
func (r *run) cleanup() {
	r.endSampling()
	if r.stopWrites != nil {
		r.stopWrites()
		r.stopTails()
		r.wg.Wait()
	}
	if r.stopGroup != nil {
		r.stopGroup()
		r.groupWG.Wait()
	}
	if r.sender != nil {
		ctx, cancel := context.WithTimeout(context.Background(), requestWaitMax)
		r.sender.close(ctx)
		cancel()
	}
	for _, c := range []*client.Client{r.admin, r.writeC, r.readC} {
		if c != nil {
			c.Close()
		}
	}
	if r.net != nil {
		if err := r.net.Close(); err != nil {
			r.logf("%v", err)
		}
	}
	if r.cluster != nil {
		if err := r.cluster.Close(); err != nil {
			r.logf("%v", err)
		}
	}
}

// sortedParts lists the names of the workload's partitions in order.
func (r *run) sortedParts() []string {
	var out []string
	for _, w := range r.writers {
		out = append(out, w.part.String())
	}
	sort.Strings(out)
	return out
}

// scratchDir is where replica copies are opened.
func (r *run) scratchDir() string { return filepath.Join(r.plan.Options.Dir, "replica-check") }
