package node

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/history"
	"github.com/corestream/corestream/cluster/service"
)

// historyOf reads GET /v1/history of base.
func historyOf(t *testing.T, base string) (samples []history.Sample, intervalMs int64) {
	t.Helper()
	code, _, raw := httpRaw(t, "GET", base+"/v1/history", "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/history: %d %s", code, raw)
	}
	var a struct {
		NodeID     int32            `json:"node_id"`
		IntervalMs int64            `json:"interval_ms"`
		Samples    []history.Sample `json:"samples"`
	}
	if err := json.Unmarshal(raw, &a); err != nil || a.NodeID != 1 {
		t.Fatalf("GET /v1/history: %v\n%s", err, raw)
	}
	return a.Samples, a.IntervalMs
}

// The node samples its figures on its own timer into a bounded ring that
// GET /v1/history serves: under a load of produces and fetches the
// samples' counters move by what the load did (bytes as /v1/stats counts
// them, records as the offsets written and read), a group's lag shows as
// the records it has not committed, the times rise by the interval, and
// the ring keeps no more than http.history_samples_max.
func TestHistoryUnderLoad(t *testing.T) {
	const samplesMax = 6
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		c.Node.HTTPAddr = "127.0.0.1:0"
		c.HTTP.HistoryIntervalMs = 100
		c.HTTP.HistorySamplesMax = samplesMax
	})
	base := "http://" + n.HTTPAddr()
	s := service.Service(n.svc)
	created := svcCreate(t, s, "charted", 2)
	// A first sample before the load, the baseline.
	var before history.Sample
	waitFor(t, 10*time.Second, "a first sample", func() bool {
		got, every := historyOf(t, base)
		if every != 100 {
			t.Fatalf("interval %d ms, want 100", every)
		}
		if len(got) > 0 {
			before = got[len(got)-1]
		}
		return len(got) > 0 && before.PartitionsLed >= 2
	})

	const records = 30
	var batchBytes int64
	for i := range records {
		p := int32(i % 2)
		ref := service.PartitionRef{Topic: "charted", Partition: p, TopicID: created.ID, Generation: service.GenerationUnknown}
		b := oneBatch(t, "value-"+strconv.Itoa(i))
		batchBytes += int64(len(b))
		if _, err := await(func(done func(service.ProduceResult, error)) {
			s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: b}, done)
		}); err != nil {
			t.Fatal(err)
		}
	}
	var fetchedBytes int64
	for p := range int32(2) {
		ref := service.PartitionRef{Topic: "charted", Partition: p, TopicID: created.ID, Generation: service.GenerationUnknown}
		fr, err := await(func(done func(service.FetchResult, error)) {
			s.Fetch(nil, &service.FetchRequest{PartitionRef: ref, MaxBytes: 1 << 20}, done)
		})
		if err != nil {
			t.Fatal(err)
		}
		fetchedBytes += fr.Records.Bytes
		fr.Records.Release()
	}
	commitWait(t, []service.Service{s}, "charted-group", service.OffsetCommit{Topic: "charted", Partition: 0, Offset: 0})
	hw0 := describeHW(t, s, "charted", 0)

	var last history.Sample
	var got []history.Sample
	// topicRose is how many records topic's count rose by from before
	// to last (the internal topic's are counted apart).
	topicRose := func(topic string) int64 {
		var a, b int64
		for _, tr := range before.Topics {
			if tr.Topic == topic {
				a = tr.Records
			}
		}
		for _, tr := range last.Topics {
			if tr.Topic == topic {
				b = tr.Records
			}
		}
		return b - a
	}
	waitFor(t, 20*time.Second, "the load in the samples", func() bool {
		got, _ = historyOf(t, base)
		last = got[len(got)-1]
		return last.ProducedBytes-before.ProducedBytes >= batchBytes &&
			last.ProducedRecords-before.ProducedRecords >= records &&
			last.FetchedBytes-before.FetchedBytes >= fetchedBytes &&
			last.FetchedRecords-before.FetchedRecords >= records &&
			len(last.Groups) > 0 && len(got) == samplesMax && topicRose("charted") >= records
	})
	if d := last.ProduceRequests - before.ProduceRequests; d < records {
		t.Errorf("produce requests rose by %d, want at least %d", d, records)
	}
	if d := last.FetchRequests - before.FetchRequests; d < 2 {
		t.Errorf("fetch requests rose by %d, want at least 2", d)
	}
	// Records are offsets: the load's, and the few the internal topic's
	// commit wrote, no more.
	if d := last.ProducedRecords - before.ProducedRecords; d > records+10 {
		t.Errorf("produced records rose by %d for %d records", d, records)
	}
	// The group's lag is partition 0's high watermark (it committed 0),
	// as /metrics has it.
	var lag int64 = -1
	for _, g := range last.Groups {
		if g.Group == "charted-group" {
			lag = g.Lag
		}
	}
	if lag != hw0 {
		t.Errorf("charted-group's lag in the last sample is %d, want partition 0's high watermark %d (groups %+v)", lag, hw0, last.Groups)
	}
	groups, parts, _ := lagSeries(scrape(t, n.Node))
	if float64(lag) != groups["charted-group"] {
		t.Errorf("charted-group's lag: %d in the history, %v on /metrics", lag, groups["charted-group"])
	}
	// Per partition too: the group committed partition 0 only.
	var partLags []history.GroupPartitionLag
	for _, p := range last.GroupPartitions {
		if p.Group == "charted-group" {
			partLags = append(partLags, p)
		}
	}
	if len(partLags) != 1 || partLags[0] != (history.GroupPartitionLag{Group: "charted-group", Topic: "charted", Partition: 0, Lag: hw0}) ||
		float64(hw0) != parts["charted-group/charted/0"] {
		t.Errorf("charted-group's partition lags in the last sample %+v, on /metrics %v; want charted/0 at %d", partLags, parts, hw0)
	}
	if d := topicRose("charted"); d != records {
		t.Errorf("topic charted's records rose by %d, want %d (topics before %+v, last %+v)", d, records, before.Topics, last.Topics)
	}
	// Bounded, oldest first, one interval apart.
	for i := 1; i < len(got); i++ {
		if dt := got[i].TimeMs - got[i-1].TimeMs; dt < 100 {
			t.Errorf("samples %d and %d are %d ms apart, want the interval (100 ms) or more", i-1, i, dt)
		}
	}
	if last.NodesAlive != 1 || last.UnderReplicated != 0 || last.Offline != 0 || last.MetadataGeneration < 1 {
		t.Errorf("last sample's gauges: %+v", last)
	}
}

// describeHW is partition p of topic's high watermark.
func describeHW(t *testing.T, s service.Service, topic string, p int32) int64 {
	t.Helper()
	d, err := await(func(done func(service.PartitionDetail, error)) {
		s.DescribePartition(nil, service.PartitionRef{Topic: topic, Partition: p, Generation: service.GenerationUnknown}, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	return d.HighWatermark
}
