package segment

import (
	"fmt"
	"math"
	"time"

	"github.com/corestream/corestream/segment/batch"
)

// FsyncPolicy says when appended data is made durable.
type FsyncPolicy uint8

// The fsync policies. Their String forms are the configuration values.
const (
	// FsyncAlways syncs every write: each buffer the log submits is a
	// write linked to an fdatasync, and appends coalesced into one buffer
	// share that one sync (group commit). Acknowledge against
	// DurableOffset.
	FsyncAlways FsyncPolicy = iota
	// FsyncInterval syncs when FsyncIntervalMs has passed since the last
	// sync and there is unsynced data (checked on Flush).
	FsyncInterval
	// FsyncMessages syncs once FsyncMessages records have been appended
	// since the last sync (checked on Flush).
	FsyncMessages
	// FsyncNever leaves data in the page cache: it survives a process
	// crash but not a power loss or kernel crash. The log still syncs when
	// a segment is sealed, on Sync and on Close.
	FsyncNever
)

var fsyncNames = [...]string{"always", "interval", "messages", "never"}

// String returns the policy's configuration name.
func (p FsyncPolicy) String() string {
	if int(p) < len(fsyncNames) {
		return fsyncNames[p]
	}
	return fmt.Sprintf("FsyncPolicy(%d)", p)
}

// ParseFsyncPolicy parses "always", "interval", "messages" or "never".
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	for i, n := range fsyncNames {
		if n == s {
			return FsyncPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: fsync policy %q (want always, interval, messages or never)", ErrConfig, s)
}

// PreallocMode says how the space ahead of the active segment's write
// position is prepared (see docs/design/segment.md for the measurement).
type PreallocMode uint8

// Preallocation modes.
const (
	// PreallocAuto is PreallocKeepSize: inside the log (group commit,
	// several syncs in flight) zero-fill measured no faster while writing
	// every byte twice (docs/design/segment.md).
	PreallocAuto PreallocMode = iota
	// PreallocZeroFill writes zeros ahead (through the engine, with an
	// fdatasync), so that an fdatasync after a data write finds its blocks
	// allocated and written and the file size unchanged, and needs no
	// journal commit. It doubles the bytes written; the file is longer than
	// its data until the segment is sealed or closed (recovery stops at the
	// first zero header).
	PreallocZeroFill
	// PreallocKeepSize reserves blocks with fallocate(FALLOC_FL_KEEP_SIZE):
	// no fragmentation, no extra writes, but an fdatasync still commits the
	// size change and the unwritten-extent conversion.
	PreallocKeepSize
)

var preallocNames = [...]string{"auto", "zero-fill", "keep-size"}

// String returns the mode's configuration name.
func (m PreallocMode) String() string {
	if int(m) < len(preallocNames) {
		return preallocNames[m]
	}
	return fmt.Sprintf("PreallocMode(%d)", m)
}

// ParsePreallocMode parses "auto", "zero-fill" or "keep-size".
func ParsePreallocMode(s string) (PreallocMode, error) {
	for i, n := range preallocNames {
		if n == s {
			return PreallocMode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: preallocation mode %q (want auto, zero-fill or keep-size)", ErrConfig, s)
}

// Defaults and bounds of Config. A zero field takes its default.
const (
	// SegmentBytesDefault is the size at which the active segment rolls.
	SegmentBytesDefault = 1 << 30
	// SegmentBytesMax bounds SegmentBytes: positions in the offset index
	// are 32-bit.
	SegmentBytesMax = math.MaxInt32
	// SegmentMsDefault rolls a segment a week after its first append.
	SegmentMsDefault = 7 * 24 * 3600 * 1000
	// IndexIntervalBytesDefault is the spacing of sparse index entries.
	IndexIntervalBytesDefault = 4096
	// FsyncIntervalMsDefault is the interval of FsyncInterval.
	FsyncIntervalMsDefault = 1000
	// FsyncMessagesDefault is the record count of FsyncMessages.
	FsyncMessagesDefault = 10000
	// BatchBytesMaxDefault is the largest batch an append accepts.
	BatchBytesMaxDefault = 1 << 20
	// RetentionMsDefault keeps data a week.
	RetentionMsDefault = 7 * 24 * 3600 * 1000
	// PreallocateBytesDefault is how far ahead of the write position the
	// active segment is preallocated (see docs/design/segment.md).
	PreallocateBytesDefault = 8 << 20
	// WriteBufferBytesDefault is the most a log coalesces into one write
	// before submitting it without waiting for Flush.
	WriteBufferBytesDefault = 1 << 20
	// ChainsInFlightDefault bounds the writes (each with its sync, under
	// FsyncAlways) one log has in flight (measured: 8 beat 4 on io_uring).
	ChainsInFlightDefault = 8
	// CacheTailBytesDefault is how much of the active segment behind its
	// written end stays in the page cache after a writeback sync: a
	// consumer less than this behind the producer reads from memory.
	CacheTailBytesDefault = 128 << 20
)

// Config configures a Log. The zero value is valid: every zero field takes
// its default.
type Config struct {
	// SegmentBytes rolls the active segment before it would grow past
	// this size (default 1 GiB, at most SegmentBytesMax).
	SegmentBytes int64
	// SegmentMs rolls a non-empty active segment this long after its
	// first append (default 7 days; -1 never).
	SegmentMs int64
	// IndexIntervalBytes is the number of log bytes between two sparse
	// index entries (default 4096).
	IndexIntervalBytes int64
	// Fsync is the fsync policy (default FsyncAlways).
	Fsync FsyncPolicy
	// FsyncIntervalMs is FsyncInterval's interval (default 1000).
	FsyncIntervalMs int64
	// FsyncMessages is FsyncMessages' record count (default 10000).
	FsyncMessages int64
	// BatchBytesMax is the largest batch accepted (default 1 MiB, at most
	// batch.BatchBytesMax).
	BatchBytesMax int
	// RetentionBytes deletes the oldest segments while the log is larger
	// (default -1: no size limit).
	RetentionBytes int64
	// RetentionMs deletes segments whose newest timestamp is older
	// (default 7 days; -1: no age limit).
	RetentionMs int64
	// PreallocateBytes is prepared ahead of the active segment's write
	// position, in steps of this size (default 8 MiB; -1 disables).
	PreallocateBytes int64
	// Preallocate says how (default PreallocAuto).
	Preallocate PreallocMode
	// WriteBufferBytes is the largest write the log coalesces appends into
	// (default 1 MiB). A full buffer is submitted at once.
	WriteBufferBytes int
	// WritebackBytes, when positive, starts a background fdatasync every
	// that many bytes written without a sync (policies other than
	// always), bounding the log's dirty page cache. Default 0: off.
	WritebackBytes int64
	// CacheTailBytes: after each writeback sync (WritebackBytes), the
	// synced pages of the active segment more than this many bytes behind
	// its written end are dropped from the page cache (fadvise DONTNEED,
	// on the IO's background worker, on files with a descriptor). On a VM
	// whose fresh page-cache pages are faulted in from the host, a log
	// that keeps its pages cached writes at a third of the speed once a
	// few GB are written (measured); recycled pages cost nothing. A
	// consumer further behind than this reads from the disk. Under
	// FsyncAlways, where every write is synced, the drop runs every
	// WritebackBytes written (on an IO with a background worker). Default
	// CacheTailBytesDefault; -1: never drop.
	CacheTailBytes int64
	// ChainsInFlight bounds the log's writes in flight (default 8). When
	// the bound is reached, submitting blocks until one completes.
	ChainsInFlight int
	// NowMs returns the wall clock in milliseconds (default: time.Now).
	// Rolling by age, the interval policy and retention by age read it.
	NowMs func() int64
	// Stopped is the node's clean-stop record read at this start
	// (LoadStopRecord): OpenLog trusts the log's entry in it as it trusts
	// the log's own clean-shutdown record. Nil: none.
	Stopped *StopRecord
}

func (c Config) withDefaults() (Config, error) {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.SegmentBytes, SegmentBytesDefault)
	def(&c.SegmentMs, SegmentMsDefault)
	def(&c.IndexIntervalBytes, IndexIntervalBytesDefault)
	def(&c.FsyncIntervalMs, FsyncIntervalMsDefault)
	def(&c.FsyncMessages, FsyncMessagesDefault)
	def(&c.RetentionBytes, -1)
	def(&c.RetentionMs, RetentionMsDefault)
	def(&c.PreallocateBytes, PreallocateBytesDefault)
	def(&c.CacheTailBytes, CacheTailBytesDefault)
	if c.BatchBytesMax == 0 {
		c.BatchBytesMax = BatchBytesMaxDefault
	}
	if c.WriteBufferBytes == 0 {
		c.WriteBufferBytes = WriteBufferBytesDefault
	}
	if c.ChainsInFlight == 0 {
		c.ChainsInFlight = ChainsInFlightDefault
	}
	if c.Preallocate == PreallocAuto {
		c.Preallocate = PreallocKeepSize
	}
	if c.NowMs == nil {
		c.NowMs = func() int64 { return time.Now().UnixMilli() }
	}
	switch {
	case c.Fsync > FsyncNever:
		return c, fmt.Errorf("%w: fsync policy %d", ErrConfig, c.Fsync)
	case c.SegmentBytes < 1024 || c.SegmentBytes > SegmentBytesMax:
		return c, fmt.Errorf("%w: SegmentBytes %d not in [1024, %d]", ErrConfig, c.SegmentBytes, SegmentBytesMax)
	case c.SegmentMs < -1:
		return c, fmt.Errorf("%w: SegmentMs %d", ErrConfig, c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return c, fmt.Errorf("%w: IndexIntervalBytes %d", ErrConfig, c.IndexIntervalBytes)
	case c.FsyncIntervalMs < 0 || c.FsyncMessages < 0:
		return c, fmt.Errorf("%w: fsync interval %d ms / %d messages", ErrConfig, c.FsyncIntervalMs, c.FsyncMessages)
	case c.BatchBytesMax < batch.HeaderSize || c.BatchBytesMax > batch.BatchBytesMax:
		return c, fmt.Errorf("%w: BatchBytesMax %d not in [%d, %d]", ErrConfig, c.BatchBytesMax, batch.HeaderSize, batch.BatchBytesMax)
	case c.RetentionBytes < -1 || c.RetentionMs < -1:
		return c, fmt.Errorf("%w: retention %d bytes / %d ms", ErrConfig, c.RetentionBytes, c.RetentionMs)
	case c.Preallocate > PreallocKeepSize:
		return c, fmt.Errorf("%w: preallocation mode %d", ErrConfig, c.Preallocate)
	case c.PreallocateBytes < -1:
		return c, fmt.Errorf("%w: PreallocateBytes %d", ErrConfig, c.PreallocateBytes)
	case c.CacheTailBytes < -1:
		return c, fmt.Errorf("%w: CacheTailBytes %d", ErrConfig, c.CacheTailBytes)
	case c.WriteBufferBytes < 4096 || c.WriteBufferBytes > bufBytesMax:
		return c, fmt.Errorf("%w: WriteBufferBytes %d not in [4096, %d]", ErrConfig, c.WriteBufferBytes, bufBytesMax)
	case c.ChainsInFlight < 1 || c.ChainsInFlight > chainsInFlightMax:
		return c, fmt.Errorf("%w: ChainsInFlight %d not in [1, %d]", ErrConfig, c.ChainsInFlight, chainsInFlightMax)
	}
	return c, nil
}

// chainsInFlightMax bounds Config.ChainsInFlight.
const chainsInFlightMax = 64
