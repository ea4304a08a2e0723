package segment

import (
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/segment/vfs"
)

// SyncBucketBounds are the upper bounds of SyncStats' buckets: 50 µs (a
// sync of a device with a volatile cache off, or tmpfs) to 3.3 s (a
// device stalled in writeback), by factors of 4.
var SyncBucketBounds = [...]time.Duration{
	50 * time.Microsecond, 200 * time.Microsecond, 800 * time.Microsecond,
	3200 * time.Microsecond, 12800 * time.Microsecond, 51200 * time.Microsecond,
	204800 * time.Microsecond, 819200 * time.Microsecond, 3276800 * time.Microsecond,
}

// SyncStats times the data syncs an IO's engine completes: a write linked
// to its fdatasync (the io_uring engine; pwrite's write then fdatasync)
// or a standalone fdatasync, from the moment the IO queued it to its
// completion, so a linked write's own time is included. The background
// worker's fdatasyncs of a file (a sealed segment, a writeback sync) are
// timed into a second SyncStats (IO.BackgroundSyncStats); its directory
// syncs are not timed.
// The owner goroutine observes with uncontended atomics (one clock read
// when a sync is queued, one when it completes; appends that carry no
// sync read no clock), the worker with its own two around the call; a
// scrape reads them from any goroutine.
type SyncStats struct {
	// buckets[i] counts syncs that took at most SyncBucketBounds[i] and
	// more than the bound before; buckets[len] those over every bound.
	buckets [len(SyncBucketBounds) + 1]atomic.Uint64
	count   atomic.Uint64
	sumNs   atomic.Int64
}

// observe records one sync that took d.
func (s *SyncStats) observe(d time.Duration) {
	i := 0
	for i < len(SyncBucketBounds) && d > SyncBucketBounds[i] {
		i++
	}
	s.buckets[i].Add(1)
	s.sumNs.Add(int64(d))
	s.count.Add(1)
}

// SyncSnapshot is SyncStats read at one moment.
type SyncSnapshot struct {
	// Count is the syncs timed; Sum their total time.
	Count uint64
	Sum   time.Duration
	// Cumulative[i] counts the syncs that took at most
	// SyncBucketBounds[i], as a Prometheus histogram's buckets do.
	Cumulative [len(SyncBucketBounds)]uint64
}

// Snapshot reads s. The fields are read one by one while syncs complete,
// so Count may run a sync ahead of the buckets; a scrape tolerates that.
func (s *SyncStats) Snapshot() SyncSnapshot {
	var out SyncSnapshot
	var run uint64
	for i := range SyncBucketBounds {
		run += s.buckets[i].Load()
		out.Cumulative[i] = run
	}
	out.Sum = time.Duration(s.sumNs.Load())
	out.Count = max(s.count.Load(), run+s.buckets[len(SyncBucketBounds)].Load())
	return out
}

// Add adds o's figures to s (the syncs of several IOs).
func (s *SyncSnapshot) Add(o SyncSnapshot) {
	s.Count += o.Count
	s.Sum += o.Sum
	for i := range s.Cumulative {
		s.Cumulative[i] += o.Cumulative[i]
	}
}

// SyncStats are the syncs this IO's engine completed; the pointer stays
// valid for the IO's life and may be read from any goroutine.
func (d *IO) SyncStats() *SyncStats { return &d.syncs }

// BackgroundSyncStats are the fdatasyncs this IO's background worker ran
// (the seal of a segment under the policies other than always, a
// writeback sync; see background): a sealed segment's sync can flush a
// gigabyte of page cache and take seconds, which a slow disk shows here
// first. Kept apart from SyncStats, whose syncs an acknowledgement waits
// for. The pointer stays valid for the IO's life.
func (d *IO) BackgroundSyncStats() *SyncStats { return &d.bgSyncs }

// timedSync runs f.Sync, timing it into s when it succeeds (a failed
// sync poisons the log; its time says nothing about the disk's latency).
// It may run on any goroutine.
func timedSync(s *SyncStats, f vfs.File) error {
	start := time.Now()
	if err := f.Sync(); err != nil {
		return err
	}
	s.observe(time.Since(start))
	return nil
}
