package node

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/uring"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads n's /metrics as metric families.
func scrape(t *testing.T, n *Node) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	n.metricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, rec.Body)
	}
	return fams
}

var (
	metricName = regexp.MustCompile(`^(corestream|go|process)_[a-z0-9]+(_[a-z0-9]+)*$`)
	// A unit word anywhere but last (before _total, or a histogram's
	// suffixes, which the exposition adds) breaks the convention:
	// corestream_client_bytes_in_total did.
	unitInMiddle = regexp.MustCompile(`_(bytes|seconds|records)_[a-z]`)
)

// Every series /metrics serves follows Prometheus's naming rules: a
// namespace, snake_case, counters end in _total, a unit is the last word
// before _total, durations are in seconds, and histograms name their
// unit. The node has served a produce, a fetch and an error first, so
// that the labelled series exist.
func TestMetricNames(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	s := service.Service(n.svc)
	created := svcCreate(t, s, "metrics", 1)
	ref := service.PartitionRef{Topic: "metrics", Partition: 0, TopicID: created.ID, Generation: service.GenerationUnknown}
	if _, err := await(func(done func(service.ProduceResult, error)) {
		s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, "hello")}, done)
	}); err != nil {
		t.Fatal(err)
	}
	fr, err := await(func(done func(service.FetchResult, error)) {
		s.Fetch(nil, &service.FetchRequest{PartitionRef: ref, MaxBytes: 1 << 20}, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	fr.Records.Release()
	await(func(done func(service.FetchResult, error)) {
		s.Fetch(nil, &service.FetchRequest{PartitionRef: service.PartitionRef{Topic: "missing", Generation: service.GenerationUnknown}}, done)
	})

	fams := scrape(t, n.Node)
	for name, f := range fams {
		if !metricName.MatchString(name) {
			t.Errorf("%s: not namespace_snake_case", name)
		}
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue // the client library's collectors, named by it
		}
		if unitInMiddle.MatchString(strings.TrimSuffix(name, "_total")) {
			t.Errorf("%s: a unit before the last word", name)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s: no help text", name)
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			if !strings.HasSuffix(name, "_total") {
				t.Errorf("%s: a counter not ending in _total", name)
			}
		case dto.MetricType_GAUGE:
			if strings.HasSuffix(name, "_total") {
				t.Errorf("%s: a gauge ending in _total", name)
			}
		case dto.MetricType_HISTOGRAM:
			if !strings.HasSuffix(name, "_seconds") && !strings.HasSuffix(name, "_bytes") {
				t.Errorf("%s: a histogram without its unit last", name)
			}
		}
		if strings.Contains(name, "_ms") || strings.Contains(name, "milliseconds") {
			t.Errorf("%s: durations are in seconds", name)
		}
	}
	// The series the docs promise are there, with their labels.
	for _, want := range []string{"corestream_service_request_duration_seconds", "corestream_service_errors_total",
		"corestream_client_received_bytes_total", "corestream_produced_bytes_total", "corestream_fetched_bytes_total",
		"corestream_shard_inbox_depth", "corestream_metadata_generation", "corestream_partitions_led",
		"go_goroutines", "process_cpu_seconds_total"} {
		if fams[want] == nil {
			t.Errorf("%s missing from /metrics", want)
		}
	}
	count := func(fam, api string) uint64 {
		for _, m := range fams[fam].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "api" && l.GetValue() == api {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
		return 0
	}
	if got := count("corestream_service_request_duration_seconds", "produce"); got != 1 {
		t.Errorf("produce calls: %d, want 1", got)
	}
	if got := count("corestream_service_request_duration_seconds", "fetch"); got != 2 {
		t.Errorf("fetch calls: %d, want 2", got)
	}
	var unknown float64
	for _, m := range fams["corestream_service_errors_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["api"] == "fetch" && labels["code"] == "UNKNOWN_TOPIC_OR_PARTITION" {
			unknown += m.GetCounter().GetValue()
		}
	}
	if unknown != 1 {
		t.Errorf("fetch errors UNKNOWN_TOPIC_OR_PARTITION: %v, want 1", unknown)
	}
	if v := fams["corestream_produced_bytes_total"].GetMetric()[0].GetCounter().GetValue(); v <= 0 {
		t.Errorf("produced bytes: %v", v)
	}
	if st := n.svc.Meter().Stats(); st.ProduceRequests != 1 || st.FetchRequests != 2 || st.FetchedBytes < st.ProducedBytes {
		t.Errorf("stats %+v: want 1 produce, 2 fetches, at least the produced bytes fetched (a control batch adds some)", st)
	}
}

// The docs stay true to /metrics: operations.md's table names every
// corestream series a node serves, and every series the Grafana
// dashboard queries exists.
func TestMetricDocs(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	// One error, so that the error counter has a series, and a group's
	// committed offset, so that the lag series exist.
	await(func(done func(service.FetchResult, error)) {
		n.svc.Fetch(nil, &service.FetchRequest{PartitionRef: service.PartitionRef{Topic: "missing", Generation: service.GenerationUnknown}}, done)
	})
	svcCreate(t, n.svc, "documented", 1)
	commitWait(t, []service.Service{n.svc}, "docs", service.OffsetCommit{Topic: "documented", Offset: 0})
	fams := scrape(t, n.Node)
	table, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range fams {
		if strings.HasPrefix(name, "corestream_") && !strings.Contains(string(table), "`"+name+"`") {
			t.Errorf("%s is served but not in docs/operations.md's metrics table", name)
		}
	}
	dash, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	queried := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range regexp.MustCompile(`\b(corestream|process|go)_[a-z0-9_]+`).FindAllString(tg.Expr, -1) {
				queried++
				base := name
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && fams[b] != nil {
						base = b
					}
				}
				if fams[base] == nil && !(strings.HasPrefix(base, "corestream_uring_") && uring.Available() != nil) {
					// (Without io_uring the shards write with pwrite and
					// have no ring to count.)
					t.Errorf("the dashboard queries %s, which /metrics does not serve", name)
				}
			}
		}
	}
	if queried < 20 {
		t.Fatalf("found %d series in the dashboard; the scan is broken", queried)
	}
}
