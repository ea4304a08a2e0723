package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard"
)

// ErrInFlight is returned by Conn.Migrate while requests are in flight.
var ErrInFlight = errors.New("netio: requests in flight")

// Connection states.
const (
	connDialing  uint8 = iota // outbound connect in progress
	connOpen                  // reading and serving
	connClosing               // graceful: nothing more is read; closes once idle
	connAborting              // closing at the end of this round
	connClosed
)

// Deferred-work flags (loop.markDirty).
const (
	dirtyFlush   uint8 = 1 << iota // write queued responses
	dirtyResume                    // deliver frames held back by the in-flight bound
	dirtyAbort                     // close now
	dirtyMigrate                   // hand the connection to another shard
)

// Conn is one framed connection. All of its methods, except ID, must be
// called on the shard that owns it (Shard), from a Handler callback, a
// shard task or a timer: the connection is that shard's state, like a
// partition.
//
// A frame on the wire is a 4-byte big-endian length followed by that many
// bytes. The server does not look inside a frame: the correlation id lives
// in the body's header, which the handler decodes.
type Conn struct {
	srv     *Server
	lp      *loop
	handler Handler
	fd      int
	id      uint64
	remote  net.Addr
	client  bool // accepted by a listener: counts against MaxConnections
	ctx     any

	state uint8
	dirty uint8 // deferred work pending (flags); lp.dirty holds c while != 0
	// inflight counts frames delivered to the handler and not yet answered.
	// Invariant: 0 <= inflight <= MaxInflightPerConn.
	inflight int
	// pend holds input read but not delivered: a partial frame, or whole
	// frames held back while inflight is at its bound. Its length is at
	// most MaxFrameBytes + 4 + ReadBufferBytes.
	pend     []byte
	eof      bool // the peer shut its sending side
	oversize bool // the peer announced a frame above MaxFrameBytes
	moving   bool // Migrate pending: deliver and read nothing more here
	events   uint32
	watched  bool
	out      sendQueue
	closeErr error        // why a close in progress closes
	timer    *shard.Timer // CloseTimeout or DialTimeout, when armed
	// framing is set while the frame at the front of pend is incomplete
	// and has been read since frameStartNs (shard clock), the time its
	// first byte arrived or the server last resumed reading it. frameTimer
	// (created on first use) checks Config.FrameTimeout. Frames that
	// complete do not move it; when it fires it re-arms itself for the
	// frame then pending, so a stream of frames arms it at most once per
	// timeout.
	framing      bool
	frameStartNs int64
	frameTimer   *shard.Timer

	migrateTo   *shard.Shard
	migrateDone func(*Conn, error)
	dialDone    func(*Conn, error)
}

// ID is a number unique among the server's connections. Safe from any
// goroutine.
func (c *Conn) ID() uint64 { return c.id }

// Shard is the shard that owns the connection.
func (c *Conn) Shard() *shard.Shard { return c.lp.sh }

// Server is the server the connection belongs to.
func (c *Conn) Server() *Server { return c.srv }

// RemoteAddr is the peer's address (nil if unknown).
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// Context returns the value set with SetContext.
func (c *Conn) Context() any { return c.ctx }

// SetContext attaches a value (the handler's per-connection state).
func (c *Conn) SetContext(v any) { c.ctx = v }

// InFlight is the number of frames delivered and not yet answered.
func (c *Conn) InFlight() int { return c.inflight }

// OutboundBytes is the number of response bytes queued and not yet sent.
func (c *Conn) OutboundBytes() int64 { return c.out.bytes }

// Closed reports whether the connection is closed or closing.
func (c *Conn) Closed() bool { return c.state >= connClosing }

func (lp *loop) newConn(fd int, remote *net.TCPAddr, h Handler, client bool) *Conn {
	c := &Conn{srv: lp.srv, lp: lp, handler: h, fd: fd, id: lp.srv.nextID.Add(1), client: client, state: connOpen}
	if remote != nil {
		c.remote = remote
	}
	return c
}

// start registers an open connection with its shard and tells the handler.
func (lp *loop) start(c *Conn) {
	s := lp.srv
	tuneSocket(c.fd, &s.cfg)
	c.events = unix.EPOLLIN
	if err := lp.sh.Watch(c.fd, c.events, c.onEvent); err != nil {
		lp.logf("netio: watch connection from %v: %v", c.remote, err)
		_ = unix.Close(c.fd)
		c.fd, c.state = -1, connClosed
		if c.client {
			s.clients.Add(-1)
		}
		return
	}
	c.watched = true
	lp.conns[c] = struct{}{}
	s.open.Add(1)
	if err := c.handler.OnOpen(c); err != nil {
		c.closeNow(err)
	}
}

// canDeliver reports whether the handler may be given another frame: the
// connection is open and below both its in-flight and outbound bounds.
func (c *Conn) canDeliver() bool {
	return c.state == connOpen && !c.oversize && !c.moving &&
		c.inflight < c.srv.cfg.MaxInflightPerConn && c.out.bytes < c.srv.cfg.OutboundBytesMax
}

// holding reports whether pend holds a frame that could be delivered (or
// an oversize announcement that could be reported) but was held back.
func (c *Conn) holding() bool {
	return len(c.pend) >= 4 && c.frameNeed(c.pend) <= len(c.pend)
}

// readable reports whether the connection should be read now: it may
// deliver, the peer has not shut its side, and no frame is held back
// (reading more would only grow the held input).
func (c *Conn) readable() bool {
	return c.canDeliver() && !c.eof && !c.holding()
}

// updateEvents sets the epoll mask to what the connection needs: input
// while it may read, output while a send waits for socket space.
func (c *Conn) updateEvents() {
	if c.state == connClosed || !c.watched {
		return
	}
	var ev uint32
	if c.readable() {
		ev |= unix.EPOLLIN
	}
	if c.out.blocked {
		ev |= unix.EPOLLOUT
	}
	if ev == c.events {
		return
	}
	if c.events&unix.EPOLLIN != 0 && ev&unix.EPOLLIN == 0 && c.state == connOpen && !c.eof {
		c.srv.stats.ReadPauses.Add(1)
	}
	if c.events&unix.EPOLLIN == 0 && ev&unix.EPOLLIN != 0 && c.framing {
		c.frameStartNs = c.lp.sh.Now() // reading resumes: the peer's frame gets a whole timeout
	}
	c.events = ev
	if err := c.lp.sh.Rewatch(c.fd, ev); err != nil {
		c.closeNow(err)
	}
}

// onEvent runs on the shard when the socket is ready.
func (c *Conn) onEvent(ev uint32) {
	if c.state == connDialing {
		c.connected()
		return
	}
	if ev&(unix.EPOLLOUT|unix.EPOLLERR) != 0 && !c.out.empty() {
		c.out.blocked = false
		c.flush()
	}
	if c.state == connClosed {
		return
	}
	switch {
	case ev&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) != 0 && c.readable():
		c.read()
	case ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0:
		// Not reading (paused, or closing), yet the socket failed or both
		// directions are shut: nothing more can be delivered either way.
		c.closeNow(sockError(c.fd))
		return
	}
	if c.state != connClosed {
		c.settle()
	}
}

// sockError reads the socket's pending error (ErrClosed when none).
func sockError(fd int) error {
	if e, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err == nil && e != 0 {
		return unix.Errno(e)
	}
	return ErrClosed
}

// read reads and delivers input until the socket is drained, the budget
// is spent or the connection may no longer read.
func (c *Conn) read() {
	budget := c.srv.cfg.ReadBudgetBytes
	for budget > 0 && c.readable() {
		n, err := c.readOnce()
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil:
			c.closeNow(err)
			return
		case n == 0:
			c.eof = true
			return
		}
		budget -= n
	}
}

// readOnce makes one read(2) and delivers the complete frames it finished.
// Small frames are read into the shard's buffer and delivered from there
// without a copy (a partial frame left over is copied out, with at most
// half the buffer copied back in front of the next read); a handler may
// retain them past the delivery (Retain), and the shard then reads into
// another buffer; the rest of a
// frame larger than half the buffer is read straight into the connection's
// own buffer, sized to that frame.
func (c *Conn) readOnce() (int, error) {
	lp := c.lp
	need := c.frameNeed(c.pend)
	if buf := lp.rbuf.mem; need <= len(buf)/2 {
		k := copy(buf, c.pend)
		n, err := unix.Read(c.fd, buf[k:])
		if n <= 0 {
			return 0, err
		}
		c.srv.stats.BytesIn.Add(uint64(n))
		prevConn, prevBuf := lp.delivering, lp.deliveringBuf
		lp.delivering, lp.deliveringBuf = c, lp.rbuf
		rest := c.deliver(buf[:k+n])
		lp.delivering, lp.deliveringBuf = prevConn, prevBuf
		c.keep(rest)
		lp.renewReadBuf()
		c.trimPend()
		return n, nil
	}
	if cap(c.pend) < need {
		c.pend = append(lp.buffer(need), c.pend...)
	}
	n, err := unix.Read(c.fd, c.pend[len(c.pend):need])
	if n <= 0 {
		return 0, err
	}
	c.srv.stats.BytesIn.Add(uint64(n))
	c.pend = c.pend[:len(c.pend)+n]
	c.compact(c.deliver(c.pend))
	return n, nil
}

// keep makes rest, the partial frame left in the shard's read buffer, the
// connection's pending input (in a larger buffer when the one it holds is
// too small).
func (c *Conn) keep(rest []byte) {
	if cap(c.pend) < len(rest) {
		c.pend = c.lp.buffer(len(rest))
	}
	c.pend = append(c.pend[:0], rest...)
}

// buffer returns an empty input buffer with room for n > 0 bytes: the
// shard's spare when it is large enough, else a new one sized to a power
// of two, so that frames of nearby sizes (a replication stream's) reuse
// one buffer instead of each allocating its own.
func (lp *loop) buffer(n int) []byte {
	if cap(lp.spare) >= n {
		b := lp.spare[:0]
		lp.spare = nil
		return b
	}
	return make([]byte, 0, 1<<bits.Len(uint(n-1)))
}

// frameNeed is how many bytes of input b must hold before the first frame
// in it can be delivered (or, for an oversize frame, reported).
func (c *Conn) frameNeed(b []byte) int {
	if len(b) < 4 {
		return 4
	}
	size := int(binary.BigEndian.Uint32(b))
	if size > c.srv.cfg.MaxFrameBytes {
		return 4 // reported as soon as the length is known
	}
	return 4 + size
}

// deliver hands the complete frames at the front of data to the handler
// while the connection may take them, and returns what it did not deliver
// (nil once the connection stops taking input).
func (c *Conn) deliver(data []byte) []byte {
	cfg := &c.srv.cfg
	for c.state == connOpen && !c.oversize && !c.moving {
		if len(data) < 4 {
			return data
		}
		size := int(binary.BigEndian.Uint32(data))
		if size > cfg.MaxFrameBytes {
			// Report at once with whatever part of the body came with the
			// length (a client writes its frame header in one piece, so
			// the correlation id is normally there); waiting for more
			// would let a peer hold the connection open by sending less.
			head := min(size, cfg.OversizeHeadBytes)
			c.frameTooLarge(uint32(size), data[4:min(len(data), 4+head)])
			return nil
		}
		if len(data) < 4+size || !c.canDeliver() {
			return data
		}
		c.inflight++
		c.framing = false // the next frame's clock starts with its first byte
		c.srv.stats.Frames.Add(1)
		c.handler.OnFrame(c, data[4:4+size])
		data = data[4+size:]
	}
	if c.moving {
		return data // travels with the connection
	}
	return nil // closing: unread input is dropped
}

// compact moves rest (a suffix of c.pend) to the front of c.pend.
func (c *Conn) compact(rest []byte) {
	c.pend = c.pend[:copy(c.pend, rest)]
	c.trimPend()
}

// trimPend frees a large input buffer once it is empty (one larger than
// the partial frames the shard's read buffer leaves behind).
func (c *Conn) trimPend() {
	if len(c.pend) == 0 && cap(c.pend) > len(c.lp.rbuf.mem)/2 {
		if cap(c.pend) > cap(c.lp.spare) {
			c.lp.spare = c.pend[:0] // the next large frame on this shard reuses it
		}
		c.pend = nil
	}
}

func (c *Conn) frameTooLarge(size uint32, head []byte) {
	c.oversize = true
	c.srv.stats.Oversize.Add(1)
	reason := fmt.Errorf("%w: the peer announced a frame of %d bytes, max %d", ErrFrameTooLarge, size, c.srv.cfg.MaxFrameBytes)
	c.logFault(reason)
	c.handler.OnFrameTooLarge(c, size, head)
	c.closeGracefully(reason)
}

// logFault logs the one line a connection closed for a fault gets: who,
// and why (through the server's log limit).
func (c *Conn) logFault(reason error) {
	c.lp.logf("netio: closing connection %d from %v: %v", c.id, c.remote, reason)
}

// resume delivers frames held back by the in-flight or outbound bound.
func (c *Conn) resume() {
	if c.holding() && c.canDeliver() {
		c.compact(c.deliver(c.pend))
	}
}

// Release frees the in-flight slot of one delivered frame without sending
// anything (a request that needs no answer, or one answered by Send).
// Extra calls are ignored.
func (c *Conn) Release() {
	if c.inflight == 0 {
		return
	}
	c.inflight--
	if c.state != connClosed {
		c.lp.markDirty(c, dirtyResume)
	}
}

// Reply sends r as the answer to one delivered frame and frees its
// in-flight slot. See Send for what it returns and for ownership.
func (c *Conn) Reply(r Response) error {
	err := c.Send(r)
	c.Release()
	return err
}

// Close closes the connection gracefully: nothing more is read, frames
// already read are dropped, in-flight requests may still be answered, and
// the connection closes once none is in flight and every queued byte is
// sent, or after Config.CloseTimeout. OnClose runs with a nil error.
func (c *Conn) Close() { c.closeGracefully(nil) }

func (c *Conn) closeGracefully(reason error) {
	if c.state >= connClosing {
		return
	}
	if c.state == connDialing {
		c.Abort(reason)
		return
	}
	c.state = connClosing
	c.closeErr = reason
	if d := c.srv.cfg.CloseTimeout; d > 0 {
		c.armTimer(d, func() { c.closeNow(ErrCloseTimeout) })
	}
	c.lp.markDirty(c, dirtyFlush)
}

// Abort closes the connection at the end of the shard's current round:
// queued responses are dropped (their Release runs with ErrClosed) and
// OnClose runs with err. A non-nil err is the fault of the peer (a
// malformed request): it is logged, once, with the peer's address, so the
// handler need not log it too.
func (c *Conn) Abort(err error) {
	if c.state >= connAborting {
		return
	}
	if err != nil && !errors.Is(err, ErrServerClosed) {
		c.logFault(err)
	}
	c.state = connAborting
	c.closeErr = err
	c.lp.markDirty(c, dirtyAbort)
}

// runDeferred does the work marked with markDirty, at the end of a round.
func (c *Conn) runDeferred(flags uint8) {
	if flags&dirtyAbort != 0 || c.state == connAborting {
		c.closeNow(c.closeErr)
		return
	}
	if flags&dirtyMigrate != 0 {
		c.handOver()
		return
	}
	if flags&dirtyResume != 0 {
		c.resume()
	}
	if flags&dirtyFlush != 0 || !c.out.empty() && !c.out.blocked {
		c.flush()
	}
	if c.state != connClosed {
		c.settle()
	}
}

// settle delivers held frames that may now go, closes a connection that
// has finished, and otherwise brings its epoll mask up to date.
func (c *Conn) settle() {
	c.resume()
	if c.state == connClosed {
		return
	}
	idle := c.inflight == 0 && c.out.empty()
	switch {
	case c.state == connClosing && idle:
		c.closeNow(c.closeErr)
		return
	case c.state == connOpen && c.eof && idle && !c.holding():
		var err error
		if len(c.pend) > 0 {
			err = fmt.Errorf("%w: %d bytes of a frame arrived before the peer shut its side", ErrTruncated, len(c.pend))
			c.logFault(err)
		}
		c.closeNow(err)
		return
	}
	c.trackFrame()
	c.updateEvents()
}

// trackFrame starts the frame clock when an incomplete frame is at the
// front of the input, and makes sure its timer is armed (it is not after
// a migration). A frame delivered stops the clock (deliver).
func (c *Conn) trackFrame() {
	if c.state != connOpen || len(c.pend) == 0 || c.holding() {
		c.framing = false // the timer, if armed, finds nothing to do
		return
	}
	timeout := c.srv.cfg.FrameTimeout
	if !c.framing {
		c.framing, c.frameStartNs = true, c.lp.sh.Now()
	}
	if c.frameTimer == nil {
		c.frameTimer = shard.NewTimer(c.checkFrame)
	}
	if !c.frameTimer.Pending() {
		c.lp.sh.Reset(c.frameTimer, time.Duration(c.frameStartNs+int64(timeout)-c.lp.sh.Now()))
	}
}

// checkFrame runs when the frame timer fires: it closes the connection if
// its incomplete frame is overdue, or re-arms the timer for the frame now
// pending. A connection the server stopped reading (in-flight or
// outbound bound, a migration) is not the peer's delay: its clock starts
// again, and once more when reading resumes (updateEvents).
func (c *Conn) checkFrame() {
	if c.state != connOpen || !c.framing {
		return
	}
	now, timeout := c.lp.sh.Now(), c.srv.cfg.FrameTimeout
	if !c.readable() {
		c.frameStartNs = now
	}
	if wait := c.frameStartNs + int64(timeout) - now; wait > 0 {
		c.lp.sh.Reset(c.frameTimer, time.Duration(wait))
		return
	}
	c.framing = false
	reason := fmt.Errorf("%w: %d bytes of a frame arrived, then nothing for %v", ErrFrameTimeout, len(c.pend), timeout)
	c.logFault(reason)
	c.closeGracefully(reason)
}

// armTimer (re)arms the connection's single timer.
func (c *Conn) armTimer(d time.Duration, fn func()) {
	if c.timer != nil {
		c.lp.sh.Stop(c.timer)
	}
	c.timer = shard.NewTimer(fn)
	c.lp.sh.Reset(c.timer, d)
}

// closeNow closes the socket, drops what is queued and tells the handler.
func (c *Conn) closeNow(err error) {
	if c.state == connClosed {
		return
	}
	dialing := c.state == connDialing
	c.state = connClosed
	lp, s := c.lp, c.srv
	if c.timer != nil {
		lp.sh.Stop(c.timer)
	}
	if c.frameTimer != nil {
		lp.sh.Stop(c.frameTimer)
	}
	if c.watched {
		_ = lp.sh.Unwatch(c.fd)
		c.watched = false
	}
	_ = unix.Close(c.fd)
	c.fd = -1
	c.out.dropAll(ErrClosed)
	c.pend = nil
	if dialing {
		if done := c.dialDone; done != nil {
			c.dialDone = nil
			done(nil, err)
		}
		return
	}
	delete(lp.conns, c)
	s.stats.Closed.Add(1)
	if c.client {
		s.clients.Add(-1)
	}
	if s.open.Add(-1) == 0 && s.state.Load() >= srvDraining {
		s.markDrained()
	}
	c.handler.OnClose(c, err)
}
