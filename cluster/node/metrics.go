package node

import (
	"net/http"
	"strconv"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsHandler serves the node's Prometheus metrics. Every metric reads
// an atomic counter or the route table when scraped; nothing on the data
// path updates a Prometheus object.
func (n *Node) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	counter := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "corestream", Name: name, Help: help}, f))
	}
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "corestream", Name: name, Help: help}, f))
	}
	counter("replication_cross_shard_hops_total", "Replication messages that crossed shards (0 when K equals the shard counts).",
		func() float64 { return float64(n.ReplicationHops()) })
	counter("replication_segment_bytes_total", "Bytes this node's primaries sent to learners as whole sealed segments (sendfile), beside the appends.",
		func() float64 { return float64(n.SegmentBytesSent()) })
	counter("primary_moves_started_total", "Primary moves the balancer (or MovePrimary) started on this node.",
		func() float64 { return float64(n.balanceStats.Started.Load()) })
	counter("primary_moves_finished_total", "Primary moves that finished.",
		func() float64 { return float64(n.balanceStats.Finished.Load()) })
	counter("primary_moves_failed_total", "Primary moves that timed out.",
		func() float64 { return float64(n.balanceStats.Failed.Load()) })
	if n.server != nil {
		st := n.server.Stats()
		counter("client_connections_accepted_total", "Client connections accepted.", func() float64 { return float64(st.Accepted.Load()) })
		counter("client_frames_total", "Client request frames.", func() float64 { return float64(st.Frames.Load()) })
		counter("client_received_bytes_total", "Bytes read from client connections.", func() float64 { return float64(st.BytesIn.Load()) })
		counter("client_sent_bytes_total", "Bytes written to client connections with write/writev (sendfile's are apart).", func() float64 { return float64(st.BytesOut.Load()) })
		counter("client_sendfile_bytes_total", "Bytes sent to clients with sendfile.", func() float64 { return float64(st.SendfileBytes.Load()) })
		gauge("client_connections", "Open client connections.", func() float64 { return float64(n.server.Connections()) })
	}
	counter("cleaner_read_bytes_total", "Bytes the log cleaner read from compacted partitions' segments (maps and rewrites).",
		func() float64 { return float64(n.cleaner.BytesRead.Load()) })
	counter("cleaner_reclaimed_bytes_total", "Bytes the log cleaner's rewrites of compacted partitions' segments freed.",
		func() float64 { return float64(n.cleaner.Reclaimed.Load()) })
	counter("cleaner_removed_records_total", "Superseded records and expired tombstones the log cleaner removed.",
		func() float64 { return float64(n.cleaner.Records.Load()) })
	counter("cleaner_segments_rewritten_total", "Segments the log cleaner rewrote.",
		func() float64 { return float64(n.cleaner.Segments.Load()) })
	gauge("cleaner_last_clean_timestamp_seconds", "When the log cleaner last rewrote a segment on this node (Unix seconds; 0: never).",
		func() float64 { return float64(n.cleaner.LastMs.Load()) / 1000 })
	counter("logins_failed_total", "Failed logins (wrong or unknown user or password, forged or expired token) on every listener.",
		func() float64 { return float64(n.logins.Failed.Load()) })
	counter("logins_refused_total", "Logins refused without a try because their address failed security.login_failures_max times within the window.",
		func() float64 { return float64(n.logins.Refused.Load()) })
	// The data path's moves and lending, by listener (cluster/frontend).
	byListener := func(name, help, listener string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "corestream", Name: name, Help: help,
			ConstLabels: prometheus.Labels{"listener": listener}}, f))
	}
	const migratedHelp = "Client connections moved to the shard that owns the partitions they use, by listener."
	const crossHelp = "Data calls (a native request; a partition of a Kafka produce or fetch) served by a shard other than their connection's (two thread hand-offs each), by listener."
	const lentHelp = "Produced batches the log wrote from the connection's read buffer instead of copying them, by listener."
	byListener("client_connections_migrated_total", migratedHelp, config.ListenerClient, func() float64 { return float64(n.migrations.Load()) })
	byListener("client_requests_cross_shard_total", crossHelp, config.ListenerClient, func() float64 { return float64(n.crossShard.Load()) })
	byListener("client_connections_migrated_total", migratedHelp, config.ListenerKafka, func() float64 { return float64(n.kafkaMigrations.Load()) })
	byListener("client_requests_cross_shard_total", crossHelp, config.ListenerKafka, func() float64 { return float64(n.kafkaCrossShard.Load()) })
	for l, srv := range map[string]*netio.Server{config.ListenerClient: n.server, config.ListenerKafka: n.kafka} {
		if srv != nil {
			st := srv.Stats()
			byListener("client_batches_lent_total", lentHelp, l, func() float64 { return float64(st.Retained.Load()) })
		}
	}
	gauge("partitions_led", "Partitions whose primary is this node (the metadata group not counted, as in cluster status).",
		func() float64 { return float64(n.leadership().led) })
	gauge("partitions_under_replicated", "Partitions this node leads with fewer in-sync replicas than replicas (cluster.replica_lag_time_max_ms).",
		func() float64 { return float64(n.leadership().underReplicated) })
	gauge("partitions_offline", "Partitions with no available primary; counted by the metadata primary only (0 on other nodes), so the sum over nodes is the cluster's.",
		func() float64 { return float64(n.leadership().offline) })
	gauge("preferred_primaries_led", "Partitions this node leads whose preferred primary (first replica) it is.",
		func() float64 { return float64(n.leadership().preferredLed) })
	gauge("leader_imbalance_ratio", "Share of the partitions this node is the preferred primary of that another node, or none, leads (0..1); the balancer moves them back above cluster.leader_imbalance_percentage.",
		func() float64 {
			c := n.leadership()
			if c.preferred == 0 {
				return 0
			}
			return float64(c.preferred-c.preferredLed) / float64(c.preferred)
		})
	gauge("replica_max_lag_records", "Records the most lagging follower of a partition this node leads was missing at the last in-sync check.",
		func() float64 { r, _ := n.lags.LagMax(n.clock.Now()); return float64(r) })
	gauge("replica_max_lag_seconds", "Time since the most lagging follower of a partition this node leads last caught up to its log end.",
		func() float64 { _, d := n.lags.LagMax(n.clock.Now()); return d.Seconds() })
	counter("follower_reads_served_total", "Fetches this node served as a follower to a consumer of its rack (follower reads).",
		func() float64 { return float64(n.svc.FollowerReads()) })
	gauge("partitions_open_failed", "Partitions this node should host but could not open (retried with back-off; see the log for the cause).",
		func() float64 { return float64(n.openErrs.count()) })
	n.registerRuntimeMetrics(reg)
	n.registerTLSMetrics(reg)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// registerRuntimeMetrics adds the service's request metrics, the
// metadata group's, the shards' and Go's own to reg.
func (n *Node) registerRuntimeMetrics(reg *prometheus.Registry) {
	if n.svc != nil && n.svc.Meter() != nil {
		m := n.svc.Meter()
		reg.MustRegister(m.Collectors()...)
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "corestream", Name: "produced_bytes_total",
			Help: "Record batch bytes of the produces this node acknowledged as primary."}, func() float64 { return float64(m.Produced()) }))
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "corestream", Name: "fetched_bytes_total",
			Help: "Record batch bytes this node answered to fetches as primary."}, func() float64 { return float64(m.Fetched()) }))
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "corestream", Name: "fetched_records_total",
			Help: "Offsets of the record batches this node answered to fetches (a batch's last offset less its first, plus one)."},
			func() float64 { return float64(m.FetchedRecords()) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "corestream", Name: "metadata_generation",
		Help: "The metadata group's term as this node knows it (-1: none known); it rises with every metadata primary election."},
		func() float64 { _, g := n.metaRoute(); return float64(g) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "corestream", Name: "metadata_primary",
		Help: "1 when this node is the metadata primary, else 0; summed over nodes it is 1 while the cluster has one."},
		func() float64 {
			if lead, _ := n.metaRoute(); lead == int32(n.self) {
				return 1
			}
			return 0
		}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "corestream", Name: "nodes_alive",
		Help: "Roster nodes this node believes up, itself included."},
		func() float64 {
			alive := 0
			for _, m := range n.roster.nodes() {
				if n.alive(int32(m.ID)) {
					alive++
				}
			}
			return float64(alive)
		}))
	if n.group != nil {
		reg.MustRegister(&shardCollector{group: n.group})
		reg.MustRegister(n.groups.LagCollector(n.cfg.HTTP.GroupLagSeriesMax))
	}
	if len(n.hosts) > 0 {
		reg.MustRegister(&logSyncCollector{hosts: n.hosts})
		reg.MustRegister(&ringCollector{hosts: n.hosts})
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// shardCollector reads every shard's counters and inbox depth at a
// scrape, labelled by shard: the shards count with atomics and never
// touch a Prometheus object.
type shardCollector struct{ group *shard.Group }

var (
	shardTasksDesc = prometheus.NewDesc("corestream_shard_tasks_total",
		"Inbox messages (posts and cross-shard calls) a shard ran.", []string{"shard"}, nil)
	shardTimersDesc = prometheus.NewDesc("corestream_shard_timers_total",
		"Timers a shard fired.", []string{"shard"}, nil)
	shardParksDesc = prometheus.NewDesc("corestream_shard_parks_total",
		"Times a shard found nothing to do and blocked in epoll_wait; a busy shard parks rarely.", []string{"shard"}, nil)
	shardRefusedDesc = prometheus.NewDesc("corestream_shard_inbox_refused_total",
		"Posts a shard refused because its inbox was full (answered BUSY).", []string{"shard"}, nil)
	shardInboxDesc = prometheus.NewDesc("corestream_shard_inbox_depth",
		"Messages waiting in a shard's inbox at the scrape.", []string{"shard"}, nil)
	shardBusyDesc = prometheus.NewDesc("corestream_shard_busy_seconds_total",
		"Time a shard's loop ran work (spinning before a park included); its rate is the shard's utilisation of one CPU.", []string{"shard"}, nil)
	shardWaitDesc = prometheus.NewDesc("corestream_shard_wait_seconds_total",
		"Time a shard's loop waited for work, blocked in epoll_wait.", []string{"shard"}, nil)
)

func (c *shardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{shardTasksDesc, shardTimersDesc, shardParksDesc, shardRefusedDesc, shardInboxDesc, shardBusyDesc, shardWaitDesc} {
		ch <- d
	}
}

func (c *shardCollector) Collect(ch chan<- prometheus.Metric) {
	for i := range c.group.Len() {
		sh := c.group.Shard(i)
		st := sh.Stats()
		id := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(shardTasksDesc, prometheus.CounterValue, float64(st.Tasks.Load()), id)
		ch <- prometheus.MustNewConstMetric(shardTimersDesc, prometheus.CounterValue, float64(st.Timers.Load()), id)
		ch <- prometheus.MustNewConstMetric(shardParksDesc, prometheus.CounterValue, float64(st.Parks.Load()), id)
		ch <- prometheus.MustNewConstMetric(shardRefusedDesc, prometheus.CounterValue, float64(st.Refused.Load()), id)
		ch <- prometheus.MustNewConstMetric(shardInboxDesc, prometheus.GaugeValue, float64(sh.InboxDepth()), id)
		busy, wait := sh.LoopTimes()
		ch <- prometheus.MustNewConstMetric(shardBusyDesc, prometheus.CounterValue, busy.Seconds(), id)
		ch <- prometheus.MustNewConstMetric(shardWaitDesc, prometheus.CounterValue, wait.Seconds(), id)
	}
}

// leadershipCounts are the per-node leadership gauges, taken from the
// same answers as cluster status (PartitionRoute), so they cannot
// disagree with it.
type leadershipCounts struct {
	led, underReplicated, offline, preferredLed int
	// preferred counts the partitions this node is the preferred primary
	// of, led here or not (the balancer's preferred imbalance is
	// 1 − preferredLed/preferred).
	preferred int
}

// leadership counts, over the topics of the View, what this node leads.
func (n *Node) leadership() leadershipCounts {
	var c leadershipCounts
	self := int32(n.self)
	metaPrimary, _ := n.metaRoute()
	for _, t := range n.view.Load().Sorted {
		for p := range t.Replicas {
			pr := n.svc.PartitionRoute(t, int32(p))
			if pr.PreferredPrimaryID == self {
				c.preferred++
			}
			switch {
			case pr.PrimaryID < 0:
				if metaPrimary == self {
					c.offline++
				}
			case pr.PrimaryID == self:
				c.led++
				if len(pr.InSync) < len(pr.Replicas) {
					c.underReplicated++
				}
				if pr.PreferredPrimaryID == self {
					c.preferredLed++
				}
			}
		}
	}
	return c
}

// logSyncCollector reads the segment logs' sync timings of every shard's
// IO at a scrape, summed into one histogram per worker: the shards and
// their background workers observe with atomics (segment.SyncStats) and
// never touch a Prometheus object.
type logSyncCollector struct{ hosts []*partition.Host }

var logFsyncDesc = prometheus.NewDesc("corestream_log_fsync_duration_seconds",
	"Time of the segment logs' data syncs, from queueing to completion, by worker: engine (fdatasync with the write linked to it, or standalone; acks wait for these), background (sealed segments, writeback); _count is the syncs.",
	[]string{"worker"}, nil)

func (c *logSyncCollector) Describe(ch chan<- *prometheus.Desc) { ch <- logFsyncDesc }

func (c *logSyncCollector) Collect(ch chan<- prometheus.Metric) {
	var engine, background segment.SyncSnapshot
	for _, h := range c.hosts {
		if h != nil {
			engine.Add(h.IO().SyncStats().Snapshot())
			background.Add(h.IO().BackgroundSyncStats().Snapshot())
		}
	}
	for _, w := range []struct {
		name string
		snap *segment.SyncSnapshot
	}{{"engine", &engine}, {"background", &background}} {
		buckets := make(map[float64]uint64, len(segment.SyncBucketBounds))
		for i, b := range segment.SyncBucketBounds {
			buckets[b.Seconds()] = w.snap.Cumulative[i]
		}
		ch <- prometheus.MustNewConstHistogram(logFsyncDesc, w.snap.Count, w.snap.Sum.Seconds(), buckets, w.name)
	}
}

// ringCollector reads the io_uring counters of every shard whose IO runs
// on the ring (none on the pwrite fallback), labelled by shard: the ring
// counts with atomics where it already submits and reaps.
type ringCollector struct{ hosts []*partition.Host }

// ringStater is the io_uring engine's counters (uring.Engine).
type ringStater interface{ RingStats() uring.RingStats }

var (
	ringInFlightDesc = prometheus.NewDesc("corestream_uring_in_flight",
		"io_uring submissions (SQEs; a write linked to its fdatasync is two) the kernel took and the shard has not reaped: the queue depth.", []string{"shard"}, nil)
	ringSubmittedDesc = prometheus.NewDesc("corestream_uring_submitted_total",
		"io_uring submissions (SQEs) the kernel took from a shard's ring.", []string{"shard"}, nil)
	ringCompletionsDesc = prometheus.NewDesc("corestream_uring_completions_total",
		"io_uring completions (CQEs) a shard reaped from its ring.", []string{"shard"}, nil)
)

func (c *ringCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ringInFlightDesc
	ch <- ringSubmittedDesc
	ch <- ringCompletionsDesc
}

func (c *ringCollector) Collect(ch chan<- prometheus.Metric) {
	for i, h := range c.hosts {
		if h == nil {
			continue
		}
		r, ok := h.IO().Engine().(ringStater)
		if !ok {
			continue
		}
		st := r.RingStats()
		id := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(ringInFlightDesc, prometheus.GaugeValue, float64(st.InFlight()), id)
		ch <- prometheus.MustNewConstMetric(ringSubmittedDesc, prometheus.CounterValue, float64(st.Submitted), id)
		ch <- prometheus.MustNewConstMetric(ringCompletionsDesc, prometheus.CounterValue, float64(st.Reaped), id)
	}
}
