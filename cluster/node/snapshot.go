package node

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	ctl "github.com/corestream/corestream/cluster/controller"
	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/shard/partition"
)

// Metadata snapshots keep the metadata log short. Every metaSnapshotEvery
// applied entries the controller writes the whole state, with the offset
// it covers, to a checkpoint file, then deletes the metadata log's
// segments that the snapshot covers. A node starts from its snapshot and
// replays the log after it. A follower so far behind that the leader no
// longer has the entries it needs receives the snapshot with raftlite's
// MsgReset and installs it (OnReset).
//
// Snapshot payload (checkpoint kind "MSNP", version 1):
//
//	applied  int64   the last metadata log offset the state includes
//	state    bytes   metadata.State.Snapshot() (JSON)

var metaSnapshotKind = checkpoint.Kind{'M', 'S', 'N', 'P'}

const metaSnapshotFile = "metadata-snapshot.checkpoint"

// metaSnapshotEvery is how many applied metadata entries trigger a new
// snapshot and a compaction of the metadata log (a variable: tests lower it).
var metaSnapshotEvery int64 = 10000

// loadSnapshot reads this node's metadata snapshot; ok is false when
// there is none.
func (c *controller) loadSnapshot() (ok bool, err error) {
	v, p, err := checkpoint.Read(c.d.fs, filepath.Join(c.d.dir, metaSnapshotFile), metaSnapshotKind)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node: %s: %w", metaSnapshotFile, err)
	}
	if v != 1 {
		return false, fmt.Errorf("node: %s: version %d", metaSnapshotFile, v)
	}
	applied, st, err := ctl.DecodeSnapshot(p)
	if err != nil {
		return false, err
	}
	c.Load(applied, st)
	c.snapshot, c.snapshotAt = p, applied
	return true, nil
}

// maybeSnapshot writes a snapshot and compacts the metadata log once
// enough entries were applied since the last one.
func (c *controller) maybeSnapshot() {
	if c.Applied()-c.snapshotAt < metaSnapshotEvery {
		return
	}
	snap := ctl.EncodeSnapshot(c.Applied(), c.State().Snapshot())
	if err := checkpoint.Write(c.d.fs, filepath.Join(c.d.dir, metaSnapshotFile), metaSnapshotKind, 1, snap); err != nil {
		c.d.log.Error("metadata snapshot", "err", err)
		return
	}
	c.snapshot, c.snapshotAt = snap, c.Applied()
	res, err := c.r.ApplyRetentionUpTo(c.Applied())
	if err != nil {
		c.d.log.Warn("metadata log compaction", "err", err)
		return
	}
	c.d.log.Info("metadata snapshot", "applied", c.Applied(), "bytes", len(snap),
		"segments_deleted", res.Segments, "log_start", res.LogStartOffset)
}

// onReset installs the snapshot a leader sent with a log reset: this node
// was so far behind that the entries it needed were compacted away.
func (c *controller) onReset(r *partition.Replica, start int64, snap []byte) {
	if len(snap) == 0 {
		c.d.log.Error("metadata: log reset without a snapshot", "start", start)
		return
	}
	ok, err := c.Install(snap)
	if err != nil {
		c.d.log.Error("metadata: installing a snapshot", "err", err)
		return
	}
	if !ok {
		return
	}
	applied := c.Applied()
	if err := checkpoint.Write(c.d.fs, filepath.Join(c.d.dir, metaSnapshotFile), metaSnapshotKind, 1, snap); err != nil {
		c.d.log.Error("metadata: persisting an installed snapshot", "err", err)
	}
	c.snapshot, c.snapshotAt = snap, applied
	c.installed++
	c.d.log.Info("metadata snapshot installed", "applied", applied, "log_start", start)
	c.publish()
	c.checkLoaded()
}
