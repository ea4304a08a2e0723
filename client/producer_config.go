package client

import (
	"fmt"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// ProducerConfig configures a Producer. The zero value of every field means
// its documented default.
type ProducerConfig struct {
	// Linger is how long a partition's batch waits for more records after
	// its first one before it is sent. Default 5 ms. A negative value sends
	// each batch as soon as its record is added (one record per batch
	// unless records arrive while the batch is being cut).
	Linger time.Duration
	// BatchBytesMax bounds one batch (uncompressed estimate); a batch is
	// sent when the next record would take it past this. A record larger
	// than this travels alone in its own batch, up to wire.RecordsBytesMax;
	// the broker refuses batches over its storage.max_batch_bytes (4 MiB by
	// default) with MESSAGE_TOO_LARGE. Default 64 KiB.
	BatchBytesMax int
	// BufferedBytesMax bounds the bytes of records accepted and not yet
	// acknowledged, across every partition. Produce and ProduceAsync block
	// (under their context) while it is reached. Default 32 MiB.
	BufferedBytesMax int
	// Acks selects when the broker acknowledges: wire.AcksQuorum (the
	// default: a majority of replicas has the batch) or wire.AcksPrimary.
	Acks wire.Acks
	// Compression compresses each batch. Default batch.CodecNone.
	Compression batch.Codec
	// CompressionLevel is the codec's level; 0 is its default.
	CompressionLevel int
	// Partitioner chooses each record's partition. Default
	// KeyHashPartitioner (Kafka-compatible key placement).
	Partitioner Partitioner
	// DisableIdempotence turns idempotence off. By default the producer
	// gets a producer id and numbers its batches, so retries are written
	// exactly once; without it a retry after a lost connection may write a
	// batch twice.
	DisableIdempotence bool
	// InFlightPerPartitionMax bounds the batches in flight per partition.
	// Default and maximum with idempotence: 32 (wire.IdempotentWindow: the
	// broker remembers the last 32 batches per producer). Default without:
	// 32.
	InFlightPerPartitionMax int
	// DeliveryTimeout bounds the time from a batch's creation to its
	// acknowledgement, retries included; past it the batch fails with
	// ErrDeliveryTimeout. It is the bound of a batch's retries (not
	// Config.RetryAttemptsMax), and it fires on time: sends still in flight
	// to a node that does not answer are abandoned, and fail with an
	// unknown outcome. Default 2 min (Kafka's delivery.timeout.ms).
	DeliveryTimeout time.Duration
	// StopOnFailure keeps each partition's records a prefix of what was
	// produced to it: once a record of a partition fails, every later
	// record of that partition fails with ErrEarlierRecordFailed without
	// being sent, for the producer's life. By default a failed batch only
	// leaves a gap: the batches behind it are renumbered and sent, so
	// records produced after a lost one can be written. A tool that reports
	// "written up to here" (the CLI's produce) needs this.
	StopOnFailure bool
}

// Defaults of ProducerConfig.
const (
	defaultLinger                  = 5 * time.Millisecond
	defaultBatchBytesMax           = 64 << 10
	defaultBufferedBytesMax        = 32 << 20
	defaultInFlightPerPartitionMax = wire.IdempotentWindow
	defaultDeliveryTimeout         = 2 * time.Minute
	// idempotentInFlightMax is the protocol's bound for idempotent producers.
	idempotentInFlightMax = wire.IdempotentWindow
	// recordOverheadBytes is added to a record's key, value and header
	// bytes when charging it against BufferedBytesMax.
	recordOverheadBytes = 32
)

func (c ProducerConfig) withDefaults() (ProducerConfig, error) {
	if c.Linger == 0 {
		c.Linger = defaultLinger
	}
	setInt(&c.BatchBytesMax, defaultBatchBytesMax)
	setInt(&c.BufferedBytesMax, defaultBufferedBytesMax)
	setInt(&c.InFlightPerPartitionMax, defaultInFlightPerPartitionMax)
	setDur(&c.DeliveryTimeout, defaultDeliveryTimeout)
	if c.Partitioner == nil {
		c.Partitioner = KeyHashPartitioner()
	}
	switch {
	case c.Acks != wire.AcksQuorum && c.Acks != wire.AcksPrimary:
		return c, fmt.Errorf("client: producer acks %d is not quorum (0) or primary (1)", c.Acks)
	case !c.DisableIdempotence && c.InFlightPerPartitionMax > idempotentInFlightMax:
		return c, fmt.Errorf("client: an idempotent producer allows at most %d batches in flight per partition, not %d",
			idempotentInFlightMax, c.InFlightPerPartitionMax)
	case c.BatchBytesMax > batch.BatchBytesMax:
		return c, fmt.Errorf("client: producer batch bytes max %d exceeds the format's %d", c.BatchBytesMax, batch.BatchBytesMax)
	case c.BufferedBytesMax < c.BatchBytesMax:
		return c, fmt.Errorf("client: producer buffered bytes max %d is below batch bytes max %d", c.BufferedBytesMax, c.BatchBytesMax)
	}
	if _, err := batch.NewBuilder(batch.Options{Codec: c.Compression, Level: c.CompressionLevel}); err != nil {
		return c, fmt.Errorf("client: producer compression: %w", err)
	}
	return c, nil
}
