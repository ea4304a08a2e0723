package node

import (
	"testing"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/service"
	dto "github.com/prometheus/client_model/go"
)

// fsyncHistogram is the corestream_log_fsync_duration_seconds series of
// worker in fams, nil when there is none.
func fsyncHistogram(fams map[string]*dto.MetricFamily, worker string) *dto.Histogram {
	for _, m := range fams["corestream_log_fsync_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "worker" && l.GetValue() == worker {
				return m.GetHistogram()
			}
		}
	}
	return nil
}

// The segment logs' syncs reach /metrics: under storage.fsync = always an
// acknowledged produce was synced, so the engine's histogram has counted
// syncs, every one within its last bucket's count or above it; the
// background worker's series is served beside it.
func TestMetricLogFsync(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) { c.Storage.Fsync = "always" })
	s := service.Service(n.svc)
	created := svcCreate(t, s, "synced", 1)
	before := fsyncHistogram(scrape(t, n.Node), "engine").GetSampleCount()
	ref := service.PartitionRef{Topic: "synced", Partition: 0, TopicID: created.ID, Generation: service.GenerationUnknown}
	if _, err := await(func(done func(service.ProduceResult, error)) {
		s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, "durable")}, done)
	}); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, n.Node)
	h := fsyncHistogram(fams, "engine")
	if h == nil || fsyncHistogram(fams, "background") == nil {
		t.Fatalf("/metrics lacks a worker series of corestream_log_fsync_duration_seconds: %v", fams["corestream_log_fsync_duration_seconds"])
	}
	if h.GetSampleCount() <= before || h.GetSampleSum() <= 0 {
		t.Fatalf("after an acknowledged produce under fsync = always: %d syncs (before %d), %v s", h.GetSampleCount(), before, h.GetSampleSum())
	}
	b := h.GetBucket()
	if len(b) == 0 || b[len(b)-1].GetCumulativeCount() > h.GetSampleCount() {
		t.Fatalf("buckets %v against count %d", b, h.GetSampleCount())
	}
}
