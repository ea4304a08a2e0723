// Package netio puts bytes on sockets for the broker: framed TCP
// connections served on the shards' own epoll sets, with backpressure,
// sendfile responses and outbound (peer) connections. It holds no business
// rules; the wire codec is netio/wire, the io_uring write engine
// netio/uring.
//
// # Threading
//
// There is no separate network thread. The server's port is one listening
// socket (bound without SO_REUSEPORT, so no other process can share the
// port); every shard of a shard.Group watches it with EPOLLEXCLUSIVE, the
// kernel wakes one parked shard for each new connection, and the
// connection then lives on the shard that accepted it:
// its socket sits in the shard's epoll set next to the shard's inbox
// eventfd, timerfd and io_uring completion eventfd, and every Handler
// callback runs on the shard's thread. A request for a partition owned by
// the same shard is served without any hand-off; one for another shard
// goes there with shard.Call and its answer comes back the same way. See
// docs/design/threading.md for the measurements behind this layout.
//
// # Frames
//
//	+----------------+---------------------------------------------+
//	| length (u32 BE)| body: length bytes (header, then payload)    |
//	+----------------+---------------------------------------------+
//
// The server splits the byte stream into frames and never looks inside a
// body; the correlation id that lets a client pipeline many requests and
// match out-of-order responses is in the body's header, decoded by the
// handler. A length above Config.MaxFrameBytes is not read: the handler is
// shown the first bytes of the body (to answer with an error carrying the
// correlation id) and the connection closes once its earlier requests are
// answered.
//
// # Backpressure and memory
//
// Each delivered frame holds an in-flight slot until the handler answers
// it (Reply or Release). When a connection has Config.MaxInflightPerConn
// frames in flight, or Config.OutboundBytesMax bytes waiting to be sent
// (a slow consumer), the server stops reading it: the client's socket
// buffer fills and TCP pushes back. A connection therefore holds at most
// one frame of input beyond its in-flight requests, and its output stays
// within OutboundBytesMax plus the answers to its in-flight requests.
//
// # Faults and logging
//
// A connection closed for a fault of its peer (an oversize frame, a frame
// cut short by the peer's shutdown or left incomplete for
// Config.FrameTimeout, a request the handler refused with Conn.Abort) is
// logged once, with the peer's address and the reason, which OnClose
// also receives (errors.Is matches ErrFrameTooLarge, ErrTruncated,
// ErrFrameTimeout). Every line goes through the server's limit,
// Config.LogLinesMax per Config.LogInterval, past which lines are counted
// and summed up in one line when the interval ends.
//
// # Adopted connections
//
// The loops serve plain sockets only. A listener whose sessions need
// user-space work first (TLS: cluster/tlsbridge) is handed out with
// Server.ServeElsewhere; that part accepts, and gives each connection back
// with Adopt (AdoptDialed for one it dialled) as a connected socket — one
// end of a unix socketpair — with the peer's real address. From then on it
// is a Conn like any other; nothing on the path of plain connections
// changes.
//
// # Responses
//
// A Response is header bytes followed by file ranges sent with
// sendfile(2) straight from segment files. Responses queued in one round
// leave in one writev; a range that meets a full socket resumes on
// EPOLLOUT, and nothing queued later is interleaved with it.
package netio
