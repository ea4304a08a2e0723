package node

import (
	"testing"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/uring"
)

// The shards' io_uring counters reach /metrics: after an acknowledged
// produce under storage.fsync = always, whose write and sync went
// through a ring, the shards' rings took and reaped submissions, and
// each shard's depth is what it took less what it reaped.
func TestMetricURing(t *testing.T) {
	if err := uring.Available(); err != nil {
		t.Skipf("io_uring refused here, the shards write with pwrite: %v", err)
	}
	n := runNode(t, t.TempDir(), func(c *config.Config) { c.Storage.Fsync = "always" })
	s := service.Service(n.svc)
	created := svcCreate(t, s, "ringed", 1)
	ref := service.PartitionRef{Topic: "ringed", Partition: 0, TopicID: created.ID, Generation: service.GenerationUnknown}
	if _, err := await(func(done func(service.ProduceResult, error)) {
		s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, "ringed")}, done)
	}); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, n.Node)
	byShard := func(name string) map[string]float64 {
		out := map[string]float64{}
		for _, m := range fams[name].GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			for _, l := range m.GetLabel() {
				if l.GetName() == "shard" {
					out[l.GetValue()] = v
				}
			}
		}
		return out
	}
	submitted, reaped, depth := byShard("corestream_uring_submitted_total"), byShard("corestream_uring_completions_total"), byShard("corestream_uring_in_flight")
	if len(submitted) != 2 || len(reaped) != 2 || len(depth) != 2 {
		t.Fatalf("want the 2 shards' series: submitted %v, completions %v, in flight %v", submitted, reaped, depth)
	}
	var total float64
	for sh, sub := range submitted {
		total += reaped[sh]
		if d := depth[sh]; d < 0 || d > sub || reaped[sh] > sub {
			t.Errorf("shard %s: submitted %v, reaped %v, in flight %v", sh, sub, reaped[sh], d)
		}
	}
	if total < 2 {
		t.Fatalf("an acknowledged synced produce: %v completions reaped (a write and its fdatasync are two)", total)
	}
}

// The shards' loop times reach /metrics: every shard has run and waited
// since the node started, and a scrape later neither figure is smaller.
func TestMetricShardLoopTimes(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	read := func() (busy, wait map[string]float64) {
		fams := scrape(t, n.Node)
		get := func(name string) map[string]float64 {
			out := map[string]float64{}
			for _, m := range fams[name].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "shard" {
						out[l.GetValue()] = m.GetCounter().GetValue()
					}
				}
			}
			return out
		}
		return get("corestream_shard_busy_seconds_total"), get("corestream_shard_wait_seconds_total")
	}
	busy, wait := read()
	if len(busy) != 2 || len(wait) != 2 {
		t.Fatalf("want the 2 shards' series: busy %v wait %v", busy, wait)
	}
	for sh := range busy {
		if busy[sh] <= 0 || wait[sh] <= 0 {
			t.Errorf("shard %s: busy %v s, wait %v s; a started shard has done both", sh, busy[sh], wait[sh])
		}
	}
	busy2, wait2 := read()
	for sh := range busy {
		if busy2[sh] < busy[sh] || wait2[sh] < wait[sh] {
			t.Errorf("shard %s went back: busy %v→%v wait %v→%v", sh, busy[sh], busy2[sh], wait[sh], wait2[sh])
		}
	}
}
