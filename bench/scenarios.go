package bench

import (
	"fmt"
	"time"
)

// The comparison's scenarios (make bench-compare). Each names its
// deployment, its workload and the figures shown, with the targets of
// issues 3 and 7 where they apply.

// Groups of rows in the comparison table.
const (
	groupPeer      = "corestream vs NATS JetStream"
	groupShards    = "shard scaling (corestream)"
	groupParts     = "partition scaling (corestream)"
	groupIdle      = "idle cost (corestream)"
	pendingCluster = "pending: cluster"
)

// Scenario is one workload against one kind of deployment.
type Scenario struct {
	// Name identifies the scenario (directories, --only).
	Name string
	// Title says what it is in the table.
	Title string
	// Group is the table section.
	Group string
	// Nodes is 1, or 3 for a cluster (factor 3).
	Nodes int
	// Fsync is corestream's storage.fsync: never or always; NATS runs
	// with the matching sync_interval.
	Fsync string
	// Shards is corestream's shard.count (0: one per CPU).
	Shards int
	// Peer also runs the workload against NATS JetStream.
	Peer bool
	// Spec is the workload (brokers are filled per run).
	Spec Spec
	// IdleFor, when positive, makes the scenario an idle measurement:
	// the workload only creates the topic (and sends one message), then
	// the server's CPU is measured for this long.
	IdleFor time.Duration
	// Figures are the rows it contributes.
	Figures []Figure
}

// Figure is one measured quantity of a scenario.
type Figure struct {
	// Name labels the row ("msg/s", "ack p99").
	Name string
	// Unit is "msg/s", "B/s", "ns" or "%cpu".
	Unit string
	// Kind is the total it reads: "produce", "consume", or "" for
	// figures of the deployment.
	Kind string
	// Get reads the figure from a run's result.
	Get func(*RunResult) (float64, bool)
	// Quantile is the percentile a latency figure reads (50, 99, 99.9).
	Quantile float64
	// VsRTT shows a latency as a multiple of the loopback round trip at
	// the same percentile: for one message at a time, where the round
	// trip is the floor (not for saturating runs, whose latency is
	// queueing).
	VsRTT bool
	// Target is the goal, if any.
	Target *Target
}

// Target is a goal a figure must meet.
type Target struct {
	// Text says it ("≥ 5× NATS").
	Text string
	// Kind says how to check it: "ratio>=" (corestream / peer at least
	// Value), "ratio<=" (at most Value), "tcp>=" (fraction of the TCP
	// limit at least Value), "rtt<=" (a multiple of the round trip at
	// most Value), "ideal>=" (fraction of the ideal broker at least
	// Value), "<" and "<=" (the figure below, or at most, Value, in its
	// unit).
	Kind  string
	Value float64
}

func msgsPerSec(kind string) Figure {
	return Figure{Name: kind + " msg/s", Unit: "msg/s", Kind: kind, Get: func(r *RunResult) (float64, bool) {
		a := r.total(kind)
		return a.MessagesPerSec, a != nil && a.Messages > 0
	}}
}

func bytesPerSec(kind string) Figure {
	return Figure{Name: kind + " MB/s", Unit: "B/s", Kind: kind, Get: func(r *RunResult) (float64, bool) {
		a := r.total(kind)
		return a.BytesPerSec, a != nil && a.Messages > 0
	}}
}

// latencyFigure reads a percentile of kind's latency (q: 50, 99, 99.9).
func latencyFigure(label, kind string, q float64) Figure {
	return Figure{Name: fmt.Sprintf("%s p%g", label, q), Unit: "ns", Kind: kind, Quantile: q, Get: func(r *RunResult) (float64, bool) {
		a := r.total(kind)
		if a == nil || a.Latency == nil {
			return 0, false
		}
		l := a.Latency
		switch q {
		case 50:
			return float64(l.P50Ns), true
		case 90:
			return float64(l.P90Ns), true
		case 99:
			return float64(l.P99Ns), true
		case 99.9:
			return float64(l.P999Ns), true
		}
		return float64(l.MaxNs), true
	}}
}

// The names of the CPU per message rows: the servers', the load
// generator's, and the two together.
const (
	cpuFigureName       = "server CPU/msg"
	clientCPUFigureName = "client CPU/msg"
	totalCPUFigureName  = "client+server CPU/msg"
)

// cpuFigure is the servers' CPU time per message of kind.
func cpuFigure(kind string) Figure {
	return Figure{Name: cpuFigureName, Unit: "ns", Kind: kind, Get: func(r *RunResult) (float64, bool) { return r.cpuPerMessage(kind) }}
}

// clientCPUFigure is the load generator's CPU time per message of kind.
func clientCPUFigure(kind string) Figure {
	return Figure{Name: clientCPUFigureName, Unit: "ns", Kind: kind, Get: func(r *RunResult) (float64, bool) { return r.loadCPUPerMessage(kind) }}
}

// totalCPUFigure is the load generator's and the servers' CPU time per
// message of kind together (both must have been measured): against the
// ideal broker's, it says whether the machine's cores are what limits a
// run, since client and servers share them.
func totalCPUFigure(kind string) Figure {
	return Figure{Name: totalCPUFigureName, Unit: "ns", Kind: kind, Get: func(r *RunResult) (float64, bool) {
		s, ok1 := r.cpuPerMessage(kind)
		c, ok2 := r.loadCPUPerMessage(kind)
		return s + c, ok1 && ok2
	}}
}

// busyFigure is the load generator's and the servers' CPU time together
// over the load's wall time, in percent of one core: near 100 × the
// machine's cores, the cores are the limit; well below, something waits.
func busyFigure() Figure {
	return Figure{Name: "client+server CPU busy", Unit: "%cpu", Get: func(r *RunResult) (float64, bool) {
		if r.LoadNs <= 0 || r.LoadCPUNs <= 0 || r.ServerCPUNs <= 0 {
			return 0, false
		}
		return 100 * float64(r.LoadCPUNs+r.ServerCPUNs) / float64(r.LoadNs), true
	}}
}

// cpuFigures are the server and client CPU per message of kind.
func cpuFigures(kind string) []Figure { return []Figure{cpuFigure(kind), clientCPUFigure(kind)} }

func with(f Figure, t Target) Figure { f.Target = &t; return f }

func vsRTT(f Figure) Figure { f.VsRTT = true; return f }

var (
	fiveTimesPeer = Target{Text: "≥ 5× NATS", Kind: "ratio>=", Value: 5}
	halfPeerP99   = Target{Text: "≤ ½ NATS", Kind: "ratio<=", Value: 0.5}
	threeRTT      = Target{Text: "≤ 3× RTT", Kind: "rtt<=", Value: 3}
)

// Scenarios returns the comparison's scenarios for measured time d and
// warm-up w.
func Scenarios(d, w time.Duration) []Scenario {
	base := func(mode Mode) Spec {
		s := DefaultSpec(mode)
		s.Topic, s.Duration, s.Warmup = "bench", d, w
		return s
	}
	async := base(ModeProduce)
	sync := base(ModeProduce)
	sync.Sync = true
	syncPrimary := sync
	syncPrimary.Acks = "primary"
	e2e := base(ModeE2E)
	e2e.Rate, e2e.Linger = 10000, -1 // no batching delay: the peer has none
	e2eLinger := e2e
	e2eLinger.Linger = DefaultSpec(ModeE2E).Linger

	consume := base(ModeConsume)
	consume.Messages, consume.Warmup, consume.Duration = 300_000, 0, 0
	r3 := func(s Spec) Spec { s.ReplicationFactor = 3; return s }
	many := func(partitions int) Spec {
		s := base(ModeProduce)
		s.Partitions, s.Producers = partitions, 2
		return s
	}
	idle := base(ModeProduce)
	idle.Partitions, idle.Messages, idle.Warmup, idle.Duration = 10000, 1, 0, 0

	// The targets of issue 19: a fraction of the ideal broker measured in
	// the same run (MB/s), and server CPU per batched 1 KiB message.
	prodAsync := func(idealTarget float64, cpu Target) []Figure {
		return []Figure{
			with(msgsPerSec("produce"), fiveTimesPeer),
			with(bytesPerSec("produce"), Target{Text: fmt.Sprintf("≥ %g%% ideal", idealTarget*100), Kind: "ideal>=", Value: idealTarget}),
			latencyFigure("ack", "produce", 50), latencyFigure("ack", "produce", 99), with(cpuFigure("produce"), cpu),
			clientCPUFigure("produce"), totalCPUFigure("produce"), busyFigure(),
		}
	}
	cpuHalfMicro := Target{Text: "≤ 0.5µs", Kind: "<=", Value: 500}
	syncFigs := []Figure{msgsPerSec("produce"), with(vsRTT(latencyFigure("ack", "produce", 50)), threeRTT),
		with(vsRTT(latencyFigure("ack", "produce", 99)), halfPeerP99), cpuFigure("produce"), clientCPUFigure("produce")}
	r3Figs := append([]Figure{with(msgsPerSec("produce"), fiveTimesPeer), bytesPerSec("produce"), latencyFigure("ack", "produce", 99)}, cpuFigures("produce")...)
	scaling := append([]Figure{msgsPerSec("produce"), bytesPerSec("produce"), latencyFigure("ack", "produce", 99)}, cpuFigures("produce")...)
	return []Scenario{
		{Name: "1n-never-async", Title: "1 node, fsync never, batched async", Group: groupPeer, Nodes: 1, Fsync: "never", Peer: true, Spec: async, Figures: prodAsync(0.9, cpuHalfMicro)},
		{Name: "1n-always-async", Title: "1 node, fsync always, batched async", Group: groupPeer, Nodes: 1, Fsync: "always", Peer: true, Spec: async, Figures: prodAsync(0.7, cpuHalfMicro)},
		{Name: "1n-never-sync", Title: "1 node, fsync never, sync one-message", Group: groupPeer, Nodes: 1, Fsync: "never", Peer: true, Spec: sync, Figures: syncFigs},
		{Name: "1n-always-sync", Title: "1 node, fsync always, sync one-message", Group: groupPeer, Nodes: 1, Fsync: "always", Peer: true, Spec: sync, Figures: syncFigs},
		{Name: "1n-never-sync-primary", Title: "1 node, fsync never, sync one-message, acks primary", Group: groupPeer, Nodes: 1, Fsync: "never", Spec: syncPrimary, Figures: []Figure{
			msgsPerSec("produce"),
			with(vsRTT(latencyFigure("ack", "produce", 50)), Target{Text: "< 100µs", Kind: "<", Value: 100e3}),
			with(vsRTT(latencyFigure("ack", "produce", 99)), Target{Text: "< 500µs", Kind: "<", Value: 500e3}), cpuFigure("produce"), clientCPUFigure("produce"),
		}},
		{Name: "1n-never-e2e", Title: "1 node, fsync never, e2e at 10k msg/s, no linger", Group: groupPeer, Nodes: 1, Fsync: "never", Peer: true, Spec: e2e, Figures: []Figure{
			msgsPerSec("consume"), vsRTT(latencyFigure("e2e", "consume", 50)), vsRTT(latencyFigure("e2e", "consume", 99)), vsRTT(latencyFigure("e2e", "consume", 99.9)), cpuFigure("produce"), clientCPUFigure("produce"),
		}},
		{Name: "1n-never-e2e-linger", Title: "1 node, fsync never, e2e at 10k msg/s, linger 5ms", Group: groupPeer, Nodes: 1, Fsync: "never", Spec: e2eLinger, Figures: []Figure{
			msgsPerSec("consume"), vsRTT(latencyFigure("e2e", "consume", 50)), vsRTT(latencyFigure("e2e", "consume", 99)), cpuFigure("produce"), clientCPUFigure("produce"),
		}},
		{Name: "1n-never-consume", Title: "1 node, fsync never, consume 300k preloaded", Group: groupPeer, Nodes: 1, Fsync: "never", Peer: true, Spec: consume, Figures: []Figure{
			msgsPerSec("consume"), bytesPerSec("consume"), cpuFigure("consume"), clientCPUFigure("consume"),
		}},
		{Name: "3n-never-async", Title: "3 nodes, factor 3, fsync never, batched async", Group: groupPeer, Nodes: 3, Fsync: "never", Peer: true, Spec: r3(async), Figures: r3Figs},
		{Name: "3n-always-async", Title: "3 nodes, factor 3, fsync always, batched async", Group: groupPeer, Nodes: 3, Fsync: "always", Peer: true, Spec: r3(async), Figures: r3Figs},
		{Name: "3n-never-sync", Title: "3 nodes, factor 3, fsync never, sync one-message", Group: groupPeer, Nodes: 3, Fsync: "never", Peer: true, Spec: r3(sync), Figures: syncFigs},
		{Name: "shards-1", Title: "1 shard, 8 partitions, 2 producers, never", Group: groupShards, Nodes: 1, Fsync: "never", Shards: 1, Spec: many(8), Figures: scaling},
		{Name: "shards-2", Title: "2 shards, 8 partitions, 2 producers, never", Group: groupShards, Nodes: 1, Fsync: "never", Shards: 2, Spec: many(8), Figures: scaling},
		{Name: "partitions-1", Title: "1 partition, 2 producers, never", Group: groupParts, Nodes: 1, Fsync: "never", Spec: many(1), Figures: scaling},
		{Name: "partitions-16", Title: "16 partitions, 2 producers, never", Group: groupParts, Nodes: 1, Fsync: "never", Spec: many(16), Figures: scaling},
		{Name: "partitions-256", Title: "256 partitions, 2 producers, never", Group: groupParts, Nodes: 1, Fsync: "never", Spec: many(256), Figures: scaling},
		{Name: "idle-10000", Title: "10,000 partitions, idle", Group: groupIdle, Nodes: 1, Fsync: "never", Spec: idle, IdleFor: 5 * time.Second, Figures: []Figure{
			{Name: "topic created in", Unit: "ns", Get: func(r *RunResult) (float64, bool) { return float64(r.LoadNs), r.LoadNs > 0 }},
			{Name: "server CPU idle", Unit: "%cpu", Get: func(r *RunResult) (float64, bool) { return r.IdleCPUPercent, r.IdleNs > 0 }},
			{Name: "graceful stop in", Unit: "ns", Get: func(r *RunResult) (float64, bool) { return float64(r.StopNs), r.StopNs > 0 }},
		}},
	}
}
