package client

import (
	"time"

	"github.com/corestream/corestream/segment/batch"
)

// Header is one record header (a key and a value; a nil Value is null).
type Header = batch.RecordHeader

// Record is one message. A producer reads Topic, Partition (with
// ManualPartitioner), Key, Value, Headers and Timestamp, and copies them
// before Produce returns: the caller may reuse the record and its slices at
// once. A consumer fills every field.
type Record struct {
	// Topic is the topic's name.
	Topic string
	// Partition is the partition index: chosen by the caller with
	// ManualPartitioner, filled in by the consumer.
	Partition int32
	// Offset is the record's offset in its partition (consumer only).
	Offset int64
	// Timestamp is the record's time. Zero when producing means the time of
	// the Produce call, read once for up to 64 records of one batch: at
	// most the producer's Linger earlier (or the time 64 Produce calls
	// took).
	Timestamp time.Time
	// Key is the record key; nil is a null key (the sticky round robin of
	// the default partitioner), an empty non-nil slice an empty key.
	Key []byte
	// Value is the record value; nil is a null value (a tombstone).
	Value []byte
	// Headers are the record headers, in order; nil when none.
	Headers []Header
}

// Produced is the outcome of one produced record.
type Produced struct {
	// Topic and Partition are where the record went.
	Topic     string
	Partition int32
	// Offset is the record's offset; -1 when the broker acknowledged a
	// resent batch as DUPLICATE_SEQUENCE (written long ago, offset
	// unknown).
	Offset int64
	// Timestamp is the record's timestamp, or the broker's append time for
	// a topic that stamps LogAppendTime.
	Timestamp time.Time
}
