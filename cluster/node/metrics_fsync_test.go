package node

import (
	"testing"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/service"
)

// The segment logs' syncs reach /metrics: under storage.fsync = always an
// acknowledged produce was synced, so the histogram has counted syncs,
// every one within its last bucket's count or above it.
func TestMetricLogFsync(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) { c.Storage.Fsync = "always" })
	s := service.Service(n.svc)
	created := svcCreate(t, s, "synced", 1)
	var before uint64
	if fam := scrape(t, n.Node)["corestream_log_fsync_duration_seconds"]; len(fam.GetMetric()) == 1 {
		before = fam.GetMetric()[0].GetHistogram().GetSampleCount()
	}
	ref := service.PartitionRef{Topic: "synced", Partition: 0, TopicID: created.ID, Generation: service.GenerationUnknown}
	if _, err := await(func(done func(service.ProduceResult, error)) {
		s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, "durable")}, done)
	}); err != nil {
		t.Fatal(err)
	}
	fam := scrape(t, n.Node)["corestream_log_fsync_duration_seconds"]
	if fam == nil || len(fam.GetMetric()) != 1 {
		t.Fatalf("/metrics has no corestream_log_fsync_duration_seconds: %v", fam)
	}
	h := fam.GetMetric()[0].GetHistogram()
	if h.GetSampleCount() <= before || h.GetSampleSum() <= 0 {
		t.Fatalf("after an acknowledged produce under fsync = always: %d syncs (before %d), %v s", h.GetSampleCount(), before, h.GetSampleSum())
	}
	b := h.GetBucket()
	if len(b) == 0 || b[len(b)-1].GetCumulativeCount() > h.GetSampleCount() {
		t.Fatalf("buckets %v against count %d", b, h.GetSampleCount())
	}
}
