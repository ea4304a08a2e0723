package node

import (
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
)

// A metadata change is one INFO line with its generation; a restart
// logs a few partitions in detail and one summary, not a line per
// partition; a stop logs one line with the partitions it closed.
func TestLogSummaries(t *testing.T) {
	const parts = 12
	dir := t.TempDir()
	n := runNode(t, dir, nil)
	s := service.Service(n.svc)
	created := svcCreate(t, s, "logs", parts)
	for p := int32(0); p < parts; p++ {
		ref := service.PartitionRef{Topic: "logs", Partition: p, TopicID: created.ID, Generation: service.GenerationUnknown}
		if _, err := await(func(done func(service.ProduceResult, error)) {
			s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, "v")}, done)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.log.lines("level=INFO", `msg="topic created"`, "topic=logs", "partitions=12", "metadata_generation=1"); len(got) != 1 {
		t.Fatalf("topic created lines: %q", got)
	}
	svcCreate(t, s, "gone", 1)
	if _, err := await(func(done func(metadata.TopicID, error)) {
		s.DeleteTopic(nil, &service.DeleteTopicRequest{Name: "gone"}, done)
	}); err != nil {
		t.Fatal(err)
	}
	if got := n.log.lines("level=INFO", `msg="topic deleted"`, "topic=gone", "metadata_generation=1"); len(got) != 1 {
		t.Fatalf("topic deleted lines: %q", got)
	}
	n.stop(t)
	if got := n.log.lines("level=INFO", `msg="node stopped"`, "partitions_closed=13"); len(got) != 1 {
		t.Fatalf("stop lines: %q", got)
	}

	n = runNode(t, dir, nil)
	waitFor(t, 20*time.Second, "the opening summary", func() bool {
		return len(n.log.lines(`msg="partitions opened"`)) > 0
	})
	sum := n.log.lines(`msg="partitions opened"`)
	if len(sum) != 1 || !strings.Contains(sum[0], "partitions=13") || !strings.Contains(sum[0], "clean=13") {
		t.Errorf("summary: %q, want one line of 13 partitions, all clean", sum)
	}
	if info := n.log.lines("level=INFO", `msg="partition opened"`); len(info) == 0 || len(info) > openLinesInfoMax {
		t.Errorf("%d INFO lines per partition, want 1..%d", len(info), openLinesInfoMax)
	}
	if all := n.log.lines(`msg="partition opened"`); len(all) != 13 {
		t.Errorf("%d partition lines at any level, want 13 (DEBUG keeps them all)", len(all))
	}
	// The replayed history is not logged again at INFO.
	if got := n.log.lines("level=INFO", `msg="topic created"`); len(got) != 0 {
		t.Errorf("a restart logged old metadata changes at INFO: %q", got)
	}
}
