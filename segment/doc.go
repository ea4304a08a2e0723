// Package segment is a partition's durable log: a directory of segment
// files (<base offset>.log) holding whole RecordBatch v2 batches
// (segment/batch), with sparse .index and .timeindex files, a leader-epoch
// cache and small checkpoint files (segment/checkpoint).
//
// A Log is owned by one goroutine, the shard that owns the partition. Many
// logs share one IO, which owns the shard's Engine (io_uring from
// netio/uring, or the pwrite engine here; the node chooses). Appends
// are copied into the log's write buffer; IO.Flush, once per event-loop
// iteration, hands every log's buffer to the engine as one write, linked to
// an fdatasync under FsyncAlways (group commit). Completions come back in
// any order; the written and durable watermarks advance over a contiguous
// prefix only, and IO's notify callback says when they moved.
//
// Reads return Spans (file, position, length) for sendfile; a span holds a
// reference on its file, so deleting a segment never closes a descriptor
// under a reader. OpenLog recovers: it truncates a torn tail, rebuilds
// indexes and the epoch cache when missing or damaged, finishes an
// interrupted retention or reset, and reports what it dropped.
//
// For a compacted topic, Log.Clean is the log cleaner: in bounded steps
// it keeps, in the sealed segments below a limit, only the latest record
// of every key, never renumbering one and keeping every batch (and every
// consensus batch whole), and swaps each rewritten segment in through a
// temporary file and a rename (docs/design/compaction.md).
//
// All file access goes through segment/vfs, whose in-memory FS crashes and
// injects errors for the tests. docs/design/segment.md has the on-disk
// formats, the recovery algorithm, the failure semantics and the
// measurements.
package segment
