package service

import (
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard/partition"
)

// Bounds the service applies to data calls, whatever the front end.
const (
	// RecordsBytesMax bounds a produced batch and a fetch's MaxBytes
	// (16 MiB, the native protocol's records bound).
	RecordsBytesMax = 16 << 20
	// FetchWaitMax bounds a fetch's long poll.
	FetchWaitMax = 60 * time.Second
)

// GenerationUnknown is the generation of a request that does not name
// one: the routing check skips the generation comparison.
const GenerationUnknown = partition.GenerationUnknown

// Special ListOffsets timestamps (Kafka's values).
const (
	TimestampLatest   = partition.TimestampLatest
	TimestampEarliest = partition.TimestampEarliest
)

// PartitionRef names the partition a data call is for, with the fences a
// client routed it by.
type PartitionRef struct {
	Topic     string
	Partition int32
	// TopicID fences the topic's history: a request routed to another
	// incarnation of the name is ErrUnknownTopicOrPartition. Zero skips
	// the check.
	TopicID metadata.TopicID
	// Generation fences the primary's term: an older one is
	// partition.ErrStaleGeneration (hint: the current one), a newer one
	// partition.ErrNotPrimary. GenerationUnknown skips the check.
	Generation int32
}

// Acks says when a produce is acknowledged.
type Acks int8

const (
	// AcksQuorum acknowledges once a majority of the replicas have the
	// batch: it is committed (below the high watermark).
	AcksQuorum Acks = 0
	// AcksPrimary acknowledges once the primary has written it; a
	// failover may lose it.
	AcksPrimary Acks = 1
)

// ProduceRequest appends one record batch to a partition's primary.
type ProduceRequest struct {
	PartitionRef
	Acks Acks
	// Timeout bounds the wait for the acknowledgement; 0 is the
	// replica's default. On ErrTimedOut the batch may still commit.
	Timeout time.Duration
	// Records is one RecordBatch v2 (magic 2), byte-identical to what is
	// stored; at most RecordsBytesMax. The idempotent producer's id,
	// epoch and base sequence are its header fields: the replica reads
	// them there (partition.ErrOutOfOrderSequence, …), so they are not
	// repeated here.
	// The service reads Records before Produce returns when the partition
	// is owned by the caller's shard, and copies it otherwise: the caller
	// may reuse the buffer once Produce returns, unless Lend lent it.
	Records []byte
	// Lend, when set, lets the partition's log keep Records past Produce
	// and write the batch from where it lies (segment.Lend: the log calls
	// it, before Produce returns, only for a batch it writes in place, and
	// releases the memory once written). It is used only when the
	// partition is owned by the caller's shard; nil: Records is copied.
	Lend segment.Lend
}

// ProduceResult is where an acknowledged batch landed.
type ProduceResult struct {
	BaseOffset      int64
	LogAppendTimeMs int64
	LogStartOffset  int64
}

// Isolation says how far a fetch may read.
type Isolation int8

const (
	// IsolationHighWatermark reads committed batches, up to the high
	// watermark (Kafka's READ_UNCOMMITTED).
	IsolationHighWatermark Isolation = 0
	// IsolationReadCommitted reads up to the last stable offset (Kafka's
	// READ_COMMITTED): the first offset of the oldest transaction still
	// open in the partition, else the high watermark; the answer lists
	// the aborted transactions of the range read.
	IsolationReadCommitted Isolation = 1
)

// FetchRequest reads committed batches of a partition from its primary.
type FetchRequest struct {
	PartitionRef
	// Offset is the first offset wanted; the answer may start with the
	// batch that holds it (offsets below it included).
	Offset int64
	// MaxBytes bounds the answer, at most RecordsBytesMax (clamped); at
	// least one whole batch is returned when one is available.
	MaxBytes uint32
	// MinBytes: with fewer committed bytes available the fetch waits, up
	// to MaxWait (at most FetchWaitMax, clamped; 0 answers at once).
	MinBytes  uint32
	MaxWait   time.Duration
	Isolation Isolation
	// Rack is the consumer's rack (empty: none). With one, the primary
	// answers with a PreferredReadReplica in that rack instead of records
	// when an in-sync replica stands there, and a follower serves the
	// fetch up to its own high watermark instead of answering
	// partition.ErrNotPrimary (follower reads; Kafka's rack_id, KIP-392).
	// A follower that cannot serve answers ErrNotPrimary (it is not in
	// sync, or the generation is newer than its own) or
	// ErrOffsetOutOfRange (Offset is above its high watermark); the
	// consumer then fetches from the primary again.
	Rack string
}

// AbortedTxn is an aborted transaction in a fetch answer: its producer
// and its first offset in the partition (Kafka's AbortedTransaction).
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// NoReplica is the PreferredReadReplica of an answer that names none.
const NoReplica int32 = -1

// FetchResult answers a fetch. The caller owns Records and must call
// Records.Release exactly once, on any goroutine, after it has sent or
// copied them.
type FetchResult struct {
	HighWatermark  int64
	LogStartOffset int64
	// LastStableOffset is the partition's LSO, whatever the isolation.
	LastStableOffset int64
	// Aborted are, for IsolationReadCommitted, the aborted transactions
	// whose records Records may hold: the client drops the records of
	// each producer from its first offset up to its abort marker.
	Aborted []AbortedTxn
	Records Records
	// PreferredReadReplica is the node the consumer should fetch from
	// instead, an in-sync replica in its rack (then Records is empty);
	// NoReplica when it should keep fetching here.
	PreferredReadReplica int32
	// ServedByFollower says this node served the fetch as a follower
	// (counted as a follower read).
	ServedByFollower bool
}

// Records are fetched batches as ranges of segment files, so that a
// front end can send them with sendfile (Spans: each span's Fd, Pos and
// Len; a span whose Fd is vfs.InvalidFd lies on a file system without
// descriptors and must be copied) or copy them (AppendTo). The spans
// hold their files open until Release.
type Records struct {
	// Spans lie back to back in offset order; their lengths sum to Bytes.
	Spans []segment.Span
	Bytes int64
}

// AppendTo appends the batches' bytes to dst, read through the log's
// file system.
func (r *Records) AppendTo(dst []byte) ([]byte, error) {
	for _, sp := range r.Spans {
		var err error
		if dst, err = sp.AppendTo(dst); err != nil {
			return dst, Errorf(partition.ErrStorage, "reading a segment: %v", err)
		}
	}
	return dst, nil
}

// Release lets the spans' files go.
func (r *Records) Release() {
	segment.ReleaseSpans(r.Spans)
	r.Spans = nil
}

// DeleteRecordsRequest moves the log start of a partition up to Offset
// (Kafka's DeleteRecords): the records below it are gone for every
// reader. DeleteRecordsToHighWatermark is the partition's high
// watermark; an offset past it, or another negative one, is
// partition.ErrOffsetOutOfRange. An offset at or below the current
// start changes nothing.
type DeleteRecordsRequest struct {
	PartitionRef
	Offset int64
}

// DeleteRecordsToHighWatermark is a DeleteRecordsRequest's Offset that
// deletes every committed record (Kafka's -1).
const DeleteRecordsToHighWatermark int64 = -1

// ListOffsetsRequest finds an offset of a partition on its primary.
type ListOffsetsRequest struct {
	PartitionRef
	// Timestamp is TimestampEarliest (the log start), TimestampLatest
	// (the high watermark), or ms since the Unix epoch: the first
	// committed batch whose max timestamp is at or after it.
	Timestamp int64
	// Isolation: under IsolationReadCommitted, TimestampLatest is the
	// last stable offset.
	Isolation Isolation
}

// ListOffsetsResult answers ListOffsets.
type ListOffsetsResult struct {
	// Offset is the offset found, -1 when no committed batch matches.
	Offset int64
	// Timestamp is the max timestamp of the batch found by time, else -1.
	Timestamp int64
	// Generation is the generation (Kafka's leader epoch) of the batch
	// holding Offset, or for an offset at the log's end of the batch
	// before it; -1 when unknown (Offset is -1, or the log is empty and
	// holds no generation from before its start).
	Generation       int32
	LogStartOffset   int64
	HighWatermark    int64
	LastStableOffset int64
}

// OffsetForGenerationRequest asks a partition's primary where one of its
// generations ends (Kafka's OffsetForLeaderEpoch): a consumer that read
// up to some offset in that generation compares the answer with its
// position to find out whether the log it read from was truncated under
// it by a change of primary.
type OffsetForGenerationRequest struct {
	// PartitionRef's Generation fences, as for every data call (Kafka's
	// current_leader_epoch).
	PartitionRef
	// Asked is the generation whose end is wanted (Kafka's leader_epoch).
	Asked int32
}

// OffsetForGenerationResult answers OffsetForGeneration.
type OffsetForGenerationResult struct {
	// Generation is the largest generation at or below Asked that the log
	// holds; -1 (with EndOffset -1) when Asked is negative or above every
	// generation the log holds.
	Generation int32
	// EndOffset is where the next generation starts, or for the current
	// one the high watermark (a consumer reads no further), never above
	// the high watermark.
	EndOffset int64
}

// PartitionDetail answers DescribePartition, from the partition's
// primary.
type PartitionDetail struct {
	Route          PartitionRoute
	LogStartOffset int64
	HighWatermark  int64
	LogEndOffset   int64
	SizeBytes      int64
	Segments       int32
	Replicas       []ReplicaProgress
	// LastStableOffset is the first offset of the oldest open
	// transaction, else the high watermark; OpenTransactions counts the
	// producers with a transaction open here.
	LastStableOffset int64
	OpenTransactions int32
	// Compacted says the topic is compacted (cleanup.policy compact);
	// DirtyRatio is then the share of this replica's sealed bytes not
	// cleaned since it opened (the cleaner starts a pass at the topic's
	// min.cleanable.dirty.ratio).
	Compacted  bool
	DirtyRatio float64
	// Producers are the idempotent and transactional producers the
	// partition remembers (Kafka's DescribeProducers), by producer id.
	Producers []ProducerState
}

// ProducerState is one producer a partition remembers.
type ProducerState struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the last sequence written (-1: none in this epoch);
	// LastTimestampMs the largest timestamp of its last batch.
	LastSequence    int32
	LastTimestampMs int64
	// TxnStartOffset is the first offset of its open transaction here,
	// -1 when none is open.
	TxnStartOffset int64
}

// ReplicaProgress is one replica as its primary sees it.
type ReplicaProgress struct {
	NodeID       int32
	LogEndOffset int64
	InSync       bool
	// LastCaughtUpMs is when it last caught up with the primary's log
	// end, in ms since the Unix epoch on the primary's clock (0: never).
	LastCaughtUpMs int64
}
