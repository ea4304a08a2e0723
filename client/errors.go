package client

import (
	"errors"
	"fmt"

	"github.com/corestream/corestream/netio/wire"
)

// Errors of the client itself. Errors that come from a broker are the wire
// table's (*wire.Error, *wire.ErrorResponse): match them with errors.Is, for
// example errors.Is(err, wire.ErrTopicAlreadyExists), and get the broker's
// precise message with errors.As(err, &er) on a *wire.ErrorResponse.
var (
	// ErrClosed is returned by every call on a Client, Producer or Consumer
	// after its Close, and fails requests still pending at Close.
	ErrClosed = errors.New("client: closed")
	// ErrConnectionLost fails the requests in flight on a connection that
	// broke (reset, closed by the broker, malformed response). A request
	// failed with it has an unknown outcome. The SDK retries on another
	// connection where that is safe; it reaches the caller only when the
	// retries are exhausted.
	ErrConnectionLost = errors.New("client: connection lost")
	// ErrRequestTimeout is wrapped (with ErrConnectionLost) into the errors
	// of the requests on a connection whose node did not answer a request
	// within Config.RequestTimeout plus a margin: the node is hung, stopped
	// or cut off, and the connection is closed so that callers refresh the
	// metadata and follow a new primary. The outcome of those requests is
	// unknown.
	ErrRequestTimeout = errors.New("client: request timeout")
	// ErrNodeSilent is wrapped (with ErrConnectionLost) into the errors
	// of the requests on a connection whose node sent nothing for
	// Config.SilentNodeCheck while the cluster elected another primary
	// for a partition routed to it: the node is paused or cut off, and the
	// requests are retried at the new primary where that is safe. Their
	// outcome is unknown.
	ErrNodeSilent = errors.New("client: node silent while its partitions moved")
	// ErrUnreachable is returned when connecting or handshaking with a node
	// fails at the network level. Nothing was sent: retrying is safe, and
	// the SDK does so (after refreshing the metadata) where it can.
	ErrUnreachable = errors.New("client: broker unreachable")
	// ErrNoBrokers is returned by Dial and by metadata refreshes when no
	// seed or known node answered.
	ErrNoBrokers = errors.New("client: no broker reachable")
	// ErrUnsupported is returned when the broker does not speak any version
	// of an API this client needs (from the handshake).
	ErrUnsupported = errors.New("client: API not supported by the broker")
	// ErrRetriesExhausted is wrapped, together with the last error, when a
	// request still failed with a retriable error after RetryAttemptsMax
	// attempts.
	ErrRetriesExhausted = errors.New("client: retries exhausted")
	// ErrRecordTooLarge is returned by Produce and ProduceAsync for a record
	// that cannot fit in one request (wire.RecordsBytesMax).
	ErrRecordTooLarge = errors.New("client: record too large")
	// ErrProducerFenced fails every record of a producer once a partition
	// answered INVALID_PRODUCER_EPOCH: a newer instance with the same
	// producer id took over. It wraps wire.ErrInvalidProducerEpoch.
	ErrProducerFenced = fmt.Errorf("client: producer fenced: %w", wire.ErrInvalidProducerEpoch)
	// ErrTopicRecreated fails the pending records of a partition whose topic
	// was deleted (and perhaps created again with a new id) while they were
	// buffered: they are never written into the new topic's history.
	ErrTopicRecreated = errors.New("client: topic deleted or recreated")
	// ErrDeliveryTimeout fails a batch that could not be acknowledged within
	// ProducerConfig.DeliveryTimeout. Its outcome is unknown when it had
	// been sent at least once.
	ErrDeliveryTimeout = errors.New("client: delivery timeout")
	// ErrNeverSent is wrapped, with ErrDeliveryTimeout,
	// ErrRetriesExhausted or ErrClosed, by the error of a batch that failed
	// before any attempt reached a broker: it was not written.
	ErrNeverSent = errors.New("never sent")
	// ErrEarlierRecordFailed fails, with ProducerConfig.StopOnFailure, the
	// records of a partition produced after one of its records failed.
	// They were not sent, so they were not written.
	ErrEarlierRecordFailed = errors.New("client: not sent: an earlier record of the partition failed")
	// ErrNotAssigned is returned by consumer calls naming a partition that
	// is not assigned.
	ErrNotAssigned = errors.New("client: partition not assigned")
	// ErrNoConsumerName is returned by Consumer.Commit when the consumer was
	// created without a Name.
	ErrNoConsumerName = errors.New("client: consumer has no name")
)

// PartitionError says which partition an error of a multi-partition call
// (Consumer.Poll, CommitOffsets) belongs to.
type PartitionError struct {
	Topic     string
	Partition int32
	Err       error
}

// Error renders "topic/partition: err".
func (e *PartitionError) Error() string {
	return fmt.Sprintf("%s/%d: %v", e.Topic, e.Partition, e.Err)
}

// Unwrap returns the partition's error.
func (e *PartitionError) Unwrap() error { return e.Err }

// brokerMessage returns the broker's precise text for err when it carries a
// *wire.ErrorResponse, else err's text.
func brokerMessage(err error) string {
	var er *wire.ErrorResponse
	if errors.As(err, &er) {
		return er.Error()
	}
	return err.Error()
}
