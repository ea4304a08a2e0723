package nodesvc

import (
	"errors"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/httpapi"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// The service's request metrics: a latency histogram per call (its
// _count is the request count), errors per call and wire code, and the
// bytes produced and fetched. They are taken at the service, so every
// front end (native, HTTP, Kafka) is counted once, by the call it made.
// A completion costs one histogram observation and, on an error, one
// counter increment: atomics, no lock.

// svcAPI names a metered service call.
type svcAPI int

const (
	apiProduce svcAPI = iota
	apiFetch
	apiListOffsets
	apiDescribePartition
	apiMetadata
	apiInitProducer
	apiCreateTopic
	apiDeleteTopic
	apiAddPartitions
	apiCommitOffsets
	apiFetchOffsets
	apiMovePrimary
	apiRebalance
	apiReassign
	apiChangeRoster
	apiCount
)

// svcAPINames are the api label's values, by svcAPI.
var svcAPINames = [apiCount]string{"produce", "fetch", "list_offsets", "describe_partition", "metadata", "init_producer",
	"create_topic", "delete_topic", "add_partitions", "commit_offsets", "fetch_offsets", "move_primary", "rebalance", "reassign", "change_roster"}

// svcLatencyBuckets span 100 µs (a produce on the primary's shard) to
// 26 s (a create timing out, a fetch's long poll), by factors of 4.
var svcLatencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// Meter holds the service's request metrics. A nil *Meter meters
// nothing (tests that build a service by hand).
type Meter struct {
	// clock is the node's: latencies are read on it, not on the wall
	// clock, so that a simulated node's metering follows simulated time.
	// On the wall clock an end reads only the monotonic clock
	// (clock.Since), as time.Since did: BenchmarkMeterProduce.
	clock      clock.Clock
	latencyVec *prometheus.HistogramVec
	errorsVec  *prometheus.CounterVec
	// latency is latencyVec's child per call, resolved once.
	latency [apiCount]prometheus.Observer
	// produced and fetched count the record batches' bytes of successful
	// produces and fetches; produces and fetches count their calls and
	// produceErrors and fetchErrors those answered with an error. A call
	// is counted when it is answered, with its bytes, as the latency
	// histogram counts it: a rate of calls and a rate of bytes are of the
	// same calls, and a fetch parked in its long poll counts nowhere yet.
	produced, fetched          atomic.Int64
	produces, fetches          atomic.Int64
	produceErrors, fetchErrors atomic.Int64
	// fetchedRecords counts the offsets of the batches successful fetches
	// answered (each span's last offset less its first, plus one): the
	// records read, without reading a batch header.
	fetchedRecords atomic.Int64
}

// NewMeter is a meter that reads latencies on c, the node's clock.
func NewMeter(c clock.Clock) *Meter {
	m := &Meter{clock: c,
		latencyVec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "corestream", Name: "service_request_duration_seconds",
			Help:    "Time from a service call to its answer, by call (a fetch's includes its long poll); _count is the calls.",
			Buckets: svcLatencyBuckets}, []string{"api"}),
		errorsVec: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "corestream", Name: "service_errors_total",
			Help: "Service calls answered with an error, by call and wire error code."}, []string{"api", "code"}),
	}
	for a := range apiCount {
		m.latency[a] = m.latencyVec.WithLabelValues(svcAPINames[a])
	}
	return m
}

// Collectors are the meter's metrics, for a registry.
func (m *Meter) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.latencyVec, m.errorsVec}
}

// now is the meter's clock, at which a call starts; the zero time for a
// nil meter (which observes nothing).
func (m *Meter) now() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.clock.Now()
}

// observe records one call of api that started at start and answered
// err.
func (m *Meter) observe(api svcAPI, start time.Time, err error) {
	if m == nil {
		return
	}
	m.latency[api].Observe(clock.Since(m.clock, start).Seconds())
	if err != nil {
		m.errorsVec.WithLabelValues(svcAPINames[api], errCodeName(err)).Inc()
	}
}

// metered wraps done so that its call is observed when it answers.
func metered[R any](m *Meter, api svcAPI, done func(R, error)) func(R, error) {
	if m == nil {
		return done
	}
	start := m.clock.Now()
	return func(v R, err error) {
		m.observe(api, start, err)
		done(v, err)
	}
}

// errCodeName is err's wire code name, the one the native protocol and
// HTTP answer (the error-code label is bounded by the wire table).
func errCodeName(err error) string {
	var er *wire.ErrorResponse
	if errors.As(wirecode.Error(err), &er) && er.Err != nil {
		return er.Err.Name
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Name
	}
	return wire.ErrUnknownServerError.Name
}

// meterProduce wraps a produce's done: timed, and its batch's bytes
// counted once it is acknowledged. One closure, so metering costs a
// produce one allocation.
func (s *Service) meterProduce(batchBytes int, done func(service.ProduceResult, error)) func(service.ProduceResult, error) {
	m := s.d.Meter
	if m == nil {
		return done
	}
	start := m.clock.Now()
	return func(v service.ProduceResult, err error) {
		m.observe(apiProduce, start, err)
		m.produces.Add(1)
		if err == nil {
			m.produced.Add(int64(batchBytes))
		} else {
			m.produceErrors.Add(1)
		}
		done(v, err)
	}
}

// meterFetch wraps a fetch's done: timed, and the bytes it answers
// counted (one allocation, as meterProduce).
func (s *Service) meterFetch(done func(service.FetchResult, error)) func(service.FetchResult, error) {
	m := s.d.Meter
	if m == nil {
		return done
	}
	start := m.clock.Now()
	return func(v service.FetchResult, err error) {
		m.observe(apiFetch, start, err)
		m.fetches.Add(1)
		if err != nil {
			m.fetchErrors.Add(1)
		} else {
			m.fetched.Add(v.Records.Bytes)
			var recs int64
			for _, sp := range v.Records.Spans {
				recs += sp.LastOffset - sp.FirstOffset + 1
			}
			m.fetchedRecords.Add(recs)
		}
		done(v, err)
	}
}

// FetchedRecords counts the offsets of the batches successful fetches
// answered (0 for a nil meter).
func (m *Meter) FetchedRecords() int64 {
	if m == nil {
		return 0
	}
	return m.fetchedRecords.Load()
}

// Stats are the figures GET /v1/stats answers.
func (m *Meter) Stats() httpapi.Stats {
	if m == nil {
		return httpapi.Stats{}
	}
	return httpapi.Stats{ProduceRequests: m.produces.Load(), ProducedBytes: m.produced.Load(), ProduceErrors: m.produceErrors.Load(),
		FetchRequests: m.fetches.Load(), FetchedBytes: m.fetched.Load(), FetchErrors: m.fetchErrors.Load()}
}

// Produced and Fetched are the record batch bytes of the successful
// produces and fetches (0 for a nil meter).
func (m *Meter) Produced() int64 {
	if m == nil {
		return 0
	}
	return m.produced.Load()
}

// Fetched: see Produced.
func (m *Meter) Fetched() int64 {
	if m == nil {
		return 0
	}
	return m.fetched.Load()
}

// Calls are the produces and fetches answered (0 for a nil meter).
func (m *Meter) Calls() int64 {
	if m == nil {
		return 0
	}
	return m.produces.Load() + m.fetches.Load()
}
