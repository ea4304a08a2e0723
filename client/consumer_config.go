package client

import (
	"fmt"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// ConsumerConfig configures a Consumer. The zero value of every field
// means its documented default.
//
// There is no group membership protocol: a consumer reads the partitions
// it is assigned. Its Name, when set, only names the committed offsets it
// stores and reads (a Kafka group reduced to its offsets).
type ConsumerConfig struct {
	// Name is the consumer name offsets are committed under (the topic
	// naming rule applies). Empty: Commit and StartCommitted are not
	// available.
	Name string
	// FetchMaxBytes bounds the records of one fetch (soft: a batch larger
	// than this still comes whole). Default 1 MiB.
	FetchMaxBytes int
	// FetchMinBytes makes the broker wait for this many bytes. Default 1.
	FetchMinBytes int
	// FetchMaxWait bounds that wait (the long poll). Default 500 ms.
	FetchMaxWait time.Duration
	// PrefetchMax bounds the fetch results buffered per partition ahead of
	// Poll: each partition keeps fetching until this many wait. Default 2.
	PrefetchMax int
	// PollRecordsMax bounds the records one Poll returns. Default 10000.
	PollRecordsMax int
	// OutOfRange is where a partition restarts when its position is
	// outside the log (deleted by retention, or beyond the end):
	// StartEarliest (the default) or StartLatest.
	OutOfRange Start
	// Rack is the consumer's rack, matched against the nodes' node.rack:
	// with one, each partition is read from an in-sync replica in this
	// rack when the primary names one (follower reads, Kafka's
	// client.rack), and from the primary otherwise. Empty (the default):
	// always from the primary. At most 255 bytes.
	Rack string
}

// Defaults of ConsumerConfig.
const (
	defaultFetchMaxBytes  = 1 << 20
	defaultFetchMinBytes  = 1
	defaultFetchMaxWait   = 500 * time.Millisecond
	defaultPrefetchMax    = 2
	defaultPollRecordsMax = 10000
)

func (c ConsumerConfig) withDefaults() (ConsumerConfig, error) {
	setInt(&c.FetchMaxBytes, defaultFetchMaxBytes)
	setInt(&c.FetchMinBytes, defaultFetchMinBytes)
	setDur(&c.FetchMaxWait, defaultFetchMaxWait)
	setInt(&c.PrefetchMax, defaultPrefetchMax)
	setInt(&c.PollRecordsMax, defaultPollRecordsMax)
	if len(c.Rack) > wire.RackBytesMax {
		return c, fmt.Errorf("client: consumer Rack is %d bytes, at most %d", len(c.Rack), wire.RackBytesMax)
	}
	switch c.OutOfRange.kind {
	case startUnset:
		c.OutOfRange = StartEarliest
	case startEarliest, startLatest:
	default:
		return c, fmt.Errorf("client: consumer OutOfRange must be StartEarliest or StartLatest")
	}
	return c, nil
}

// Start is where an assigned partition starts reading.
type Start struct {
	kind     startKind
	offset   int64
	time     time.Time
	fallback *Start
}

type startKind int

const (
	startUnset startKind = iota
	startOffset
	startEarliest
	startLatest
	startTime
	startCommitted
)

var (
	// StartEarliest starts at the log start offset.
	StartEarliest = Start{kind: startEarliest}
	// StartLatest starts at the high watermark: only records produced from
	// now on.
	StartLatest = Start{kind: startLatest}
)

// StartAt starts at offset.
func StartAt(offset int64) Start { return Start{kind: startOffset, offset: offset} }

// StartAtTime starts at the first record whose batch's newest timestamp is
// at or after t; at the high watermark when there is none.
func StartAtTime(t time.Time) Start { return Start{kind: startTime, time: t} }

// StartCommitted starts at the consumer's committed offset (ConsumerConfig.Name),
// or at fallback when nothing is committed for the partition (or the
// topic was recreated since).
func StartCommitted(fallback Start) Start { return Start{kind: startCommitted, fallback: &fallback} }

// String renders the start for messages.
func (s Start) String() string {
	switch s.kind {
	case startOffset:
		return fmt.Sprintf("offset %d", s.offset)
	case startEarliest:
		return "earliest"
	case startLatest:
		return "latest"
	case startTime:
		return "time " + s.time.Format(time.RFC3339Nano)
	case startCommitted:
		return "committed (else " + s.fallback.String() + ")"
	}
	return "unset"
}
