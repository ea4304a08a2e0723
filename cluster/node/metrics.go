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
	counter("client_connections_migrated_total", "Client connections moved to the shard that owns the partitions they use.",
		func() float64 { return float64(n.migrations.Load()) })
	gauge("partitions_led", "Partitions whose primary is this node.", func() float64 {
		return float64(len(n.routes.ledBy(int32(n.self))))
	})
	gauge("partitions_open_failed", "Partitions this node should host but could not open (retried with back-off; see the log for the cause).",
		func() float64 { return float64(n.openErrs.count()) })
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
