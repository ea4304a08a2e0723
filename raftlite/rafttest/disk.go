package rafttest

import (
	"fmt"
	"math/rand/v2"

	"github.com/corestream/corestream/raftlite"
)

// Disk is a node's storage as the node layer would keep it, with a crash
// model: Log is what has been written (the page cache), Synced what is on
// the disk for sure. The hard state and log resets are written durably at
// once (the Ready contract asks for that); appended entries become durable
// only at Sync.
type Disk struct {
	// Log is the written log (what raftlite reads).
	Log *raftlite.MemLog
	// Synced is the log as it is on disk.
	Synced *raftlite.MemLog
	// HS is the durable hard state.
	HS raftlite.HardState
	// Snapshot is the last installed snapshot (metadata-group resets).
	Snapshot []byte
}

// NewDisk returns an empty disk whose log starts at start.
func NewDisk(start int64) *Disk {
	return &Disk{Log: raftlite.NewMemLogAt(start, 0), Synced: raftlite.NewMemLogAt(start, 0)}
}

// Apply performs steps 1-3 of a Ready: hard state, reset, entries. It
// returns the entries the reset or the truncation removed.
func (d *Disk) Apply(rd *raftlite.Ready) (removed []raftlite.Entry, err error) {
	if rd.HardStateChanged {
		d.HS = rd.HardState
	}
	if r := rd.Reset; r != nil {
		removed = d.Log.ResetTo(*r)
		d.Synced = d.Log.Clone() // a reset is made durable at once
		d.Snapshot = r.Snapshot
	}
	if len(rd.Entries) > 0 {
		rm, err := d.Log.Append(rd.Entries...)
		if err != nil {
			return removed, fmt.Errorf("applying ready: %w", err)
		}
		removed = append(removed, rm...)
	}
	return removed, nil
}

// Sync makes the written log durable and returns what to report with
// Node.Durable: the last offset and its term. ok is false for an empty log.
func (d *Disk) Sync() (last int64, term int32, ok bool) {
	d.Synced = d.Log.Clone()
	last = d.Log.EndOffset() - 1
	if last < d.Log.StartOffset() {
		return last, 0, false
	}
	term, _ = d.Log.TermAt(last)
	return last, term, true
}

// Compact moves both images' start forward to start (retention removes
// whole segments, a metadata operation that is durable at once).
func (d *Disk) Compact(start int64) error {
	if start > d.Synced.EndOffset() {
		return fmt.Errorf("compact to %d past the synced end %d", start, d.Synced.EndOffset())
	}
	if err := d.Log.Compact(start); err != nil {
		return err
	}
	return d.Synced.Compact(start)
}

// Crash returns the log a restart finds. With rng nil it is the synced
// image. Otherwise it is, at random, either the synced image or a prefix
// of the written log at least as long as the two images' common prefix
// (some unsynced writes reached the disk, some did not). The Disk is reset
// to what was found.
func (d *Disk) Crash(rng *rand.Rand) *raftlite.MemLog {
	found := d.Synced.Clone()
	if rng != nil && rng.IntN(2) == 0 && d.Log.StartOffset() == d.Synced.StartOffset() {
		w := d.Log.All()
		s := d.Synced.All()
		common := 0
		for common < len(w) && common < len(s) && w[common].Base == s[common].Base &&
			w[common].Term == s[common].Term && w[common].Last == s[common].Last {
			common++
		}
		keep := common + rng.IntN(len(w)-common+1)
		found = d.Log.Clone()
		if keep < len(w) {
			if _, err := found.TruncateTo(w[keep].Base); err != nil {
				panic(err)
			}
		}
	}
	d.Log, d.Synced = found, found.Clone()
	return found
}
