package segment

import "errors"

// Errors returned by this package. Returned errors wrap them with detail;
// callers use errors.Is.
var (
	// ErrInvalidBatch is returned by AppendLeader and AppendFollower for a
	// batch that fails batch.Validate (it also wraps batch.ErrShort,
	// batch.ErrCorrupt or batch.ErrChecksum). Nothing is appended.
	ErrInvalidBatch = errors.New("segment: invalid batch")
	// ErrBatchTooLarge is returned for a batch over Config.BatchBytesMax.
	ErrBatchTooLarge = errors.New("segment: batch too large")
	// ErrNotContiguous is returned by AppendFollower when a batch's base
	// offset is not the log end offset.
	ErrNotContiguous = errors.New("segment: batch not contiguous with the log end")
	// ErrStaleEpoch is returned when an append carries a leader epoch lower
	// than the last epoch in the log.
	ErrStaleEpoch = errors.New("segment: leader epoch goes backwards")
	// ErrOffsetOutOfRange is returned by Read, TermAt and TruncateTo for an
	// offset below the log start offset or above the log end offset.
	ErrOffsetOutOfRange = errors.New("segment: offset out of range")
	// ErrNotBatchBoundary is returned by TruncateTo when the offset is not
	// the base offset of a batch (nor the log end offset).
	ErrNotBatchBoundary = errors.New("segment: offset is not a batch boundary")
	// ErrNoSpace is returned (wrapping the file system's ENOSPC) when a
	// write found the device full. The log rewinds to before the first
	// failed batch; appends fail with it until the rewind is done (when the
	// log's in-flight writes have completed), then succeed again.
	ErrNoSpace = errors.New("segment: no space left on device")
	// ErrLogFailed is returned by every append after a write or a sync
	// failed in a way that leaves the file's durable contents unknown (EIO
	// on write or fdatasync). It wraps the cause. The log never retries;
	// closing and reopening it recovers from what is on disk.
	ErrLogFailed = errors.New("segment: log failed")
	// ErrClosed is returned by operations on a closed log or dispatcher.
	ErrClosed = errors.New("segment: closed")
	// ErrCorrupt is returned when a segment or index holds bytes that do
	// not parse where the log's own bookkeeping says a batch is.
	ErrCorrupt = errors.New("segment: corrupt data")
	// ErrConfig is returned by OpenLog for an invalid Config.
	ErrConfig = errors.New("segment: invalid config")
	// ErrNotFound is returned by OffsetForTimestamp when no batch has a
	// timestamp at or after the one asked for.
	ErrNotFound = errors.New("segment: not found")
)
