package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard"
)

// Log lines an operator reads (docs/operations.md, "Logs"): one INFO line
// per metadata change with the metadata generation it was applied in,
// one per node going down or coming back, and summaries instead of one
// line per partition when a node opens or closes its partitions. The
// parts of the node call these hooks, each one line where the event
// happens, so that what is logged and how is written here once.

// openSummaryQuietFor is how long no partition must open before the
// partitions opened so far are summed up in one line: a start opens its
// partitions in batches (reconcileBatch per pass and shard), so a
// summary after each batch would be as many lines again.
const openSummaryQuietFor = time.Second

// openLinesInfoMax is how many partitions of one start (or burst of
// openings) get their own INFO line before the summary: a few show what
// a recovery found, the rest are DEBUG.
const openLinesInfoMax = 8

// openSummary sums up opened partitions. mu guards every field.
type openSummary struct {
	mu sync.Mutex
	// opened, clean, recovered and dropped count since the last line:
	// every partition, those closed cleanly, those whose tail was
	// scanned after a crash, and those that lost a torn tail.
	opened, clean, recovered, dropped int
	// first and last are the node's clock at the burst's first and
	// latest opening.
	first, last time.Time
	// armed says a summary check waits on a shard's timer.
	armed bool
}

// logPartitionOpened is the hook for a replica whose log was opened: the
// first openLinesInfoMax partitions of a burst with data get an INFO line
// each, the others DEBUG (a new, empty partition is always DEBUG, one
// that lost a torn tail always WARN: an operator must see it), and a
// summary follows once openings pause.
func (n *Node) logPartitionOpened(topic string, p int32, shardID int, rep segment.RecoveryReport) {
	s := &n.openSum
	s.mu.Lock()
	defer s.mu.Unlock()
	level := slog.LevelDebug
	switch {
	case rep.DataDropped():
		level = slog.LevelWarn
	case rep.LogEndOffset > 0 && s.opened < openLinesInfoMax:
		level = slog.LevelInfo
	}
	n.log.Log(context.Background(), level, "partition opened", "topic", topic, "partition", p,
		"shard", shardID, "clean", rep.Clean, "recovery", rep.String())
	now := n.clock.Now()
	if s.opened == 0 {
		s.first = now
	}
	s.last = now
	s.opened++
	switch {
	case rep.DataDropped():
		s.dropped++
	case rep.Clean || rep.LogEndOffset == 0:
		s.clean++
	default:
		s.recovered++
	}
	if !s.armed && n.group != nil {
		s.armed = true
		sh := n.group.Shard(shardID)
		sh.AfterFunc(openSummaryQuietFor, func() { n.logOpenSummary(sh) })
	}
}

// logOpenSummary writes the summary of the partitions opened since the
// last one once none opened for openSummaryQuietFor, on the node's
// clock; before, it waits again on sh's timer (the clock has no timers:
// a part arms them on the shard that runs it). A clock set back since the
// last opening does not hold the line back: it is written at once, as
// after a pause. Shard thread only.
func (n *Node) logOpenSummary(sh *shard.Shard) {
	s := &n.openSum
	s.mu.Lock()
	now := n.clock.Now()
	if quiet := now.Sub(s.last); quiet >= 0 && quiet < openSummaryQuietFor && s.opened > 0 {
		s.mu.Unlock()
		sh.AfterFunc(openSummaryQuietFor-quiet, func() { n.logOpenSummary(sh) })
		return
	}
	opened, clean, recovered, dropped, took := s.opened, s.clean, s.recovered, s.dropped, now.Sub(s.first)
	s.opened, s.clean, s.recovered, s.dropped, s.armed = 0, 0, 0, 0, false
	s.mu.Unlock()
	if opened == 0 {
		return
	}
	level := slog.LevelInfo
	if dropped > 0 {
		level = slog.LevelWarn
	}
	n.log.Log(context.Background(), level, "partitions opened", "partitions", opened, "clean", clean,
		"recovered", recovered, "data_dropped", dropped, "took", took.Round(time.Millisecond).String())
}

// logStopped is the hook at the end of Stop: one line with the
// partitions closed and the time the stop took.
func (n *Node) logStopped(partitions int, took time.Duration, err error) {
	if err != nil {
		n.log.Warn("node stopped", "partitions_closed", partitions, "took", took.Round(time.Millisecond).String(), "err", err)
		return
	}
	n.log.Info("node stopped", "partitions_closed", partitions, "took", took.Round(time.Millisecond).String())
}

// logMetadataChange is the hook for a metadata command applied at
// offset in the metadata group's generation: one INFO line for a topic
// created or deleted, partitions added and a primary moved; producer id
// allocations and offset commits are routine and not logged. The lines
// of a log replayed at start (before the metadata is loaded) are DEBUG,
// so a restart does not repeat the cluster's history.
func (n *Node) logMetadataChange(cmd metadata.Command, res metadata.Result, offset int64, generation int32) {
	level := slog.LevelInfo
	if !n.metaLoaded.Load() {
		level = slog.LevelDebug
	}
	log := func(msg string, args ...any) {
		n.log.Log(context.Background(), level, msg, append(args, "metadata_generation", generation, "metadata_offset", offset)...)
	}
	switch cmd.Op {
	case metadata.OpCreateTopic:
		if t := res.Topic; t != nil {
			log("topic created", "topic", t.Name, "id", t.ID.String(), "partitions", t.Partitions(), "replication_factor", t.ReplicationFactor)
		}
	case metadata.OpDeleteTopic:
		log("topic deleted", "topic", cmd.Name, "id", cmd.ID.String())
	case metadata.OpAddPartitions:
		if t := res.Topic; t != nil {
			log("partitions added", "topic", t.Name, "partitions", t.Partitions())
		}
	case metadata.OpPrimaryMoved:
		log("primary moved", "topic", cmd.Name, "partition", cmd.Partition)
	case metadata.OpAlterConfig:
		if t := res.Topic; t != nil {
			log("topic config changed", "topic", t.Name, "retention_ms", t.Config.RetentionMs, "retention_bytes", t.Config.RetentionBytes,
				"max_message_bytes", t.Config.MaxMessageBytes, "segment_bytes", t.Config.SegmentBytes, "segment_ms", t.Config.SegmentMs)
		}
	}
}

// logNodeLiveness is the hook for a peer this node sees go down or come
// back, with the metadata generation it saw it in.
func (n *Node) logNodeLiveness(id int32, up bool) {
	_, gen := n.metaRoute()
	if up {
		n.log.Info("node up", "node", id, "metadata_generation", gen)
		return
	}
	n.log.Warn("node down", "node", id, "metadata_generation", gen)
}

// partitionsHosted counts the replicas this node's shards host, asking
// each shard (the hosts are read on their shard only).
func (n *Node) partitionsHosted() int {
	if n.group == nil {
		return 0
	}
	total := 0
	for i := range n.group.Len() {
		_ = n.group.Shard(i).Do(func(*shard.Shard) {
			if h := n.hosts[i]; h != nil {
				total += h.Len()
			}
		})
	}
	return total
}
