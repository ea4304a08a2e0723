package node

import (
	"testing"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/segment"
)

// A compacted topic's active segment rolls by max.compaction.lag.ms when
// that is sooner than its segment.ms, so its records are cleanable within
// the lag (Kafka's KIP-354); a topic that is not compacted rolls by
// segment.ms alone.
func TestTopicSegmentRollMaxCompactionLag(t *testing.T) {
	node := segment.Config{SegmentBytes: 1 << 30, SegmentMs: 7 * 24 * 3600 * 1000}
	for _, c := range []struct {
		name string
		cfg  metadata.TopicConfig
		want int64
	}{
		{"delete", metadata.TopicConfig{MaxCompactionLagMs: 60_000}, node.SegmentMs},
		{"compact, no lag", metadata.TopicConfig{CleanupPolicy: metadata.CleanupCompact}, node.SegmentMs},
		{"compact, lag sooner", metadata.TopicConfig{CleanupPolicy: metadata.CleanupCompact, MaxCompactionLagMs: 60_000}, 60_000},
		{"compact,delete, lag sooner than segment.ms", metadata.TopicConfig{CleanupPolicy: metadata.CleanupCompactDelete,
			MaxCompactionLagMs: 60_000, SegmentMs: 120_000}, 60_000},
		{"compact, segment.ms sooner", metadata.TopicConfig{CleanupPolicy: metadata.CleanupCompact, MaxCompactionLagMs: 60_000, SegmentMs: 1_000}, 1_000},
	} {
		_, ms := topicSegmentRoll(node, &metadata.Topic{Config: c.cfg})
		if ms != c.want {
			t.Errorf("%s: rolls after %d ms, want %d", c.name, ms, c.want)
		}
	}
}
