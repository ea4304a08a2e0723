package node

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// Compaction's topic config defaults (docs/design/compaction.md), Kafka's.
const (
	// deleteRetentionMsDefault keeps a tombstone a day past its
	// segment's largest timestamp (Kafka's delete.retention.ms).
	deleteRetentionMsDefault = 24 * 3600 * 1000
	// minDirtyRatioDefault is Kafka's min.cleanable.dirty.ratio.
	minDirtyRatioDefault = 0.5
)

// cleanerStats counts the log cleaner's work on this node's shards, for
// /metrics (updated by the shards, read when scraped).
type cleanerStats struct {
	// BytesRead by the steps (maps and rewrites); Reclaimed the bytes the
	// rewritten segments lost; Records removed; Segments rewritten.
	BytesRead, Reclaimed, Records, Segments atomic.Int64
	// LastMs is the wall clock of the last step that rewrote a segment
	// (0: none yet).
	LastMs atomic.Int64
}

// add counts one step.
func (s *cleanerStats) add(res segment.CleanResult, nowMs int64) {
	s.BytesRead.Add(res.BytesRead)
	if res.Segments > 0 {
		s.Reclaimed.Add(res.BytesBefore - res.BytesAfter)
		s.Records.Add(res.RecordsRemoved)
		s.Segments.Add(int64(res.Segments))
		s.LastMs.Store(nowMs)
	}
}

// cleanerConfig is t's log cleaner settings, nil unless it is compacted.
func (n *Node) cleanerConfig(t *metadata.Topic) *segment.CleanConfig {
	if !t.Config.Compacted() {
		return nil
	}
	c := &segment.CleanConfig{DeleteRetentionMs: t.Config.DeleteRetentionMs, MinCompactionLagMs: t.Config.MinCompactionLagMs,
		MaxCompactionLagMs: t.Config.MaxCompactionLagMs,
		MinDirtyRatio:      t.Config.MinCleanableDirtyRatio, KeysMax: n.cfg.Storage.CleanerKeysMax}
	if c.DeleteRetentionMs == 0 {
		c.DeleteRetentionMs = deleteRetentionMsDefault
	}
	if c.MinDirtyRatio == 0 {
		c.MinDirtyRatio = minDirtyRatioDefault
	}
	return c
}

// cleanerLoop runs, on shard sh every interval, one bounded cleaner step
// on each of its compacted replicas, within the shard's budget of
// storage.cleaner_bytes_per_sec for the interval (a step reads at least
// one batch). It runs on the shard's timer, like retention, so
// it never runs alongside the shard's produce and fetch work, and each
// replica is cleaned on its own node's schedule.
func (n *Node) cleanerLoop(sh *shard.Shard, every time.Duration) {
	if n.stopped.Load() {
		return
	}
	budget := n.cfg.Storage.CleanerBytesPerSec * every.Milliseconds() / 1000
	if h := n.hosts[sh.ID()]; h != nil && budget > 0 {
		h.Each(func(r *partition.Replica) {
			if !r.Compacted() || budget <= 0 {
				return
			}
			res, err := r.Clean(budget)
			budget -= res.BytesRead
			n.cleaner.add(res, n.clock.Now().UnixMilli())
			switch {
			case err != nil && !errors.Is(err, partition.ErrClosed):
				n.log.Warn("cleaner", "topic", r.Config().Topic, "partition", r.Config().Partition, "err", err)
			case res.Segments > 0:
				n.log.Info("cleaner rewrote segments", "topic", r.Config().Topic, "partition", r.Config().Partition,
					"segments", res.Segments, "records_removed", res.RecordsRemoved, "bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter)
			}
		})
	}
	sh.AfterFunc(every, func() { n.cleanerLoop(sh, every) })
}
