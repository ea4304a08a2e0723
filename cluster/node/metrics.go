package node

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
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
		counter("client_bytes_in_total", "Bytes read from clients.", func() float64 { return float64(st.BytesIn.Load()) })
		counter("client_sendfile_bytes_total", "Bytes sent to clients with sendfile.", func() float64 { return float64(st.SendfileBytes.Load()) })
		gauge("client_connections", "Open client connections.", func() float64 { return float64(n.server.Connections()) })
	}
	counter("logins_failed_total", "Failed logins (wrong or unknown user or password, forged or expired token) on every listener.",
		func() float64 { return float64(n.logins.Failed.Load()) })
	counter("logins_refused_total", "Logins refused without a try because their address failed security.login_failures_max times within the window.",
		func() float64 { return float64(n.logins.Refused.Load()) })
	counter("client_connections_migrated_total", "Client connections moved to the shard that owns the partitions they use.",
		func() float64 { return float64(n.migrations.Load()) })
	gauge("partitions_led", "Partitions whose primary is this node (the metadata group not counted, as in cluster status).",
		func() float64 { return float64(n.leadership().led) })
	gauge("partitions_under_replicated", "Partitions this node leads with fewer in-sync replicas than replicas (cluster.replica_lag_time_max_ms).",
		func() float64 { return float64(n.leadership().underReplicated) })
	gauge("partitions_offline", "Partitions with no available primary; counted by the metadata primary only (0 on other nodes), so the sum over nodes is the cluster's.",
		func() float64 { return float64(n.leadership().offline) })
	gauge("preferred_primaries_led", "Partitions this node leads whose preferred primary (first replica) it is.",
		func() float64 { return float64(n.leadership().preferredLed) })
	gauge("replica_max_lag_records", "Records the most lagging follower of a partition this node leads was missing at the last in-sync check.",
		func() float64 { r, _ := n.lags.lagMax(n.now()); return float64(r) })
	gauge("replica_max_lag_seconds", "Time since the most lagging follower of a partition this node leads last caught up to its log end.",
		func() float64 { _, d := n.lags.lagMax(n.now()); return d.Seconds() })
	gauge("partitions_open_failed", "Partitions this node should host but could not open (retried with back-off; see the log for the cause).",
		func() float64 { return float64(n.openErrs.count()) })
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// leadershipCounts are the per-node leadership gauges, taken from the
// same answers as cluster status (partitionRoute), so they cannot
// disagree with it.
type leadershipCounts struct {
	led, underReplicated, offline, preferredLed int
}

// leadership counts, over the topics of the View, what this node leads.
func (n *Node) leadership() leadershipCounts {
	var c leadershipCounts
	self := int32(n.self)
	metaPrimary, _ := n.metaRoute()
	for _, t := range n.view.Load().Sorted {
		for p := range t.Replicas {
			pr := n.svc.partitionRoute(t, int32(p))
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
