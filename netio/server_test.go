package netio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard"
)

func TestConfigBounds(t *testing.T) {
	for _, cfg := range []Config{
		{MaxFrameBytes: 100}, {MaxFrameBytes: MaxFrameBytesMax + 1}, {MaxInflightPerConn: -1},
		{MaxConnections: MaxConnectionsMax + 1}, {OutboundBytesMax: 10}, {ReadBufferBytes: 100},
		{ReadBufferBytes: 1 << 20, ReadBudgetBytes: 4096}, {OversizeHeadBytes: 1 << 20},
		{FrameTimeout: -time.Second}, {FrameTimeout: time.Microsecond}, {FrameTimeout: 2 * time.Hour},
		{LogLinesMax: -1}, {LogInterval: time.Microsecond}, {LogInterval: 2 * time.Hour},
	} {
		if _, err := cfg.withDefaults(); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	if c, err := (&Config{}).withDefaults(); err != nil || c.MaxFrameBytes != MaxFrameBytesDefault ||
		c.MaxInflightPerConn != 256 || c.MaxConnections != 10000 || c.OutboundBytesMax != 8<<20 ||
		c.FrameTimeout != 30*time.Second || c.LogLinesMax != 10 || c.LogInterval != 10*time.Second {
		t.Fatalf("defaults %+v %v", c, err)
	}
}

// Many pipelined requests of mixed sizes on one connection, written in one
// stream so frames straddle reads; every answer arrives, in order.
func TestPipelinedEcho(t *testing.T) {
	ts := startServer(t, 2, Config{}, newTestHandler())
	c := dialT(t, ts.addr())
	rng := rand.New(rand.NewSource(1))
	const n = 2000
	payloads := make([][]byte, n)
	var stream []byte
	for i := range payloads {
		size := rng.Intn(300)
		if i%97 == 0 {
			size = 100<<10 + rng.Intn(200<<10) // larger than half the read buffer
		}
		payloads[i] = make([]byte, size)
		rng.Read(payloads[i])
		stream = append(stream, request(uint64(i), opEcho, payloads[i])...)
	}
	go func() { _, _ = c.Write(stream) }()
	for i := 0; i < n; i++ {
		corr, _, p := c.mustRecv()
		if corr != uint64(i) || !bytes.Equal(p, payloads[i]) {
			t.Fatalf("response %d: corr %d, %d bytes (want %d)", i, corr, len(p), len(payloads[i]))
		}
	}
}

// Responses may leave in another order than their requests: held requests
// are answered newest first, and the client matches them by id.
func TestOutOfOrderResponses(t *testing.T) {
	ts := startServer(t, 1, Config{}, newTestHandler())
	c := dialT(t, ts.addr())
	for i := 0; i < 5; i++ {
		c.send(uint64(i), opHold, nil)
	}
	c.send(99, opRelease, nil)
	for _, want := range []uint64{4, 3, 2, 1, 0, 99} {
		if corr, _, _ := c.mustRecv(); corr != want {
			t.Fatalf("got response %d, want %d", corr, want)
		}
	}
}

// A frame that arrives one byte at a time is delivered once, whole.
func TestPartialFramesAcrossReads(t *testing.T) {
	ts := startServer(t, 1, Config{}, newTestHandler())
	c := dialT(t, ts.addr())
	big := bytes.Repeat([]byte("x"), 300<<10)
	stream := append(request(1, opEcho, []byte("hello")), request(2, opEcho, big)...)
	stream = append(stream, request(3, opEcho, nil)...)
	go func() {
		for i := 0; i < len(stream); {
			step := 1
			if i > 64 {
				step = 7919 // then in odd-sized pieces
			}
			end := min(i+step, len(stream))
			if _, err := c.Write(stream[i:end]); err != nil {
				return
			}
			i = end
		}
	}()
	for _, want := range []struct {
		corr uint64
		n    int
	}{{1, 5}, {2, len(big)}, {3, 0}} {
		corr, _, p := c.mustRecv()
		if corr != want.corr || len(p) != want.n {
			t.Fatalf("got %d with %d bytes, want %d with %d", corr, len(p), want.corr, want.n)
		}
	}
}

// An oversize length prefix: the connection gets the answers to its earlier
// requests, an error answer carrying the oversize request's id, then EOF;
// another connection is served throughout.
func TestOversizeFrameClosesOnlyThatConnection(t *testing.T) {
	h := newTestHandler()
	ts := startServer(t, 2, Config{MaxFrameBytes: MaxFrameBytesMin}, h)
	bad, good := dialT(t, ts.addr()), dialT(t, ts.addr())
	bad.send(1, opEcho, []byte("before"))
	oversize := binary.BigEndian.AppendUint32(nil, MaxFrameBytesMin+1)
	oversize = binary.BigEndian.AppendUint64(oversize, 7)
	if _, err := bad.Write(append(oversize, 0, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if corr, _, p := bad.mustRecv(); corr != 1 || string(p) != "before" {
		t.Fatalf("first answer %d %q", corr, p)
	}
	if corr, sid, _ := bad.mustRecv(); corr != 7 || sid != errShard {
		t.Fatalf("error answer: corr %d shard %#x", corr, sid)
	}
	bad.expectEOF()
	if err := recvWithin(t, h.closeCh); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("OnClose error %v, want ErrFrameTooLarge", err)
	}
	for i := 0; i < 10; i++ {
		good.send(uint64(i), opEcho, []byte("still here"))
		if corr, _, _ := good.mustRecv(); corr != uint64(i) {
			t.Fatalf("good connection: got %d", corr)
		}
	}
	if ts.srv.Stats().Oversize.Load() != 1 {
		t.Fatal("oversize not counted")
	}
}

// Garbage bytes and a truncated frame close only their own connections.
func TestGarbageAndTruncatedFrames(t *testing.T) {
	h := newTestHandler()
	ts := startServer(t, 2, Config{}, h)
	good := dialT(t, ts.addr())

	garbage := dialT(t, ts.addr())
	noise := make([]byte, 4096)
	rand.New(rand.NewSource(2)).Read(noise)
	_, _ = garbage.Write(noise)
	garbage.expectEOF()

	short := dialT(t, ts.addr()) // a valid length, then a body too short for the protocol
	_, _ = short.Write([]byte{0, 0, 0, 3, 1, 2, 3})
	short.expectEOF()

	trunc := dialT(t, ts.addr())
	_, _ = trunc.Write(request(1, opEcho, make([]byte, 1000))[:500])
	_ = trunc.Conn.(*net.TCPConn).CloseWrite()
	trunc.expectEOF()

	var sawTruncated bool
	for i := 0; i < 3; i++ {
		if err := recvWithin(t, h.closeCh); errors.Is(err, ErrTruncated) {
			sawTruncated = true
		}
	}
	if !sawTruncated {
		t.Fatal("no connection closed with ErrTruncated")
	}
	good.send(5, opEcho, nil)
	if corr, _, _ := good.mustRecv(); corr != 5 {
		t.Fatal("good connection not served")
	}
}

// A peer that sends its requests and shuts its side still gets every
// answer before the server closes.
func TestHalfCloseGetsAnswers(t *testing.T) {
	ts := startServer(t, 1, Config{}, newTestHandler())
	c := dialT(t, ts.addr())
	for i := 0; i < 50; i++ {
		c.send(uint64(i), opEcho, []byte("q"))
	}
	_ = c.Conn.(*net.TCPConn).CloseWrite()
	for i := 0; i < 50; i++ {
		if corr, _, _ := c.mustRecv(); corr != uint64(i) {
			t.Fatalf("answer %d: got %d", i, corr)
		}
	}
	c.expectEOF()
}

func TestMaxConnections(t *testing.T) {
	ts := startServer(t, 2, Config{MaxConnections: 2}, newTestHandler())
	a, b := dialT(t, ts.addr()), dialT(t, ts.addr())
	a.send(1, opEcho, nil)
	b.send(2, opEcho, nil)
	a.mustRecv()
	b.mustRecv()
	third := dialT(t, ts.addr())
	third.expectEOF()
	if ts.srv.Stats().Refused.Load() != 1 {
		t.Fatalf("refused %d", ts.srv.Stats().Refused.Load())
	}
}

// 1,000 connections open at once, each served.
func TestThousandConnections(t *testing.T) {
	const n = 1000
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < 2*n+256 {
		lim.Cur = min(lim.Max, 2*n+256)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 2*n+256 {
			t.Skipf("cannot raise RLIMIT_NOFILE to %d", 2*n+256)
		}
	}
	ts := startServer(t, 2, Config{}, newTestHandler())
	conns := make([]*client, n)
	for i := range conns {
		conns[i] = dialT(t, ts.addr())
	}
	for i, c := range conns {
		c.send(uint64(i), opEcho, []byte("hi"))
	}
	for i, c := range conns {
		if corr, _, p := c.mustRecv(); corr != uint64(i) || string(p) != "hi" {
			t.Fatalf("connection %d: %d %q", i, corr, p)
		}
	}
	waitFor(t, "every connection to be open", func() bool { return ts.srv.Connections() == n })
	var perShard [2]int
	for i := 0; i < 2; i++ {
		onShard(t, ts.g, i, func() { perShard[i] = len(ts.srv.loops[i].conns) })
	}
	t.Logf("connections per shard: %v", perShard)
	// Every shard accepts from the shared listener (loop.accept). The
	// split depends on which shard is parked when a connection arrives
	// (24-76 % on the loaded development VM), so this only catches a shard
	// that stopped accepting.
	for i, k := range perShard {
		if k < n/10 {
			t.Errorf("shard %d holds %d of %d connections", i, k, n)
		}
	}
}

// Requests beyond MaxInflightPerConn are not delivered (nor read further)
// until answers free slots.
func TestInflightBoundStopsReading(t *testing.T) {
	ts := startServer(t, 1, Config{MaxInflightPerConn: 4}, newTestHandler())
	c := dialT(t, ts.addr())
	for i := 0; i < 10; i++ {
		c.send(uint64(i), opHold, nil)
	}
	waitFor(t, "the connection to pause", func() bool { return ts.srv.Stats().ReadPauses.Load() > 0 })
	if f := ts.srv.Stats().Frames.Load(); f != 4 {
		t.Fatalf("%d frames delivered with an in-flight bound of 4", f)
	}
	answered := 0
	answer := func(k int) { // answer the k oldest held requests on the shard
		onShard(t, ts.g, 0, func() {
			for cc := range ts.srv.loops[0].conns {
				st := cc.Context().(*connState)
				for _, corr := range st.held[:k] {
					_ = cc.Reply(Response{Header: response(corr, 0, 0)})
				}
				st.held = st.held[k:]
			}
		})
		answered += k
	}
	answer(2)
	waitFor(t, "two more frames", func() bool { return ts.srv.Stats().Frames.Load() == 6 })
	for answered < 10 {
		answer(min(4, 10-answered))
		want := uint64(min(answered+4, 10))
		waitFor(t, "frames to follow the answers", func() bool { return ts.srv.Stats().Frames.Load() == want })
	}
	for i := 0; i < 10; i++ {
		if corr, _, _ := c.mustRecv(); corr != uint64(i) {
			t.Fatalf("answer %d: %d", i, corr)
		}
	}
}

// Graceful shutdown: no new connections, in-flight requests answered, then
// closed.
func TestGracefulShutdown(t *testing.T) {
	h := newTestHandler()
	ts := startServer(t, 2, Config{}, h)
	c := dialT(t, ts.addr())
	c.send(1, opHold, nil)
	waitFor(t, "the request to arrive", func() bool { return ts.srv.Stats().Frames.Load() == 1 })
	done := make(chan error, 1)
	go func() { done <- ts.srv.Shutdown(context.Background()) }()
	waitFor(t, "the listeners to close", func() bool {
		cc, err := net.DialTimeout("tcp", ts.addr(), time.Second)
		if err == nil {
			cc.Close()
		}
		return err != nil
	})
	select {
	case err := <-done:
		t.Fatalf("shutdown returned %v with a request in flight", err)
	default:
	}
	// The held request is answered on the shard; the connection closes.
	for i := 0; i < 2; i++ {
		onShard(t, ts.g, i, func() {
			for cc := range ts.srv.loops[i].conns {
				st := cc.Context().(*connState)
				for _, corr := range st.held {
					_ = cc.Reply(Response{Header: response(corr, i, 0)})
				}
				st.held = nil
			}
		})
	}
	if corr, _, _ := c.mustRecv(); corr != 1 {
		t.Fatalf("answer %d", corr)
	}
	c.expectEOF()
	if err := recvWithin(t, done); err != nil {
		t.Fatal(err)
	}
}

// A shutdown whose context ends aborts what is left.
func TestShutdownDeadlineAborts(t *testing.T) {
	h := newTestHandler()
	ts := startServer(t, 1, Config{}, h)
	c := dialT(t, ts.addr())
	c.send(1, opHold, nil)
	waitFor(t, "the request to arrive", func() bool { return ts.srv.Stats().Frames.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ts.srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("shutdown: %v", err)
	}
	c.expectEOF()
	if err := recvWithin(t, h.closeCh); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("OnClose: %v", err)
	}
}

// Answers produced on another shard (shard.Call from the handler) come
// back to the connection's shard and leave in order.
func TestCrossShardAnswers(t *testing.T) {
	g, err := shard.NewGroup(shard.Config{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	srv, err := NewServer(g, Config{}, &benchHandler{crossShard: true, fileFd: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	c := dialT(t, srv.Addr().String())
	var stream []byte
	for i := 0; i < 500; i++ {
		stream = append(stream, request(uint64(i), opEcho, []byte("x"))...)
	}
	go func() { _, _ = c.Write(stream) }()
	home := -1
	for i := 0; i < 500; i++ {
		corr, sid, _ := c.mustRecv()
		if corr != uint64(i) {
			t.Fatalf("answer %d: got %d", i, corr)
		}
		if home == -1 {
			home = 1 - sid
		}
		if sid != 1-home {
			t.Fatalf("answer %d from shard %d, want the other shard %d", i, sid, 1-home)
		}
	}
}

// Shutting down after the group stopped reports it instead of hanging.
func TestShutdownAfterGroupStopped(t *testing.T) {
	g, err := shard.NewGroup(shard.Config{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(g, Config{}, newTestHandler())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c := dialT(t, srv.Addr().String())
	c.send(1, opEcho, nil)
	c.mustRecv()
	_ = g.Stop()
	if err := srv.Shutdown(context.Background()); !errors.Is(err, shard.ErrStopped) {
		t.Fatalf("shutdown after stop: %v", err)
	}
	c.expectEOF() // the descriptors were closed anyway
	if srv.Connections() != 0 {
		t.Fatalf("%d connections left", srv.Connections())
	}
}

// manualClock is a shard clock moved by hand: with it the shards arm no
// timerfd, and a test wakes them after moving it.
type manualClock struct{ ns atomic.Int64 }

func (c *manualClock) Now() int64 { return c.ns.Load() }

// startServerClock is startServer on one shard that reads clk.
func startServerClock(t *testing.T, clk shard.Clock, cfg Config, h *testHandler) *testServer {
	t.Helper()
	g, err := shard.NewGroup(shard.Config{Count: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(g, cfg, h)
	if err == nil {
		err = srv.Listen("127.0.0.1:0")
	}
	if err != nil {
		_ = g.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Shutdown(contextWithTimeout(10 * time.Second))
		_ = g.Stop()
	})
	return &testServer{g: g, srv: srv, h: h}
}

// advance moves the clock by d and lets the shard run its timers.
func advance(t *testing.T, ts *testServer, clk *manualClock, d time.Duration) {
	t.Helper()
	// Let the round in progress (a read, a flush) finish at the old time:
	// what it observed the client see may not have been settled yet.
	onShard(t, ts.g, 0, func() {})
	clk.ns.Add(int64(d))
	// A round runs its messages, then its due timers: after a second
	// message has run, the timers due at the new time have.
	onShard(t, ts.g, 0, func() {})
	onShard(t, ts.g, 0, func() {})
}

// A connection that sends part of a frame (a length prefix alone, or a
// prefix and part of the body, after whole frames) and then nothing is
// closed once Config.FrameTimeout has passed since that frame's first
// byte; connections idle between frames stay open. Before the frame
// timeout such connections were never closed.
func TestHalfSentFrameTimesOut(t *testing.T) {
	clk := &manualClock{}
	clk.ns.Store(int64(time.Hour))
	h := newTestHandler()
	ts := startServerClock(t, clk, Config{}, h) // FrameTimeout: the default 30 s
	var sent uint64
	write := func(c *client, b []byte) {
		t.Helper()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		sent += uint64(len(b))
	}
	prefixOnly, halfBody := dialT(t, ts.addr()), dialT(t, ts.addr())
	idle, between := dialT(t, ts.addr()), dialT(t, ts.addr())
	write(prefixOnly, []byte{0, 0})
	write(halfBody, append(request(1, opNoAnswer, nil), request(2, opEcho, make([]byte, 100))[:60]...))
	write(between, request(3, opEcho, []byte("a")))
	between.mustRecv()
	waitFor(t, "the server to read every byte", func() bool { return ts.srv.Stats().BytesIn.Load() == sent })

	advance(t, ts, clk, 20*time.Second)
	write(between, request(4, opEcho, []byte("b"))) // a frame 20 s after the last: not late
	between.mustRecv()
	advance(t, ts, clk, FrameTimeoutDefault-20*time.Second-time.Millisecond)
	select {
	case err := <-h.closeCh:
		t.Fatalf("a connection closed (%v) before the frame timeout", err)
	default:
	}
	advance(t, ts, clk, 2*time.Millisecond)
	for i := 0; i < 2; i++ {
		if err := recvWithin(t, h.closeCh); !errors.Is(err, ErrFrameTimeout) {
			t.Fatalf("OnClose: %v, want ErrFrameTimeout", err)
		}
	}
	prefixOnly.expectEOF()
	halfBody.expectEOF()

	advance(t, ts, clk, time.Hour) // idle connections have no limit
	for i, c := range []*client{idle, between} {
		c.send(uint64(10+i), opEcho, nil)
		if corr, _, _ := c.mustRecv(); corr != uint64(10+i) {
			t.Fatalf("idle connection %d: answer %d", i, corr)
		}
	}
	select {
	case err := <-h.closeCh:
		t.Fatalf("an idle connection closed: %v", err)
	default:
	}
}

// Time during which the server does not read a connection (its in-flight
// bound is reached) does not count against a frame that is incomplete:
// the peer cannot send it while the server does not read.
func TestFrameTimeoutPausedWhileServerStopsReading(t *testing.T) {
	clk := &manualClock{}
	clk.ns.Store(int64(time.Hour))
	h := newTestHandler()
	ts := startServerClock(t, clk, Config{MaxInflightPerConn: 1}, h)
	c := dialT(t, ts.addr())
	stream := append(request(1, opHold, nil), request(2, opEcho, make([]byte, 100))[:30]...)
	if _, err := c.Write(stream); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to read the stream", func() bool { return ts.srv.Stats().BytesIn.Load() == uint64(len(stream)) })
	advance(t, ts, clk, 2*FrameTimeoutDefault)
	advance(t, ts, clk, time.Millisecond)
	select {
	case err := <-h.closeCh:
		t.Fatalf("closed (%v) while the server was not reading it", err)
	default:
	}
	onShard(t, ts.g, 0, func() { // answer the held request: reading resumes
		for cc := range ts.srv.loops[0].conns {
			st := cc.Context().(*connState)
			for _, corr := range st.held {
				_ = cc.Reply(Response{Header: response(corr, 0, 0)})
			}
			st.held = nil
		}
	})
	if corr, _, _ := c.mustRecv(); corr != 1 {
		t.Fatalf("answer %d", corr)
	}
	advance(t, ts, clk, FrameTimeoutDefault-time.Millisecond)
	select {
	case err := <-h.closeCh:
		t.Fatalf("closed (%v) before a whole timeout of reading", err)
	default:
	}
	advance(t, ts, clk, 2*time.Millisecond)
	if err := recvWithin(t, h.closeCh); !errors.Is(err, ErrFrameTimeout) {
		t.Fatalf("OnClose: %v, want ErrFrameTimeout", err)
	}
}

// The same on the shard's real clock (its timerfd), with a short timeout.
func TestHalfSentFrameTimesOutOnRealClock(t *testing.T) {
	h := newTestHandler()
	ts := startServer(t, 2, Config{FrameTimeout: 50 * time.Millisecond}, h)
	c := dialT(t, ts.addr())
	c.send(1, opEcho, nil)
	c.mustRecv()
	if _, err := c.Write(request(2, opEcho, []byte("half"))[:7]); err != nil {
		t.Fatal(err)
	}
	c.expectEOF()
	if err := recvWithin(t, h.closeCh); !errors.Is(err, ErrFrameTimeout) {
		t.Fatalf("OnClose: %v, want ErrFrameTimeout", err)
	}
}
