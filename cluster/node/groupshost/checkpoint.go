package groupshost

import (
	"fmt"
	"sync"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// Retention of __groups (docs/design/groups.md "Checkpoints"). The
// topic has no time or size retention: a group that last changed long
// ago must not be lost. Its coordinators write checkpoints of their
// state instead (cluster/groups checkpoint.go), and every replica of a
// partition, primary and followers alike, reads its own committed log
// as it grows, finds the begin marker of the newest complete checkpoint
// (a groups.CheckpointTracker) and deletes the whole segments below it
// in the retention pass. All replicas read the same committed log, so
// they cut it at the same checkpoint without being told; the segment
// holding the begin marker is always kept.

// Bounds of the scan.
const (
	// groupsScanBytesMax bounds what one retention pass reads of one
	// replica's log; a replica further behind catches up over the next
	// passes (it deletes less meanwhile, never more).
	groupsScanBytesMax = 64 << 20
	// groupsScanReadBytes bounds one read of the scan.
	groupsScanReadBytes = 1 << 20
)

// groupsScan is how far a replica's scan read, and what it found.
type groupsScan struct {
	tracker *groups.CheckpointTracker
	// next is the offset to read next. Invariant: the tracker has seen
	// every record of the log's committed offsets from where it started
	// to next-1, in order.
	next int64
}

// Scans are the scans of this node's __groups replicas, by replica key.
// The retention passes of several shards use it at once; the zero value
// is ready.
type Scans struct {
	// mu guards m.
	mu sync.Mutex
	m  map[[20]byte]*groupsScan
}

// Retention is the retention pass of a __groups replica: scan the
// committed log past where the last pass stopped, then delete the whole
// segments below the newest complete checkpoint. REQUIRES: on r's shard.
func (g *Scans) Retention(r *partition.Replica) (segment.RetentionResult, error) {
	below, err := g.advance(r)
	if err != nil {
		return segment.RetentionResult{}, err
	}
	return r.ApplyRetentionBelow(below)
}

// advance reads r's committed log from where its scan stopped (at most
// groupsScanBytesMax) and answers the offset of the newest complete
// checkpoint's begin marker, -1 when none was found. A scan that no
// longer fits the log (the replica was created again, or its log start
// passed it) starts over at the log start.
func (g *Scans) advance(r *partition.Replica) (int64, error) {
	log, hw := r.Log(), r.CommitEnd() // an internal log: raft offsets
	if log == nil {
		return -1, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[[20]byte]*groupsScan{}
	}
	s := g.m[r.Key()]
	if start := log.LogStartOffset(); s == nil || s.next < start || s.next > hw {
		s = &groupsScan{tracker: groups.NewCheckpointTracker(), next: start}
		g.m[r.Key()] = s
	}
	var buf []byte
	for read := 0; s.next < hw && read < groupsScanBytesMax; {
		spans, err := log.Read(s.next, groupsScanReadBytes, hw-1)
		if err != nil {
			return s.tracker.Complete(), fmt.Errorf("groupshost: scanning %s for checkpoints at offset %d: %w", metadata.GroupsTopic, s.next, err)
		}
		if len(spans) == 0 {
			break
		}
		buf = buf[:0]
		for _, sp := range spans {
			if buf, err = sp.AppendTo(buf); err != nil {
				break
			}
		}
		segment.ReleaseSpans(spans)
		if err != nil {
			return s.tracker.Complete(), fmt.Errorf("groupshost: scanning %s for checkpoints at offset %d: %w", metadata.GroupsTopic, s.next, err)
		}
		next, err := eachGroupsRecord(buf, s.next, s.tracker.Observe)
		if err != nil {
			return s.tracker.Complete(), err
		}
		if next <= s.next {
			break // no whole batch: the next pass reads again
		}
		read += len(buf)
		s.next = next
	}
	return s.tracker.Complete(), nil
}

// eachGroupsRecord calls fn with each record at or past from of the
// batches in buf (control batches, the consensus layer's, are skipped),
// and answers the offset after the last whole batch. The key and value
// alias buf.
func eachGroupsRecord(buf []byte, from int64, fn func(off int64, key, value []byte)) (int64, error) {
	next, err := batch.EachRecord(buf, from, fn)
	if err != nil {
		return from, fmt.Errorf("groupshost: reading %s %w", metadata.GroupsTopic, err)
	}
	return next, nil
}
