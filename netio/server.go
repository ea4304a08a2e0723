package netio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard"
)

// Errors returned by the server and its connections.
var (
	// ErrClosed is returned by Conn.Send and Conn.Reply on a closed
	// connection (the response's Release runs with it), and passed to
	// Handler.OnClose when the server closed the connection.
	ErrClosed = errors.New("netio: connection closed")
	// ErrFrameTooLarge is passed to Handler.OnClose of a connection closed
	// because its peer announced a frame above Config.MaxFrameBytes.
	ErrFrameTooLarge = errors.New("netio: frame too large")
	// ErrTruncated is passed to Handler.OnClose when the peer closed its
	// side in the middle of a frame.
	ErrTruncated = errors.New("netio: connection closed mid-frame")
	// ErrCloseTimeout is passed to Handler.OnClose when a graceful close
	// could not finish within Config.CloseTimeout.
	ErrCloseTimeout = errors.New("netio: graceful close timed out")
	// ErrShortFile is passed to Handler.OnClose when a FileRange could not
	// be sent whole because the file ended first; the frame on the wire
	// would be corrupt, so the connection is closed.
	ErrShortFile = errors.New("netio: file range beyond end of file")
	// ErrFrameTimeout is passed to Handler.OnClose of a connection closed
	// because a frame stayed incomplete for Config.FrameTimeout: the peer
	// sent part of a frame (a length prefix, or a prefix and part of the
	// body) and then nothing more.
	ErrFrameTimeout = errors.New("netio: frame not completed within the frame timeout")
	// ErrServerClosed is returned by Listen and Dial after Shutdown began.
	ErrServerClosed = errors.New("netio: server closed")
)

// Handler is what the broker implements. Every method runs on the shard
// that owns the connection, one at a time per shard.
type Handler interface {
	// OnOpen runs when a connection is accepted (or a Dial succeeds). An
	// error closes the connection; OnClose still runs.
	OnOpen(c *Conn) error
	// OnFrame runs for each complete frame, in arrival order. body is the
	// frame without its 4-byte length prefix. It aliases the server's read
	// buffer and is valid only until OnFrame returns: copy what must
	// outlive the call (a batch handed to another shard, for example).
	// Each frame holds one of the connection's in-flight slots until the
	// handler calls c.Reply or c.Release for it.
	OnFrame(c *Conn, body []byte)
	// OnFrameTooLarge runs when the peer announces a frame of size bytes,
	// above Config.MaxFrameBytes. head holds the bytes of the body that
	// arrived with the length (at most Config.OversizeHeadBytes; possibly
	// none) so the handler can answer with an error that carries the
	// request's correlation id (c.Send) when it is there. The server
	// reads nothing more from the connection and closes it once its
	// in-flight requests are answered and its output is sent.
	OnFrameTooLarge(c *Conn, size uint32, head []byte)
	// OnClose runs once when the connection is closed; err is nil for an
	// orderly close by either side, else why (ErrFrameTooLarge,
	// ErrTruncated, ErrCloseTimeout, a socket error, the Abort reason).
	OnClose(c *Conn, err error)
}

// Stats are server-wide counters, safe to read from any goroutine.
type Stats struct {
	Accepted      atomic.Uint64 // connections accepted
	Refused       atomic.Uint64 // connections closed at accept (MaxConnections)
	Dialed        atomic.Uint64 // outbound connections established
	Closed        atomic.Uint64 // connections closed
	Frames        atomic.Uint64 // frames delivered to the handler
	Oversize      atomic.Uint64 // connections that announced an oversize frame
	ReadPauses    atomic.Uint64 // times a connection stopped being read (backpressure)
	BytesIn       atomic.Uint64 // bytes read from sockets
	BytesOut      atomic.Uint64 // bytes written with write/writev
	SendfileBytes atomic.Uint64 // bytes sent with sendfile
	SendBlocked   atomic.Uint64 // times a send met a full socket buffer (EAGAIN)
	Retained      atomic.Uint64 // frames a handler retained (Conn.Retain)
	ReadBufsMade  atomic.Uint64 // read buffers allocated to replace retained ones
}

// Server states.
const (
	srvNew int32 = iota
	srvListening
	srvDraining
	srvClosed
)

// Server serves framed connections on a shard.Group: every shard watches
// the server's one listening socket and owns the connections it accepts,
// all on the shard's own epoll set. A connection never changes shard
// unless Conn.Migrate moves it.
//
// Several Servers may share one group (a client listener and a
// replication listener); each keeps its own per-shard state.
type Server struct {
	group   *shard.Group
	cfg     Config
	handler Handler
	loops   []*loop // loops[i] is touched on shard i only

	state   atomic.Int32
	clients atomic.Int64 // accepted connections open, for MaxConnections
	open    atomic.Int64 // every connection open (accepted and dialed)
	nextID  atomic.Uint64
	addr    atomic.Pointer[net.TCPAddr]
	// elsewhere is the listener ServeElsewhere handed out (closed at
	// Shutdown); nextAdopt picks the shard of the next Adopt.
	elsewhere atomic.Pointer[net.Listener]
	nextAdopt atomic.Uint64

	drainOnce sync.Once
	drained   chan struct{} // closed when draining and no connection is open

	logLimit *logLimit // every line to cfg.Logf passes it

	stats Stats
}

// loop is a server's state on one shard.
type loop struct {
	srv   *Server
	sh    *shard.Shard
	lfd   int // listener, or -1
	conns map[*Conn]struct{}
	// rbuf is the read buffer shared by the shard's connections;
	// rbufFree the released ones kept for reuse (retain.go).
	rbuf     *readBuf
	rbufFree []*readBuf
	// delivering is the connection whose frames are being delivered from
	// deliveringBuf (Conn.Retain); nil outside such a delivery.
	delivering    *Conn
	deliveringBuf *readBuf
	// spare is the largest input buffer a connection gave back, kept for
	// the next large frame or partial frame (at most one per shard, at
	// most MaxFrameBytes+4 rounded up to a power of two; loop.buffer).
	spare  []byte
	iov    []unix.Iovec // writev scratch
	dirty  []*Conn      // connections with deferred work this round
	queued bool         // processDirty is deferred on the shard
}

// NewServer prepares a server on g's shards; it serves nothing until
// Listen (or Dial). h handles every accepted connection. The group must
// outlive the server: call Shutdown before stopping the group.
func NewServer(g *shard.Group, cfg Config, h Handler) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{group: g, cfg: c, handler: h, drained: make(chan struct{}), logLimit: newLogLimit(c.LogLinesMax, c.LogInterval)}
	for i := 0; i < g.Len(); i++ {
		rb := &readBuf{mem: make([]byte, c.ReadBufferBytes)}
		s.loops = append(s.loops, &loop{
			srv:   s,
			sh:    g.Shard(i),
			lfd:   -1,
			conns: make(map[*Conn]struct{}),
			rbuf:  rb,
			iov:   make([]unix.Iovec, 0, iovMax),
		})
	}
	return s, nil
}

// Config returns the server's configuration with defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Addr is the address Listen bound (with the port chosen when it asked for
// port 0), or nil before Listen.
func (s *Server) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return a
	}
	return nil
}

// Connections is the number of open connections, accepted and dialed.
func (s *Server) Connections() int { return int(s.open.Load()) }

// Listen binds addr ("host:port"; port 0 picks a free port) and starts
// accepting on every shard: Bind, then Serve. It may be called once, from
// a goroutine that is not a shard (it waits for each shard to register
// its listener).
//
// A port another process (or another Server) listens on is refused with
// an *AddrInUseError (errors.Is(err, ErrAddrInUse)) instead of being
// shared with it (see Bind).
func (s *Server) Listen(addr string) error {
	if s.state.Load() != srvNew {
		return ErrServerClosed
	}
	l, err := Bind(addr)
	if err != nil {
		return err
	}
	if err := s.Serve(l); err != nil {
		_ = l.Close()
		return err
	}
	return nil
}

// Serve starts accepting on l on every shard; the server owns l from then
// on and closes it at Shutdown (or when Serve fails; the caller may Close
// l again, harmlessly). Every shard watches its own descriptor of l's one
// socket with EPOLLEXCLUSIVE: the kernel wakes one parked shard per new
// connection, that shard accepts it and the connection lives there
// (loop.accept). It may be called once, instead of Listen, from a
// goroutine that is not a shard.
func (s *Server) Serve(l *Listener) error {
	if !s.state.CompareAndSwap(srvNew, srvListening) {
		return ErrServerClosed
	}
	fd, err := l.take()
	if err != nil {
		return err
	}
	fds := []int{fd}
	closeAll := func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}
	s.addr.Store(l.addr)
	for len(fds) < len(s.loops) {
		dfd, err := dupListener(fd)
		if err != nil {
			closeAll()
			return err
		}
		fds = append(fds, dfd)
	}
	for i, lp := range s.loops {
		lp, fd := lp, fds[i]
		errc := make(chan error, 1)
		if err := lp.sh.Do(func(*shard.Shard) {
			lp.lfd = fd
			err := lp.watchListener()
			if err != nil {
				lp.lfd = -1
			}
			errc <- err
		}); err != nil {
			s.unlisten(i)
			closeAll()
			return fmt.Errorf("netio: listen on shard %d: %w", i, err)
		}
		if err := <-errc; err != nil {
			s.unlisten(i)
			closeAll()
			return err
		}
	}
	return nil
}

// unlisten takes the listener out of the epoll sets of shards 0..n-1
// after a failed Listen (the caller closes the descriptors).
func (s *Server) unlisten(n int) {
	for _, lp := range s.loops[:n] {
		lp := lp
		_ = lp.sh.Do(func(*shard.Shard) {
			if lp.lfd >= 0 {
				_ = lp.sh.Unwatch(lp.lfd)
				lp.lfd = -1
			}
		})
	}
}

// accept takes the connections waiting on the shared listening socket,
// then moves this shard to the back of the socket's queue of waiters.
//
// Every shard watches the socket with EPOLLEXCLUSIVE, and the kernel wakes
// the first parked shard in the order the watches were added, so without
// the move one shard would own most connections on a lightly loaded node
// (measured 538/462 to 869/131 of 1,000 connections on two shards). Adding
// the watch again puts this shard last: the next connection wakes the next
// parked shard, a round robin over the idle shards, for two epoll_ctl
// calls per batch of accepts and no hand-off between shards (handing each
// connection to the next shard in turn through its inbox cost ~150 µs
// more before a new connection's first answer on the development VM). A
// busy shard is not woken, so new connections go to shards with time for
// them; the split is rougher than SO_REUSEPORT's hash (24-76 % on the
// loaded VM), and the broker moves a connection to the shard that owns its
// partitions anyway (Conn.Migrate).
func (lp *loop) accept() {
	s := lp.srv
	accepted := 0
	for i := 0; i < acceptBatchMax; i++ {
		fd, rsa, err := unix.Accept4(lp.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			switch err {
			case unix.EAGAIN, unix.EINTR, unix.ECONNABORTED:
			default:
				lp.logf("netio: accept on shard %d: %v", lp.sh.ID(), err)
			}
			break
		}
		accepted++
		if s.clients.Load() >= int64(s.cfg.MaxConnections) || s.state.Load() != srvListening {
			s.stats.Refused.Add(1)
			_ = unix.Close(fd)
			continue
		}
		s.stats.Accepted.Add(1)
		s.clients.Add(1)
		c := lp.newConn(fd, tcpAddr(rsa), s.handler, true)
		lp.start(c)
	}
	if accepted > 0 && lp.lfd >= 0 {
		lp.requeue()
	}
}

// watchListener adds the shard's listener descriptor to its epoll set.
func (lp *loop) watchListener() error {
	return lp.sh.Watch(lp.lfd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE, func(uint32) { lp.accept() })
}

// requeue watches the listener again, which puts this shard at the back
// of the socket's waiters (accept says why). Should that fail, the shard
// stops accepting and the others serve the port.
func (lp *loop) requeue() {
	_ = lp.sh.Unwatch(lp.lfd)
	if err := lp.watchListener(); err != nil {
		lp.logf("netio: shard %d stops accepting: %v", lp.sh.ID(), err)
		_ = unix.Close(lp.lfd)
		lp.lfd = -1
	}
}

// Shutdown stops accepting, closes every connection gracefully (no more
// requests are read; in-flight requests are answered and output is sent)
// and waits until all are closed or ctx ends, when it aborts the rest and
// returns ctx's error. Shut the server down before stopping its shard
// group: on a shard that has already stopped, Shutdown can only close the
// descriptors (OnClose runs on the calling goroutine), and it returns an
// error matching shard.ErrStopped. It must not be called from a shard's
// thread.
func (s *Server) Shutdown(ctx context.Context) error {
	prev := s.state.Swap(srvDraining)
	if prev >= srvDraining {
		return nil
	}
	defer s.state.Store(srvClosed)
	defer func() {
		if s.cfg.Logf != nil {
			s.logSuppressed(s.logLimit.drain())
		}
	}()
	s.closeElsewhere()
	stopped := s.forEachLoop(ctx, func(lp *loop) {
		lp.closeListener()
		for c := range lp.conns {
			c.Close()
		}
	})
	if s.open.Load() == 0 {
		s.markDrained()
	}
	select {
	case <-s.drained:
		return stopped
	case <-ctx.Done():
	}
	var busy, unanswered atomic.Int64
	_ = s.forEachLoop(context.Background(), func(lp *loop) {
		for c := range lp.conns {
			if c.inflight > 0 {
				busy.Add(1)
				unanswered.Add(int64(c.inflight))
			}
			c.Abort(ErrServerClosed)
		}
	})
	if s.cfg.Logf != nil && busy.Load() > 0 {
		// The drain ran out of time: say what it waited on.
		s.cfg.Logf("netio: shutdown deadline passed with %d connections still owing %d answers; aborted", busy.Load(), unanswered.Load())
	}
	if s.open.Load() == 0 {
		s.markDrained()
	}
	<-s.drained // aborts finish within the shards' current round
	if stopped != nil {
		return stopped
	}
	return ctx.Err()
}

// forEachLoop runs fn on every shard and waits for each. A full inbox is
// retried, with a short pause, until ctx ends. A shard that has stopped
// cannot run fn: its listener and connections are closed from here instead
// (its goroutine is gone, so nothing else touches them), and the error
// returned matches shard.ErrStopped.
func (s *Server) forEachLoop(ctx context.Context, fn func(*loop)) error {
	var stopped error
	for _, lp := range s.loops {
		lp := lp
		for {
			err := lp.sh.Do(func(*shard.Shard) { fn(lp) })
			if err == nil {
				break
			}
			if errors.Is(err, shard.ErrStopped) {
				<-lp.sh.Done()
				lp.closeListener()
				for c := range lp.conns {
					c.closeNow(ErrServerClosed)
				}
				stopped = fmt.Errorf("netio: shard %d stopped before the server: %w", lp.sh.ID(), err)
				break
			}
			if ctx.Err() != nil {
				break // the caller's deadline handling takes over
			}
			time.Sleep(100 * time.Microsecond) // back off while the shard drains its inbox
		}
	}
	return stopped
}

// closeListener stops accepting on this shard.
func (lp *loop) closeListener() {
	if lp.lfd >= 0 {
		_ = lp.sh.Unwatch(lp.lfd)
		_ = unix.Close(lp.lfd)
		lp.lfd = -1
	}
}

func (s *Server) markDrained() { s.drainOnce.Do(func() { close(s.drained) }) }

// logf logs a line through the server's limit (Config.LogLinesMax per
// Config.LogInterval). Safe from any goroutine; on a shard's thread use
// loop.logf, which also makes sure a window's summary is logged when the
// window ends.
func (s *Server) logf(format string, args ...any) {
	s.logOn(nil, format, args...)
}

// logf is Server.logf on the loop's shard thread.
func (lp *loop) logf(format string, args ...any) {
	lp.srv.logOn(lp, format, args...)
}

// logOn logs through the limit; lp, when not nil, is the calling shard's
// loop, which arms the timer that reports the lines a window held back.
func (s *Server) logOn(lp *loop, format string, args ...any) {
	if s.cfg.Logf == nil {
		return
	}
	now := s.loops[0].sh.Now() // every shard of a group reads the same clock
	ok, before, first, endNs := s.logLimit.admit(now)
	s.logSuppressed(before)
	if ok {
		s.cfg.Logf(format, args...)
	}
	if first && lp != nil {
		lp.sh.AfterFunc(time.Duration(endNs-now), func() {
			s.logSuppressed(s.logLimit.flush(lp.sh.Now()))
		})
	}
}

// logSuppressed reports the lines a window of the limit held back.
func (s *Server) logSuppressed(n int) {
	if n > 0 {
		s.cfg.Logf("netio: suppressed %d similar messages (limit: %d lines per %v)", n, s.cfg.LogLinesMax, s.cfg.LogInterval)
	}
}

// markDirty records deferred work for c, done once at the end of the
// shard's current round (processDirty): flushes coalesce many responses
// into one writev, and resuming a paused reader leaves the handler's call
// stack first.
func (lp *loop) markDirty(c *Conn, flags uint8) {
	if c.dirty == 0 {
		lp.dirty = append(lp.dirty, c)
	}
	c.dirty |= flags
	if !lp.queued {
		lp.queued = true
		lp.sh.Defer(lp.processDirty)
	}
}

func (lp *loop) processDirty() {
	for i := 0; i < len(lp.dirty); i++ { // grows while handlers run
		c := lp.dirty[i]
		lp.dirty[i] = nil
		if c == nil { // forgotten by Migrate
			continue
		}
		flags := c.dirty
		c.dirty = 0
		if c.state != connClosed {
			c.runDeferred(flags)
		}
	}
	lp.dirty = lp.dirty[:0]
	lp.queued = false
}

// forget removes c from the loop's deferred work (before it migrates).
func (lp *loop) forget(c *Conn) {
	for i, d := range lp.dirty {
		if d == c {
			lp.dirty[i] = nil
		}
	}
	c.dirty = 0
}
