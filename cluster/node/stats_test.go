package node

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
)

// callsOnMetrics is the request count /metrics gives call api (the latency
// histogram's _count), and its errors (service_errors_total, every code).
func callsOnMetrics(fams map[string]*dto.MetricFamily, api string) (calls, errs int64) {
	has := func(m *dto.Metric) bool {
		for _, l := range m.GetLabel() {
			if l.GetName() == "api" && l.GetValue() == api {
				return true
			}
		}
		return false
	}
	for _, m := range fams["corestream_service_request_duration_seconds"].GetMetric() {
		if has(m) {
			calls += int64(m.GetHistogram().GetSampleCount())
		}
	}
	for _, m := range fams["corestream_service_errors_total"].GetMetric() {
		if has(m) {
			errs += int64(m.GetCounter().GetValue())
		}
	}
	return calls, errs
}

// The node's figures behind GET /v1/stats (the console's req/s and B/s)
// count the calls /metrics counts: a call when it is answered, with its
// bytes, an error among them, and a fetch parked in its long poll not
// yet. They counted a call when it started: a parked fetch, or a produce
// awaiting its quorum, was a request with no bytes, and a node's req/s
// and B/s were not of the same calls.
func TestStatsCountAnsweredCalls(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	s := service.Service(n.svc)
	created := svcCreate(t, s, "counted", 1)
	ref := service.PartitionRef{Topic: "counted", Partition: 0, TopicID: created.ID, Generation: service.GenerationUnknown}
	check := func(when string) {
		t.Helper()
		fams := scrape(t, n.Node)
		st := n.svc.Meter().Stats()
		pc, pe := callsOnMetrics(fams, "produce")
		fc, fe := callsOnMetrics(fams, "fetch")
		if st.ProduceRequests != pc || st.ProduceErrors != pe || st.FetchRequests != fc || st.FetchErrors != fe {
			t.Errorf("%s: stats %+v; /metrics produce %d calls %d errors, fetch %d calls %d errors", when, st, pc, pe, fc, fe)
		}
	}
	b := oneBatch(t, "first")
	if _, err := await(func(done func(service.ProduceResult, error)) {
		s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: b}, done)
	}); err != nil {
		t.Fatal(err)
	}
	// A produce refused (a topic id of another history).
	wrong := ref
	wrong.TopicID = metadata.TopicID{1, 2, 3}
	if _, err := await(func(done func(service.ProduceResult, error)) {
		s.Produce(nil, &service.ProduceRequest{PartitionRef: wrong, Records: b}, done)
	}); err == nil {
		t.Fatal("a produce with another topic id was acknowledged")
	}
	check("after a produce and a refused one")
	if st := n.svc.Meter().Stats(); st.ProduceRequests != 2 || st.ProduceErrors != 1 || st.ProducedBytes != int64(len(b)) {
		t.Errorf("after a produce and a refused one: %+v", st)
	}
	// A fetch parked at the end of the log is no request yet.
	hw := describeHW(t, s, "counted", 0)
	answered := make(chan error, 1)
	s.Fetch(nil, &service.FetchRequest{PartitionRef: ref, Offset: hw, MaxBytes: 1 << 20, MinBytes: 1, MaxWait: 20 * time.Second},
		func(r service.FetchResult, err error) { r.Records.Release(); answered <- err })
	check("with a fetch parked")
	if st := n.svc.Meter().Stats(); st.FetchRequests != 0 {
		t.Errorf("with a fetch parked: %d fetch requests counted, want 0", st.FetchRequests)
	}
	// A record answers it: one fetch, with its bytes.
	if _, err := await(func(done func(service.ProduceResult, error)) {
		s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, "second")}, done)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the parked fetch was not answered by a record")
	}
	check("after the fetch answered")
	if st := n.svc.Meter().Stats(); st.FetchRequests != 1 || st.FetchedBytes == 0 {
		t.Errorf("after the fetch answered: %+v", st)
	}
}
