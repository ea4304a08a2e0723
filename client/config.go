package client

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// Config configures a Client. The zero value of every field means its
// documented default; Dial fills them in.
type Config struct {
	// Brokers are the seed addresses (HOST:PORT) used to bootstrap and,
	// when every known node fails, to find the cluster again. At least one.
	Brokers []string
	// ClientID names this client in broker logs. Default "corestream-go".
	ClientID string
	// DialTimeout bounds connecting and handshaking with one node.
	// Default 10 s.
	DialTimeout time.Duration
	// InFlightPerConnMax bounds the requests in flight on one connection
	// (the broker's network.max_inflight_per_conn defaults to 256). A caller
	// beyond it waits for a slot under its context. Default 256.
	InFlightPerConnMax int
	// SingleConnPerNode turns shard-aware connections off: every request
	// to a node goes on one connection, as with a node that does not
	// serve Home. By default (false) produce and fetch requests go on a
	// connection per shard of the node, moved by Home to the shard that
	// owns their partition (at most one per shard used, besides the
	// node's general connection), so they cross no thread in the node.
	SingleConnPerNode bool
	// RetryAttemptsMax bounds the attempts of one request that keeps
	// failing with retriable errors (routing changes, BUSY, lost
	// connections). Attempts that follow a NOT_PRIMARY hint count too. A
	// producer's batches are bounded by ProducerConfig.DeliveryTimeout
	// instead (this bounds only their sequence-error recoveries).
	// Default 10.
	RetryAttemptsMax int
	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff
	// between attempts (doubling from the minimum, with jitter), unless the
	// broker's retry_after_ms asks for longer. A producer's batch ends its
	// backoff early when the metadata shows its partition's route moved on
	// (a new primary or generation), and starts again from the minimum.
	// Defaults 10 ms and 1 s.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// ReconnectBackoffMin and ReconnectBackoffMax bound the wait before
	// dialling a node again after a failed dial (doubling per consecutive
	// failure, with jitter). Defaults 20 ms and 1 s, as Kafka's.
	ReconnectBackoffMin, ReconnectBackoffMax time.Duration
	// MetadataMaxAge is how often the metadata cache is refreshed even when
	// no request failed, so that moved primaries are found before a request
	// bounces. Default 5 min (Kafka's metadata.max.age.ms).
	MetadataMaxAge time.Duration
	// MetadataRefreshBackoff is the least time between the starts of two
	// metadata refreshes caused by failed requests (every routing error,
	// lost connection or timeout causes one); the failures in between
	// share one refresh. It is also the cadence of the refreshes while a
	// producer's batch waits for its partition's route to move on.
	// Default 100 ms.
	MetadataRefreshBackoff time.Duration
	// UnknownTopicRetriesMax bounds the metadata refreshes a request makes
	// for a topic the metadata does not show while the answers come only
	// from nodes that do not see the metadata quorum (cut off, or still
	// replaying the metadata after a restart). An answer from a node that
	// sees the quorum is final: a request for a topic it does not list
	// fails at once with UNKNOWN_TOPIC_OR_PARTITION. Default 3.
	UnknownTopicRetriesMax int
	// RequestTimeout is the timeout_ms sent with produce and admin requests:
	// how long the broker may wait for replication or a metadata change
	// before answering REQUEST_TIMED_OUT. It also bounds the client's wait
	// for any answer (Kafka's request.timeout.ms): a request sent and not
	// answered within RequestTimeout plus an eighth of it (at least
	// 100 ms; a fetch's FetchMaxWait more) fails its connection with
	// ErrRequestTimeout, and every request on that connection is retried
	// where that is safe, after a metadata refresh. Default 30 s.
	RequestTimeout time.Duration
	// SilentNodeCheck is how long a connection with requests outstanding
	// may receive nothing before the client asks the other nodes whether
	// its node still leads the partitions routed to it. A node that is
	// paused (SIGSTOP, a frozen VM) or cut off keeps its socket open, and
	// its requests would wait for RequestTimeout; once the cluster has
	// elected another primary (a newer generation) for one of its
	// partitions, the connection is failed with ErrConnectionLost and its
	// requests are retried at the new primary where that is safe (the
	// idempotent producer's sequence numbers keep a resent batch from
	// being written twice). It is asked again every SilentNodeCheck while
	// the silence lasts. A slow node that still leads its partitions is
	// only asked about, never dropped. Default 500 ms; negative: never.
	SilentNodeCheck time.Duration
	// RetransmitBackoffMax caps TCP's retransmission timeout on the
	// client's connections (TCP_RTO_MAX_MS, Linux 6.11 and later; ignored
	// elsewhere and on connections that are not TCP). The kernel's own cap
	// is 120 s: after a network cut of a few seconds, a connection's next
	// retransmission could come seconds after the network healed, and its
	// requests waited that long. Default 1 s (the kernel's least); a
	// negative value keeps the kernel's.
	RetransmitBackoffMax time.Duration
	// Username and Password authenticate every connection with
	// SCRAM-SHA-256 after the handshake (a node with security.auth =
	// scram requires it; docs/security.md). The password never travels:
	// only a proof that the client knows it, and the client checks the
	// node's proof that it holds the user's credential. With a Username,
	// a node too old to offer authentication is refused rather than used
	// unauthenticated; a node with security.auth = none accepts the
	// connection as it accepts every other. Default none.
	Username, Password string
	// TLS, when set, runs a TLS handshake on every connection before
	// anything else (a node whose security.tls_listeners names client).
	// Its ServerName, when empty, is the host of each node's address; its
	// RootCAs the CA of the nodes' certificates (nil: the system's);
	// TLSConfig builds one from files. Default none: plaintext.
	TLS *tls.Config
	// Dialer opens connections; tests put faults here. Default a
	// net.Dialer.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

	// onSilent is called, on a goroutine of its own, when a connection
	// has been silent for SilentNodeCheck with requests outstanding (at
	// most one call per connection at a time); the Client sets it.
	onSilent func(*conn)
}

// Defaults of Config.
const (
	defaultClientID               = "corestream-go"
	defaultDialTimeout            = 10 * time.Second
	defaultInFlightPerConnMax     = 256
	defaultRetryAttemptsMax       = 10
	defaultRetryBackoffMin        = 10 * time.Millisecond
	defaultRetryBackoffMax        = time.Second
	defaultReconnectBackoffMin    = 20 * time.Millisecond
	defaultReconnectBackoffMax    = time.Second
	defaultMetadataMaxAge         = 5 * time.Minute
	defaultUnknownTopicRetriesMax = 3
	defaultMetadataRefreshBackoff = 100 * time.Millisecond
	defaultRequestTimeout         = 30 * time.Second
	defaultRetransmitBackoffMax   = time.Second
	defaultSilentNodeCheck        = 500 * time.Millisecond
)

// clientSoftware is sent in the handshake.
const clientSoftware = "corestream-go/0.1"

func (c Config) withDefaults() Config {
	setStr(&c.ClientID, defaultClientID)
	setDur(&c.DialTimeout, defaultDialTimeout)
	setInt(&c.InFlightPerConnMax, defaultInFlightPerConnMax)
	setInt(&c.RetryAttemptsMax, defaultRetryAttemptsMax)
	setDur(&c.RetryBackoffMin, defaultRetryBackoffMin)
	setDur(&c.RetryBackoffMax, defaultRetryBackoffMax)
	setDur(&c.ReconnectBackoffMin, defaultReconnectBackoffMin)
	setDur(&c.ReconnectBackoffMax, defaultReconnectBackoffMax)
	if c.RetransmitBackoffMax == 0 {
		c.RetransmitBackoffMax = defaultRetransmitBackoffMax // negative: the kernel's
	}
	if c.SilentNodeCheck == 0 {
		c.SilentNodeCheck = defaultSilentNodeCheck // negative: never
	}
	setDur(&c.MetadataMaxAge, defaultMetadataMaxAge)
	setInt(&c.UnknownTopicRetriesMax, defaultUnknownTopicRetriesMax)
	setDur(&c.MetadataRefreshBackoff, defaultMetadataRefreshBackoff)
	setDur(&c.RequestTimeout, defaultRequestTimeout)
	if c.Dialer == nil {
		var d net.Dialer
		c.Dialer = d.DialContext
	}
	return c
}

func setStr(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setInt(p *int, v int) {
	if *p <= 0 {
		*p = v
	}
}

func setDur(p *time.Duration, v time.Duration) {
	if *p <= 0 {
		*p = v
	}
}

// responseGraceMin is the least margin the client adds to RequestTimeout
// before it gives up on an answer: the broker's own timer (timeout_ms)
// must be able to fire and its REQUEST_TIMED_OUT reach the client first.
const responseGraceMin = 100 * time.Millisecond

// responseTimeout is how long a sent request waits for its answer before
// its connection is failed: RequestTimeout plus an eighth, at least
// responseGraceMin. REQUIRES: defaults filled in.
func (c *Config) responseTimeout() time.Duration {
	return c.RequestTimeout + max(c.RequestTimeout/8, responseGraceMin)
}

// timeoutMs converts d for a wire timeout_ms field.
func timeoutMs(d time.Duration) uint32 {
	ms := d.Milliseconds()
	if ms <= 0 {
		return 0
	}
	if ms > 1<<31 {
		ms = 1 << 31
	}
	return uint32(ms)
}
