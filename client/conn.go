package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// This file is one pipelined connection to one broker node.
//
// A request's life: send assigns a correlation id, registers the call in
// pending and queues it. Whoever holds the write side (writing) writes the
// queue, every queued frame in one writev: the writer goroutine, or the
// sender itself when the connection was idle (a direct write: the one
// request of a synchronous producer then reaches the socket without waking
// the writer, a thread hand-off that costs tens of microseconds on a
// machine whose idle CPUs halt). The reader goroutine reads response frames,
// finds the call by correlation id (responses may come in any order),
// decodes the body and completes the call. When the connection breaks, the
// reader — the only goroutine that completes calls on failure — waits for
// the writer to exit and then fails every pending call with
// ErrConnectionLost, so a failed call's frame is never read again by a
// writer: its buffers may be reused at once. A direct write that fails
// leaves its call pending like any other, so the reader fails it exactly
// once, and the reader waits for the write side to be released (a direct
// write in progress) before it fails anything.
//
// Every call sent has a deadline (Config.RequestTimeout plus a margin,
// plus a fetch's own long-poll wait). A watchdog goroutine fails the whole
// connection when the oldest deadline passes without an answer: a node
// that stopped answering (a hung or stopped process, a silently dropped
// network path) keeps its socket open, and nothing else would ever fail
// the requests waiting on it. Failing the connection, not just the call,
// is what lets the callers refresh the metadata and follow a new primary,
// and it is safe: every request on it is then answered ErrConnectionLost
// (outcome unknown), which the SDK already retries where that is safe.

const (
	// readBufferBytes is the reader's bufio buffer: it amortises the read
	// syscalls of many small pipelined responses.
	readBufferBytes = 64 << 10
	// scratchBytesMax bounds the reusable buffer for response frames that
	// the decoder copies out of (everything but fetch records).
	scratchBytesMax = 64 << 10
	// writeBatchMax bounds the frames gathered into one writev.
	writeBatchMax = 64
	// directWriteBytesMax bounds the frame a sender writes itself. A frame
	// that fits the socket's send buffer is written at once by a
	// connection with nothing else in flight (the broker has read every
	// byte it answered); a larger one could block the sender on a node
	// that stopped reading until the watchdog fails the connection, so
	// the writer goroutine takes it.
	directWriteBytesMax = 64 << 10
)

// Call states: a call is waited for, claimed by the reader to complete it,
// or abandoned by its waiter (the reader then drops its response).
const (
	callWaiting int32 = iota
	callClaimed
	callAbandoned
)

// call is one request on a connection.
type call struct {
	key     wire.APIKey
	version uint16
	// head is the request frame, or its beginning when tail is set; the
	// connection writes the correlation id into head[8:12].
	head []byte
	// tail, when set, is sent right after head (a produce's record batch,
	// sent without copying).
	tail []byte
	// resp receives the decoded body of a successful response.
	resp wire.Response
	// ownFrame gives the response its own buffer, because resp keeps
	// slices into it (a fetch's records).
	ownFrame bool
	// cb, when set, is run on the reader goroutine at completion and must
	// not block; otherwise done is closed.
	cb   func(*call)
	done chan struct{}
	// owner is the producer batch of a produce call.
	owner *prodBatch
	// part and gen name the partition a data call is for and the
	// generation it was routed at (part.topic "": none), so that a silent
	// connection's calls can be matched to their partitions' new routes.
	part partKey
	gen  int32
	// waitExtra is how long the broker may hold this request on purpose
	// beyond RequestTimeout (a fetch's long poll); its deadline is that
	// much later.
	waitExtra time.Duration
	// deadline is when the connection fails if no answer came; set by send.
	deadline time.Time

	corr  uint32
	state atomic.Int32
	// err is the outcome, set before completion: nil, a
	// *wire.ErrorResponse, or an error wrapping ErrConnectionLost.
	err error
}

// conn is a handshaken, pipelined connection.
type conn struct {
	addr   string
	nodeID int32
	nc     net.Conn
	// versions holds the version picked for each API key; -1 when the
	// broker speaks none this client knows.
	versions []int32
	// frameBytesMax is the broker's largest request frame.
	frameBytesMax int
	// responseTimeout is how long a sent request may wait for its answer
	// (Config.responseTimeout) before the watchdog fails the connection.
	responseTimeout time.Duration
	// silentNodeCheck and onSilent are Config's: how long the connection
	// may receive nothing with requests outstanding before onSilent is
	// called (<= 0 or nil: never). probing is set while a call runs.
	silentNodeCheck time.Duration
	onSilent        func(*conn)
	probing         atomic.Bool
	// slots bounds the calls between send and completion.
	slots chan struct{}
	// wakeWriter tells the writer goroutine that calls were queued while
	// nobody held the write side (capacity 1).
	wakeWriter chan struct{}

	mu sync.Mutex
	// pending maps correlation ids to calls sent and not completed.
	// Guarded by mu; nil once the connection failed.
	pending map[uint32]*call
	// queue holds the calls sent and not yet written, in send order (the
	// order a partition's produces must reach the broker in); its length
	// is bounded by slots. Guarded by mu.
	queue []*call
	// writing says one goroutine holds the write side: the writer, or a
	// sender writing directly. Only the holder writes to nc or touches
	// wbufs; it takes the queue's frames in order, so frames are written
	// in send order. Guarded by mu.
	writing bool
	// writeFree is signalled (on mu) when writing is released.
	writeFree sync.Cond
	// wbufs is the holder of the write side's writev list.
	wbufs net.Buffers
	// nextCorr is the last correlation id given. Guarded by mu.
	nextCorr uint32
	// framesRead counts the responses read, so that the watchdog sees
	// whether anything came without a clock read per frame. Guarded by mu.
	framesRead uint64
	// err is why the connection failed; set once. Guarded by mu.
	err error

	closed     chan struct{} // closed when err is set
	writerDone chan struct{}
	readerDone chan struct{}
	watchDone  chan struct{}
}

// dialConn connects to addr and handshakes within ctx.
func dialConn(ctx context.Context, cfg *Config, addr string) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	nc, err := cfg.Dialer(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	capRetransmit(nc, cfg.RetransmitBackoffMax)
	if cfg.TLS != nil {
		tc, err := startTLS(ctx, nc, cfg.TLS, addr)
		if err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	hs, err := handshake(ctx, nc, cfg.ClientID)
	if err != nil {
		nc.Close()
		if cfg.TLS == nil {
			err = plaintextHint(err)
		}
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	if cfg.Username != "" {
		if err := authenticate(ctx, nc, hs, cfg.Username, cfg.Password); err != nil {
			nc.Close()
			return nil, fmt.Errorf("authenticating as %s with %s: %w", cfg.Username, addr, err)
		}
	}
	c := &conn{
		addr: addr, nodeID: hs.NodeID, nc: nc,
		versions:        make([]int32, len(wire.APIs())),
		frameBytesMax:   int(hs.FrameBytesMax),
		responseTimeout: cfg.responseTimeout(),
		silentNodeCheck: cfg.SilentNodeCheck,
		onSilent:        cfg.onSilent,
		slots:           make(chan struct{}, cfg.InFlightPerConnMax),
		wakeWriter:      make(chan struct{}, 1),
		pending:         make(map[uint32]*call),
		queue:           make([]*call, 0, cfg.InFlightPerConnMax),
		wbufs:           make(net.Buffers, 0, 2*writeBatchMax),
		closed:          make(chan struct{}),
		writerDone:      make(chan struct{}),
		readerDone:      make(chan struct{}),
		watchDone:       make(chan struct{}),
	}
	for i := range c.versions {
		c.versions[i] = -1
		if v, ok := hs.PickVersion(wire.APIKey(i)); ok {
			c.versions[i] = int32(v)
		}
	}
	if c.frameBytesMax <= 0 {
		c.frameBytesMax = wire.FrameBytesMaxDefault
	}
	c.writeFree.L = &c.mu
	go c.writeLoop()
	go c.readLoop()
	go c.watchLoop()
	return c, nil
}

// handshake sends the Handshake request and reads its answer, with the
// connection's deadline following ctx.
func handshake(ctx context.Context, nc net.Conn, clientID string) (*wire.HandshakeResponse, error) {
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := wire.HandshakeRequest{ProtocolMin: wire.ProtocolVersionMin, ProtocolMax: wire.ProtocolVersionMax,
		ClientID: clientID, ClientSoftware: clientSoftware}
	if _, err := nc.Write(wire.AppendRequest(nil, 0, 0, &req)); err != nil {
		return nil, ctxOr(ctx, fmt.Errorf("%w: %w", ErrUnreachable, err))
	}
	frame, err := readFrame(bufio.NewReaderSize(nc, 4096), nil, wire.FrameBytesMaxDefault)
	if err != nil {
		return nil, ctxOr(ctx, fmt.Errorf("%w: %w", ErrUnreachable, err))
	}
	if !stop() {
		return nil, ctx.Err()
	}
	nc.SetDeadline(time.Time{})
	h, body, err := wire.ParseResponseHeader(frame)
	if err != nil {
		return nil, err
	}
	var hs wire.HandshakeResponse
	if err := wire.DecodeResponseBody(h, body, 0, &hs); err != nil {
		return nil, err
	}
	return &hs, nil
}

// ctxOr returns ctx's error when it is done (the real cause of an I/O error
// forced by a deadline), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readFrame reads one whole response frame (without its size field) into
// buf when it fits, else into a new buffer.
func readFrame(r io.Reader, buf []byte, frameBytesMax int) ([]byte, error) {
	var size [wire.SizeFieldBytes]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if _, _, err := wire.NextResponseFrame(size[:], frameBytesMax); err != nil {
		return nil, err
	}
	if n > cap(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// version returns the version to use for key, or ErrUnsupported.
func (c *conn) version(key wire.APIKey) (uint16, error) {
	if int(key) >= len(c.versions) || c.versions[key] < 0 {
		return 0, fmt.Errorf("%w: %s (node %d at %s)", ErrUnsupported, key, c.nodeID, c.addr)
	}
	return uint16(c.versions[key]), nil
}

// isClosed reports whether the connection has failed or been closed.
func (c *conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// failure returns why the connection failed.
func (c *conn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// close closes the connection; pending calls fail with ErrConnectionLost
// wrapping cause.
func (c *conn) close(cause error) {
	c.setErr(cause)
	c.nc.Close()
	<-c.readerDone
}

// setErr records the first failure and wakes the writer.
func (c *conn) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.addr, err)
		close(c.closed)
	}
}

// send starts cl on the connection. It waits for an in-flight slot under
// ctx. On success cl will be completed exactly once (its cb run or its done
// closed); on error it never will be. When the connection has nothing else
// in flight and nobody writes, send writes cl's frame itself (a direct
// write) before it returns; otherwise the writer goroutine does.
func (c *conn) send(ctx context.Context, cl *call) error {
	select {
	case c.slots <- struct{}{}:
	case <-c.closed:
		return c.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
	cl.state.Store(callWaiting)
	cl.err = nil
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		<-c.slots
		return err
	}
	c.nextCorr++
	cl.corr = c.nextCorr
	cl.deadline = time.Now().Add(c.responseTimeout + cl.waitExtra)
	binary.BigEndian.PutUint32(cl.head[8:], cl.corr)
	// The watchdog needs no wake for a call sent while none was pending:
	// idle, it sleeps one response timeout from its last scan, which ends
	// before this call's deadline.
	c.pending[cl.corr] = cl
	c.queue = append(c.queue, cl) // never grows: the slot bounds the queue
	switch {
	case c.writing:
		// The holder takes the queue when it is done.
	case len(c.pending) == 1 && len(cl.head)+len(cl.tail) <= directWriteBytesMax:
		c.writing = true
		c.takeQueueLocked()
		c.mu.Unlock()
		c.writeTaken()
		c.releaseWrite()
		return nil
	default:
		select {
		case c.wakeWriter <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	return nil
}

// takeQueueLocked moves up to writeBatchMax queued calls' frames, in
// order, into wbufs. REQUIRES: mu held and the write side held.
func (c *conn) takeQueueLocked() {
	n := min(len(c.queue), writeBatchMax)
	for _, cl := range c.queue[:n] {
		c.wbufs = appendFrame(c.wbufs, cl)
	}
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
}

// writeTaken writes wbufs; a failure fails the connection (the calls
// written stay pending, and the reader fails them). It reports whether
// the write succeeded. REQUIRES: the write side held, mu not held.
func (c *conn) writeTaken() bool {
	toWrite := c.wbufs // WriteTo consumes its receiver
	_, err := toWrite.WriteTo(c.nc)
	clear(c.wbufs[:cap(c.wbufs)]) // drop references to written frames
	c.wbufs = c.wbufs[:0]
	if err != nil {
		c.setErr(err)
		c.nc.Close()
		return false
	}
	return true
}

// releaseWrite gives the write side up after a direct write, waking the
// writer goroutine for the calls queued meanwhile.
func (c *conn) releaseWrite() {
	c.mu.Lock()
	c.writing = false
	if len(c.queue) > 0 && c.err == nil {
		select {
		case c.wakeWriter <- struct{}{}:
		default:
		}
	}
	c.writeFree.Broadcast()
	c.mu.Unlock()
}

// roundTrip sends req and waits for its response, decoded into resp. When
// ctx ends first the call is abandoned: its slot stays taken until the
// broker answers, and the answer is dropped.
func (c *conn) roundTrip(ctx context.Context, req wire.Request, resp wire.Response, ownFrame bool) error {
	v, err := c.version(req.APIKey())
	if err != nil {
		return err
	}
	cl := &call{key: req.APIKey(), version: v, resp: resp, ownFrame: ownFrame, done: make(chan struct{})}
	if fr, ok := req.(*wire.FetchRequest); ok {
		cl.waitExtra = time.Duration(fr.MaxWaitMs) * time.Millisecond
	}
	cl.head = wire.AppendRequest(nil, 0, v, req)
	if err := c.send(ctx, cl); err != nil {
		return err
	}
	select {
	case <-cl.done:
		return cl.err
	case <-ctx.Done():
		if cl.state.CompareAndSwap(callWaiting, callAbandoned) {
			return ctx.Err()
		}
		<-cl.done // the reader claimed it: completion is imminent
		return cl.err
	}
}

// writeLoop writes the queued frames that no direct write took, gathering
// up to writeBatchMax of them into one writev.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	for {
		select {
		case <-c.wakeWriter:
		case <-c.closed:
			return
		}
		for { // bounded by the calls queued; each turn writes at least one
			c.mu.Lock()
			if c.writing || len(c.queue) == 0 || c.err != nil {
				// A direct writer holds the write side: it wakes this
				// loop again for what it leaves queued.
				c.mu.Unlock()
				break
			}
			c.writing = true
			c.takeQueueLocked()
			c.mu.Unlock()
			ok := c.writeTaken()
			c.mu.Lock()
			c.writing = false
			c.writeFree.Broadcast()
			c.mu.Unlock()
			if !ok {
				return
			}
		}
	}
}

func appendFrame(bufs net.Buffers, cl *call) net.Buffers {
	bufs = append(bufs, cl.head)
	if len(cl.tail) > 0 {
		bufs = append(bufs, cl.tail)
	}
	return bufs
}

// readLoop reads responses until the connection fails, then fails every
// pending call.
func (c *conn) readLoop() {
	defer close(c.readerDone)
	err := c.readResponses()
	c.setErr(err)
	c.nc.Close()
	<-c.writerDone
	<-c.watchDone
	c.mu.Lock()
	// c.err is set, so no send takes the write side again; wait for a
	// direct write in progress (it fails soon on the closed socket) so
	// that no frame of a failed call is read after it fails.
	for c.writing {
		c.writeFree.Wait()
	}
	pending := c.pending
	c.pending = nil
	clear(c.queue)
	c.queue = c.queue[:0]
	failure := c.err
	c.mu.Unlock()
	for _, cl := range pending {
		c.complete(cl, failure)
	}
}

// readResponses is the reader's loop; it returns the error that ended it.
func (c *conn) readResponses() error {
	br := bufio.NewReaderSize(c.nc, readBufferBytes)
	var hdr [wire.SizeFieldBytes + 4]byte
	var scratch []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		if _, _, err := wire.NextResponseFrame(hdr[:], wire.FrameBytesMaxDefault); err != nil {
			return err
		}
		size := int(binary.BigEndian.Uint32(hdr[:]))
		corr := binary.BigEndian.Uint32(hdr[4:])
		c.mu.Lock()
		cl := c.pending[corr]
		delete(c.pending, corr)
		c.framesRead++
		c.mu.Unlock()
		if cl == nil {
			return fmt.Errorf("%w: response with correlation id %d, which is not in flight", wire.ErrMalformedResponse, corr)
		}
		if !cl.state.CompareAndSwap(callWaiting, callClaimed) {
			// Abandoned by its waiter: drop the answer, free the slot.
			if _, err := br.Discard(size - 4); err != nil {
				return err
			}
			c.complete(cl, context.Canceled)
			continue
		}
		var frame []byte
		switch {
		case cl.ownFrame || size > scratchBytesMax:
			frame = make([]byte, size)
		default:
			if cap(scratch) < size {
				scratch = make([]byte, scratchBytesMax)
			}
			frame = scratch[:size]
		}
		copy(frame, hdr[4:])
		if _, err := io.ReadFull(br, frame[4:]); err != nil {
			c.complete(cl, fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.addr, err))
			return err
		}
		h, body, _ := wire.ParseResponseHeader(frame)
		err := wire.DecodeResponseBody(h, body, cl.version, cl.resp)
		if errors.Is(err, wire.ErrMalformedResponse) {
			err = fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.addr, err)
			c.complete(cl, err)
			return err
		}
		c.complete(cl, err)
	}
}

// watchLoop fails the connection when a sent request's deadline passes
// without an answer. It sleeps until the earliest deadline of the calls
// pending (a scan of at most InFlightPerConnMax calls per wake), or one
// response timeout when none is pending, which ends no later than the
// deadline of any call sent meanwhile; so it wakes about once per response
// timeout, and never on a send (a wake per send of a synchronous producer
// would cost a thread hand-off per request).
//
// With a silent-node check (Config.SilentNodeCheck) it also wakes every
// check: when a call has been due for a check (sent, plus its long poll)
// and no response came for as long, it calls onSilent, which asks the
// other nodes whether this node still leads its partitions.
func (c *conn) watchLoop() {
	defer close(c.watchDone)
	check := c.silentNodeCheck
	if c.onSilent == nil {
		check = 0
	}
	idle := c.responseTimeout
	if check > 0 {
		idle = min(idle, check)
	}
	t := time.NewTimer(idle)
	defer t.Stop()
	var lastFrames uint64
	quietSince := time.Now()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		now := time.Now()
		c.mu.Lock()
		var oldest *call
		var due time.Time // the earliest a pending call was to be answered
		for _, cl := range c.pending {
			if oldest == nil || cl.deadline.Before(oldest.deadline) {
				oldest = cl
			}
			if d := cl.deadline.Add(-c.responseTimeout); due.IsZero() || d.Before(due) {
				due = d
			}
		}
		frames := c.framesRead
		// Copy what is needed: once mu is released the call may complete
		// and its memory be reused by its next send.
		var key wire.APIKey
		var waited time.Duration
		var deadline time.Time
		if oldest != nil {
			key, waited, deadline = oldest.key, c.responseTimeout+oldest.waitExtra, oldest.deadline
		}
		expired := oldest != nil && !now.Before(deadline)
		c.mu.Unlock()
		if frames != lastFrames {
			lastFrames, quietSince = frames, now
		}
		if expired {
			c.setErr(fmt.Errorf("%w: no answer to %s from node %d within %v", ErrRequestTimeout, key, c.nodeID, waited))
			c.nc.Close()
			return
		}
		if oldest == nil {
			t.Reset(idle) // a call sent now wakes the loop
			continue
		}
		next := deadline.Sub(now)
		if check > 0 {
			silentAt := due
			if quietSince.After(silentAt) {
				silentAt = quietSince
			}
			silentAt = silentAt.Add(check)
			if !now.Before(silentAt) {
				if c.probing.CompareAndSwap(false, true) {
					go func() {
						defer c.probing.Store(false)
						c.onSilent(c)
					}()
				}
				silentAt = now.Add(check) // and again while it lasts
			}
			next = min(next, silentAt.Sub(now))
		}
		t.Reset(next)
	}
}

// pendingParts returns the partitions of the data calls pending, each
// with the oldest generation one of them was routed at.
func (c *conn) pendingParts() map[partKey]int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[partKey]int32{}
	for _, cl := range c.pending {
		if cl.part.topic == "" {
			continue
		}
		if g, ok := out[cl.part]; !ok || cl.gen < g {
			out[cl.part] = cl.gen
		}
	}
	return out
}

// complete ends cl with err and frees its slot.
func (c *conn) complete(cl *call, err error) {
	cl.err = err
	<-c.slots
	if cl.cb != nil {
		cl.cb(cl)
	} else {
		close(cl.done)
	}
}
