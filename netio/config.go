package netio

import (
	"fmt"
	"time"
)

// Limits and defaults. The defaults match docs/configuration.md
// ([network] section); zero Config fields take them.
const (
	// MaxFrameBytesDefault is network.max_frame_bytes: a 16 MiB batch plus
	// 64 KiB of request header.
	MaxFrameBytesDefault = 16<<20 + 64<<10
	// MaxFrameBytesMin and MaxFrameBytesMax bound Config.MaxFrameBytes.
	MaxFrameBytesMin = 64 << 10
	MaxFrameBytesMax = 256 << 20
	// MaxInflightPerConnDefault is network.max_inflight_per_conn.
	MaxInflightPerConnDefault = 256
	// MaxInflightPerConnMax bounds Config.MaxInflightPerConn.
	MaxInflightPerConnMax = 65536
	// MaxConnectionsDefault is network.max_connections.
	MaxConnectionsDefault = 10000
	// MaxConnectionsMax bounds Config.MaxConnections.
	MaxConnectionsMax = 1 << 20
	// OutboundBytesMaxDefault is network.outbound_bytes_max.
	OutboundBytesMaxDefault = 8 << 20
	// OutboundBytesMaxMin and OutboundBytesMaxMax bound Config.OutboundBytesMax.
	OutboundBytesMaxMin = 64 << 10
	OutboundBytesMaxMax = 1 << 30
	// ReadBufferBytesDefault is the per-shard read buffer. It is per shard,
	// not per connection, so it can be large: frames up to half of it are
	// delivered straight from it without a copy (64 KiB batches measured
	// 28 % of a plain socket blast with a 64 KiB buffer, 119 % with 256 KiB;
	// BenchmarkIngest64K).
	ReadBufferBytesDefault = 256 << 10
	// ReadBudgetBytesDefault is how much one connection may read per
	// readiness event before the shard serves its other descriptors.
	ReadBudgetBytesDefault = 1 << 20
	// OversizeHeadBytesDefault is how much of an oversize frame's body the
	// handler is shown (enough for any request header).
	OversizeHeadBytesDefault = 64
	// CloseTimeoutDefault bounds a graceful close: after it, a connection
	// that still has requests in flight or bytes unsent is aborted.
	CloseTimeoutDefault = 10 * time.Second
	// DialTimeoutDefault bounds an outbound connect.
	DialTimeoutDefault = 10 * time.Second
	// FrameTimeoutDefault bounds how long a frame may take to arrive once
	// its first byte did: as long as a client waits for an answer by
	// default (the SDK's request timeout), so a client that is merely slow
	// is not cut, while a peer that sent half a frame and stopped no
	// longer holds its connection, buffer and slot forever.
	FrameTimeoutDefault = 30 * time.Second
	// FrameTimeoutMin and FrameTimeoutMax bound Config.FrameTimeout.
	FrameTimeoutMin = time.Millisecond
	FrameTimeoutMax = time.Hour
	// RetransmitBackoffMaxMin and RetransmitBackoffMaxMax bound
	// Config.RetransmitBackoffMax (the kernel accepts 1 s..120 s).
	RetransmitBackoffMaxMin = time.Second
	RetransmitBackoffMaxMax = 120 * time.Second
	// LogLinesMaxDefault and LogIntervalDefault limit the lines a server
	// logs about its connections: 10 per 10 s, then one summary line per
	// interval (enough to see what is wrong, not enough to flood the log
	// when a scanner opens thousands of bad connections).
	LogLinesMaxDefault = 10
	LogIntervalDefault = 10 * time.Second
	// LogLinesMaxMax and LogIntervalMin, LogIntervalMax bound the limit.
	LogLinesMaxMax = 1 << 20
	LogIntervalMin = time.Millisecond
	LogIntervalMax = time.Hour
	// iovMax is the most buffers one writev hands the kernel (IOV_MAX is
	// 1024; 64 covers a burst of pipelined responses).
	iovMax = 64
	// acceptBatchMax bounds the accepts done per listener readiness event.
	acceptBatchMax = 64
)

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// MaxFrameBytes is the largest frame body (the bytes after the 4-byte
	// length) a peer may send. A larger length prefix is answered through
	// Handler.OnFrameTooLarge and the connection closes. Default
	// MaxFrameBytesDefault; MaxFrameBytesMin..MaxFrameBytesMax.
	MaxFrameBytes int
	// MaxInflightPerConn is how many frames of one connection may be
	// delivered to the handler and not yet answered (Conn.Reply or
	// Conn.Release). At the bound the server stops reading that connection
	// until an answer frees a slot. Default 256; 1..MaxInflightPerConnMax.
	MaxInflightPerConn int
	// MaxConnections caps accepted connections on the server (all shards
	// together); further connections are closed at accept. Outbound
	// connections (Dial) do not count. Default 10000.
	MaxConnections int
	// OutboundBytesMax is how many response bytes (headers plus file
	// ranges) may wait on one connection before the server stops reading
	// its requests; responses to requests already in flight are still
	// queued, so the bound is soft by at most MaxInflightPerConn responses.
	// Default 8 MiB; OutboundBytesMaxMin..OutboundBytesMaxMax.
	OutboundBytesMax int64
	// ReadBufferBytes is the size of each shard's read buffer. A
	// connection's own input buffer, which holds a partial frame between
	// reads, is kept while it is at most half this size and freed when it
	// empties otherwise. Default 256 KiB.
	ReadBufferBytes int
	// ReadBudgetBytes is how much one connection may read per readiness
	// event. Default 1 MiB.
	ReadBudgetBytes int
	// OversizeHeadBytes is the most of an oversize frame's body passed to
	// Handler.OnFrameTooLarge (only what arrived with the length). Default 64.
	OversizeHeadBytes int
	// SocketRecvBufferBytes and SocketSendBufferBytes set SO_RCVBUF and
	// SO_SNDBUF on every connection; 0 keeps the kernel's default.
	SocketRecvBufferBytes int
	SocketSendBufferBytes int
	// RetransmitBackoffMax caps TCP's retransmission timeout on every
	// connection (TCP_RTO_MAX_MS, Linux 6.11 and later; ignored where the
	// kernel lacks it). The kernel's own cap is 120 s: after a network cut
	// of a few seconds a connection's next retransmission could come
	// seconds after the heal, and its requests waited that long. 0 keeps
	// the kernel's; else RetransmitBackoffMaxMin..RetransmitBackoffMaxMax.
	RetransmitBackoffMax time.Duration
	// CloseTimeout bounds a graceful close. Default 10 s.
	CloseTimeout time.Duration
	// DialTimeout bounds Dial. Default 10 s.
	DialTimeout time.Duration
	// FrameTimeout bounds the time from the first byte of a frame (its
	// length prefix) to its last. A connection whose frame is still
	// incomplete after it is closed gracefully with ErrFrameTimeout
	// (earlier requests are still answered) and the close is logged. It
	// does not limit a connection that is idle between frames, and time
	// during which the server itself stopped reading the connection
	// (backpressure) does not count. Default 30 s;
	// FrameTimeoutMin..FrameTimeoutMax.
	FrameTimeout time.Duration
	// Logf receives connection-level events worth an operator's attention:
	// one line per connection closed for a fault (an oversize frame, a
	// frame cut short or left incomplete, a handler's Abort) with the
	// reason and the peer's address, and accept failures. Default: none.
	Logf func(format string, args ...any)
	// LogLinesMax is how many lines the server passes to Logf per
	// LogInterval (all shards together); further lines are counted and
	// reported as one line, "netio: suppressed K similar messages", when
	// the interval ends. Default 10; 1..LogLinesMaxMax.
	LogLinesMax int
	// LogInterval is the window of LogLinesMax, counted from its first
	// line. Default 10 s; LogIntervalMin..LogIntervalMax.
	LogInterval time.Duration
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&out.MaxFrameBytes, MaxFrameBytesDefault)
	def(&out.MaxInflightPerConn, MaxInflightPerConnDefault)
	def(&out.MaxConnections, MaxConnectionsDefault)
	def(&out.ReadBufferBytes, ReadBufferBytesDefault)
	def(&out.ReadBudgetBytes, ReadBudgetBytesDefault)
	def(&out.OversizeHeadBytes, OversizeHeadBytesDefault)
	if out.OutboundBytesMax == 0 {
		out.OutboundBytesMax = OutboundBytesMaxDefault
	}
	if out.CloseTimeout == 0 {
		out.CloseTimeout = CloseTimeoutDefault
	}
	if out.DialTimeout == 0 {
		out.DialTimeout = DialTimeoutDefault
	}
	if out.FrameTimeout == 0 {
		out.FrameTimeout = FrameTimeoutDefault
	}
	def(&out.LogLinesMax, LogLinesMaxDefault)
	if out.LogInterval == 0 {
		out.LogInterval = LogIntervalDefault
	}
	switch {
	case out.MaxFrameBytes < MaxFrameBytesMin || out.MaxFrameBytes > MaxFrameBytesMax:
		return out, fmt.Errorf("netio: max frame bytes %d is outside %d..%d", out.MaxFrameBytes, MaxFrameBytesMin, MaxFrameBytesMax)
	case out.MaxInflightPerConn < 1 || out.MaxInflightPerConn > MaxInflightPerConnMax:
		return out, fmt.Errorf("netio: max in-flight per connection %d is outside 1..%d", out.MaxInflightPerConn, MaxInflightPerConnMax)
	case out.MaxConnections < 1 || out.MaxConnections > MaxConnectionsMax:
		return out, fmt.Errorf("netio: max connections %d is outside 1..%d", out.MaxConnections, MaxConnectionsMax)
	case out.OutboundBytesMax < OutboundBytesMaxMin || out.OutboundBytesMax > OutboundBytesMaxMax:
		return out, fmt.Errorf("netio: outbound bytes max %d is outside %d..%d", out.OutboundBytesMax, OutboundBytesMaxMin, OutboundBytesMaxMax)
	case out.ReadBufferBytes < 4096 || out.ReadBufferBytes > 16<<20:
		return out, fmt.Errorf("netio: read buffer bytes %d is outside 4096..16MiB", out.ReadBufferBytes)
	case out.ReadBudgetBytes < out.ReadBufferBytes:
		return out, fmt.Errorf("netio: read budget %d is below the read buffer %d", out.ReadBudgetBytes, out.ReadBufferBytes)
	case out.OversizeHeadBytes < 0 || out.OversizeHeadBytes > 4096:
		return out, fmt.Errorf("netio: oversize head bytes %d is outside 0..4096", out.OversizeHeadBytes)
	case out.SocketRecvBufferBytes < 0 || out.SocketSendBufferBytes < 0:
		return out, fmt.Errorf("netio: negative socket buffer size")
	case out.RetransmitBackoffMax != 0 &&
		(out.RetransmitBackoffMax < RetransmitBackoffMaxMin || out.RetransmitBackoffMax > RetransmitBackoffMaxMax):
		return out, fmt.Errorf("netio: retransmit backoff max %v is outside %v..%v", out.RetransmitBackoffMax, RetransmitBackoffMaxMin, RetransmitBackoffMaxMax)
	case out.CloseTimeout < 0 || out.DialTimeout < 0:
		return out, fmt.Errorf("netio: negative timeout")
	case out.FrameTimeout < FrameTimeoutMin || out.FrameTimeout > FrameTimeoutMax:
		return out, fmt.Errorf("netio: frame timeout %v is outside %v..%v", out.FrameTimeout, FrameTimeoutMin, FrameTimeoutMax)
	case out.LogLinesMax < 1 || out.LogLinesMax > LogLinesMaxMax:
		return out, fmt.Errorf("netio: log lines max %d is outside 1..%d", out.LogLinesMax, LogLinesMaxMax)
	case out.LogInterval < LogIntervalMin || out.LogInterval > LogIntervalMax:
		return out, fmt.Errorf("netio: log interval %v is outside %v..%v", out.LogInterval, LogIntervalMin, LogIntervalMax)
	}
	return out, nil
}
