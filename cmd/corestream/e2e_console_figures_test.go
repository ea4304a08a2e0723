package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
)

// httpGet answers the body of GET url, failing the test on anything but
// a 200.
func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return b
}

// metricValue is the value of the series of /metrics text whose name and
// labels are exactly series (e.g. `x_total` or `x{api="produce"}`); -1
// when there is none.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// metricSum sums the series of /metrics text whose line starts with
// prefix (a name and the first labels).
func metricSum(text, prefix string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				v, err := strconv.ParseFloat(line[i+1:], 64)
				if err == nil {
					sum += v
				}
			}
		}
	}
	return sum
}

// The figures the console shows (the summary and node rows of GET
// /v1/cluster; for each node GET /v1/cluster/stats,
// which its node table's rates come from, and the last sample of GET
// /v1/cluster/history, which its charts are drawn from) are the figures
// of that node's /metrics, for every node, the metadata primary
// included, after one producer wrote to every partition of a 3-node
// cluster; and every node, each leading two of the six partitions,
// counted bytes and records for what it led. A node's requests and bytes
// are of the same calls, those answered: the figures once counted a call
// when it started, so a fetch parked in its long poll (or a produce
// awaiting its quorum) was a request with no bytes, and the console's
// counts of requests were not /metrics'.
func TestE2EConsoleFiguresMatchMetrics(t *testing.T) {
	c := startCluster(t, clusterOpts{nodes: 3, http: true, historyMs: 200})
	c.cliOK("", "topic", "create", "figures", "--partitions", "6", "--replication-factor", "3")
	// The load check below wants every node to lead its two partitions
	// while the producer writes: on a loaded machine the first elections
	// can land unevenly until the preferred primaries take over.
	sdk := c.dial(client.Config{})
	waitUntil(t, clusterWaitTimeout, "each node to lead two partitions of the topic", func() (bool, string) {
		routes := topicRoutes(t, sdk, "figures")
		why := ""
		for _, n := range c.plan.Nodes {
			led := ledBy(routes, int32(n.ID))
			why += fmt.Sprintf("node %d leads %v; ", n.ID, led)
			if len(led) != 2 {
				return false, why
			}
		}
		return true, why
	})
	var lines strings.Builder
	for i := range 600 {
		fmt.Fprintf(&lines, "line-%d-%s\n", i, strings.Repeat("x", 100))
	}
	for range 3 {
		c.cliOK(lines.String(), "produce", "figures")
	}
	c.cliOK("", "consume", "figures", "--count", "1800")

	type stats struct {
		ProduceRequests int64 `json:"produce_requests"`
		ProducedBytes   int64 `json:"produced_bytes"`
		ProduceErrors   int64 `json:"produce_errors"`
		FetchRequests   int64 `json:"fetch_requests"`
		FetchedBytes    int64 `json:"fetched_bytes"`
		FetchErrors     int64 `json:"fetch_errors"`
	}
	type sample struct {
		stats
		ProducedRecords int64 `json:"produced_records"`
		FetchedRecords  int64 `json:"fetched_records"`
		PartitionsLed   int32 `json:"partitions_led"`
	}
	metaPrimary := int32(0)
	waitUntil(t, 30*time.Second, "every node's figures to be /metrics' and to count its share", func() (bool, string) {
		var cs struct {
			Nodes []struct {
				NodeID int32 `json:"node_id"`
				stats
			} `json:"nodes"`
		}
		var ch struct {
			Nodes []struct {
				NodeID  int32    `json:"node_id"`
				Samples []sample `json:"samples"`
			} `json:"nodes"`
		}
		page := "http://" + c.plan.Nodes[0].HTTPAddr
		var cl struct {
			MetadataPrimaryID  int32 `json:"metadata_primary_id"`
			MetadataGeneration int32 `json:"metadata_generation"`
			UnderReplicated    int32 `json:"under_replicated"`
			Offline            int32 `json:"offline"`
			Nodes              []struct {
				NodeID    int32 `json:"node_id"`
				Alive     bool  `json:"alive"`
				Primaries int32 `json:"primaries"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(httpGet(t, page+"/v1/cluster"), &cl); err != nil || len(cl.Nodes) != 3 {
			t.Fatalf("cluster: %v %+v", err, cl)
		}
		var under, offline float64
		if err := json.Unmarshal(httpGet(t, page+"/v1/cluster/stats"), &cs); err != nil || len(cs.Nodes) != 3 {
			t.Fatalf("cluster stats: %v %+v", err, cs)
		}
		if err := json.Unmarshal(httpGet(t, page+"/v1/cluster/history"), &ch); err != nil || len(ch.Nodes) != 3 {
			t.Fatalf("cluster history: %v %+v", err, ch)
		}
		for i, n := range c.plan.Nodes {
			m := string(httpGet(t, "http://"+n.HTTPAddr+"/metrics"))
			if metricValue(m, "corestream_metadata_primary") == 1 {
				metaPrimary = int32(n.ID)
			}
			s, h := cs.Nodes[i], ch.Nodes[i].Samples
			if s.NodeID != int32(n.ID) || ch.Nodes[i].NodeID != int32(n.ID) || len(h) == 0 {
				return false, fmt.Sprintf("node %d: stats of node %d, history of node %d with %d samples", n.ID, s.NodeID, ch.Nodes[i].NodeID, len(h))
			}
			last := h[len(h)-1]
			want := stats{
				ProduceRequests: int64(metricValue(m, `corestream_service_request_duration_seconds_count{api="produce"}`)),
				ProduceErrors:   int64(max(metricSum(m, `corestream_service_errors_total{api="produce",`), 0)),
				FetchErrors:     int64(max(metricSum(m, `corestream_service_errors_total{api="fetch",`), 0)),
				ProducedBytes:   int64(metricValue(m, "corestream_produced_bytes_total")),
				FetchRequests:   int64(metricValue(m, `corestream_service_request_duration_seconds_count{api="fetch"}`)),
				FetchedBytes:    int64(metricValue(m, "corestream_fetched_bytes_total"))}
			led := int32(metricValue(m, "corestream_partitions_led"))
			under += metricValue(m, "corestream_partitions_under_replicated")
			offline += metricValue(m, "corestream_partitions_offline")
			// The cluster summary's row of the node: its primaries are
			// what it leads, as it says; the page's node says who is up.
			if cl.Nodes[i].NodeID != int32(n.ID) || cl.Nodes[i].Primaries != led || !cl.Nodes[i].Alive {
				return false, fmt.Sprintf("node %d: cluster row %+v, /metrics leads %d", n.ID, cl.Nodes[i], led)
			}
			if i == 0 && (metricValue(m, "corestream_nodes_alive") != 3 || int32(metricValue(m, "corestream_metadata_generation")) != cl.MetadataGeneration) {
				return false, fmt.Sprintf("node 1's /metrics: nodes alive %v, metadata generation %v; the cluster summary %+v", metricValue(m, "corestream_nodes_alive"),
					metricValue(m, "corestream_metadata_generation"), cl)
			}
			if s.stats != want || last.stats != want || last.PartitionsLed != led || last.FetchedRecords != int64(metricValue(m, "corestream_fetched_records_total")) {
				return false, fmt.Sprintf("node %d: stats %+v, last sample %+v, /metrics %+v (led %d)", n.ID, s, last, want, led)
			}
			// Each node leads two partitions of the topic (and some of
			// the groups topic's): it acknowledged and counted a third
			// of the load, give or take the spread.
			if s.ProducedBytes < 3*600*100/3/3 || last.ProducedRecords < 3*600/3/3 || s.FetchedBytes < 600*100/3/3 || last.FetchedRecords < 600/3/3 {
				return false, fmt.Sprintf("node %d counted too little of the load: %+v", n.ID, last)
			}
		}
		// The summary's under-replicated and offline counts are the
		// nodes' gauges summed, and its metadata primary is the one whose
		// /metrics says so.
		if float64(cl.UnderReplicated) != under || float64(cl.Offline) != offline || cl.MetadataPrimaryID != metaPrimary {
			return false, fmt.Sprintf("cluster summary %+v; /metrics under-replicated %v, offline %v, metadata primary node %d", cl, under, offline, metaPrimary)
		}
		return true, ""
	})
	t.Logf("node %d is the metadata primary; its figures are /metrics' like the others'", metaPrimary)
}
