package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corestream/corestream/shard"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(listenChildEnv); addr != "" {
		os.Exit(listenChild(addr))
	}
	goleak.VerifyTestMain(m)
}

// The test protocol. A request body is
//
//	u64 correlation id | u8 op | payload
//
// and a response is u32 length | u64 correlation id | u8 shard | payload.
const (
	opEcho      = iota // answer with the payload
	opHold             // keep the request until an opRelease
	opRelease          // answer every held request, newest first, then this one
	opFile             // answer with header + the test file's ranges (payload: n ranges × {u64 off, u64 len})
	opBig              // answer with a header of u32(payload) bytes
	opClose            // answer, then close the connection gracefully
	opHandshake        // answer, then migrate to shard payload[0]
	opNoAnswer         // release the slot without answering
	opRetain           // retain the frame (Conn.Retain) and keep its payload; answer 1 if retained, else 0
	opGiveBack         // answer with every kept payload, concatenated, then release them (twice: extras are ignored)
)

const respHeaderBytes = 4 + 8 + 1

// errShard in a response's shard byte marks the error answer to an
// oversize frame.
const errShard = 0xEE

func request(corr uint64, op byte, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(9+len(payload)))
	b = binary.BigEndian.AppendUint64(b, corr)
	b = append(b, op)
	return append(b, payload...)
}

func response(corr uint64, shardID int, payloadLen int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(9+payloadLen))
	b = binary.BigEndian.AppendUint64(b, corr)
	return append(b, byte(shardID))
}

// testHandler implements the protocol. It is shared by all shards but only
// touches per-connection state (in Conn.Context) and atomic-free fields
// guarded by mu.
type testHandler struct {
	fileFd int // for opFile

	mu      sync.Mutex
	opened  int
	closed  []error
	tooBig  []uint32
	closeCh chan error
}

type connState struct {
	held []uint64
	// kept are the payloads of retained frames and their releases.
	kept     [][]byte
	releases []func()
}

func newTestHandler() *testHandler { return &testHandler{fileFd: -1, closeCh: make(chan error, 4096)} }

func (h *testHandler) OnOpen(c *Conn) error {
	h.mu.Lock()
	h.opened++
	h.mu.Unlock()
	c.SetContext(&connState{})
	return nil
}

func (h *testHandler) OnClose(c *Conn, err error) {
	h.mu.Lock()
	h.closed = append(h.closed, err)
	h.mu.Unlock()
	h.closeCh <- err
}

func (h *testHandler) OnFrameTooLarge(c *Conn, size uint32, head []byte) {
	h.mu.Lock()
	h.tooBig = append(h.tooBig, size)
	h.mu.Unlock()
	// Answer with an error carrying the correlation id, when it arrived.
	if len(head) >= 8 {
		corr := binary.BigEndian.Uint64(head)
		_ = c.Send(Response{Header: response(corr, errShard, 0)})
	}
}

func (h *testHandler) OnFrame(c *Conn, body []byte) {
	if len(body) < 9 {
		c.Abort(fmt.Errorf("short request: %d bytes", len(body)))
		return
	}
	corr, op, payload := binary.BigEndian.Uint64(body), body[8], body[9:]
	st := c.Context().(*connState)
	sid := c.Shard().ID()
	switch op {
	case opEcho:
		_ = c.Reply(Response{Header: append(response(corr, sid, len(payload)), payload...)})
	case opHold:
		st.held = append(st.held, corr)
	case opRelease:
		for i := len(st.held) - 1; i >= 0; i-- {
			_ = c.Reply(Response{Header: response(st.held[i], sid, 0)})
		}
		st.held = nil
		_ = c.Reply(Response{Header: response(corr, sid, 0)})
	case opFile:
		var files []FileRange
		total := 0
		for p := payload; len(p) >= 16; p = p[16:] {
			f := FileRange{Fd: h.fileFd, Off: int64(binary.BigEndian.Uint64(p)), Len: int64(binary.BigEndian.Uint64(p[8:]))}
			files = append(files, f)
			total += int(f.Len)
		}
		_ = c.Reply(Response{Header: response(corr, sid, total), Files: files})
	case opBig:
		n := int(binary.BigEndian.Uint32(payload))
		_ = c.Reply(Response{Header: append(response(corr, sid, n), make([]byte, n)...)})
	case opClose:
		_ = c.Reply(Response{Header: response(corr, sid, 0)})
		c.Close()
	case opHandshake:
		_ = c.Reply(Response{Header: response(corr, sid, 0)})
		to := c.Server().group.Shard(int(payload[0]))
		if err := c.Migrate(to, func(*Conn, error) {}); err != nil {
			c.Abort(err)
		}
	case opNoAnswer:
		c.Release()
	case opRetain:
		rel := c.Retain()
		if rel == nil {
			_ = c.Reply(Response{Header: append(response(corr, sid, 1), 0)})
			return
		}
		st.kept, st.releases = append(st.kept, payload), append(st.releases, rel)
		_ = c.Reply(Response{Header: append(response(corr, sid, 1), 1)})
	case opGiveBack:
		var all []byte
		for _, p := range st.kept {
			all = append(all, p...)
		}
		for _, rel := range st.releases {
			rel()
			rel()
		}
		st.kept, st.releases = nil, nil
		_ = c.Reply(Response{Header: append(response(corr, sid, len(all)), all...)})
	default:
		c.Abort(fmt.Errorf("unknown op %d", op))
	}
}

// testServer is a running group and server.
type testServer struct {
	g   *shard.Group
	srv *Server
	h   *testHandler
}

func startServer(t testing.TB, shards int, cfg Config, h *testHandler) *testServer {
	var handler Handler = h
	if h == nil {
		handler = echoHandler{}
	}
	t.Helper()
	g, err := shard.NewGroup(shard.Config{Count: shards})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(g, cfg, handler)
	if err != nil {
		_ = g.Stop()
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		_ = g.Stop()
		t.Fatal(err)
	}
	ts := &testServer{g: g, srv: srv, h: h}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := g.Stop(); err != nil {
			t.Errorf("group stop: %v", err)
		}
	})
	return ts
}

func (ts *testServer) addr() string { return ts.srv.Addr().String() }

// client is a plain Go connection speaking the test protocol.
type client struct {
	t testing.TB
	net.Conn
}

func dialT(t testing.TB, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, Conn: c}
}

func (c *client) send(corr uint64, op byte, payload []byte) {
	c.t.Helper()
	if _, err := c.Write(request(corr, op, payload)); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response: correlation id, serving shard, payload.
func (c *client) recv() (uint64, int, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [respHeaderBytes]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:])) - 9
	if n < 0 {
		return 0, 0, nil, fmt.Errorf("bad response length %d", n+9)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c, payload); err != nil {
		return 0, 0, nil, err
	}
	return binary.BigEndian.Uint64(hdr[4:]), int(hdr[12]), payload, nil
}

func (c *client) mustRecv() (uint64, int, []byte) {
	c.t.Helper()
	corr, sid, p, err := c.recv()
	if err != nil {
		c.t.Fatal(err)
	}
	return corr, sid, p
}

// expectEOF waits for the server to close the connection.
func (c *client) expectEOF() {
	c.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatal("connection still open")
		}
		return
	}
}

// waitFor waits for cond with a deadline instead of sleeping.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(100 * time.Microsecond) // polling interval, not synchronisation
	}
}

// onShard runs fn on shard i and waits for it.
func onShard(t testing.TB, g *shard.Group, i int, fn func()) {
	t.Helper()
	if err := g.Shard(i).Do(func(*shard.Shard) { fn() }); err != nil {
		t.Fatal(err)
	}
}

func recvWithin[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		panic("unreachable")
	}
}

func contextWithTimeout(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	_ = cancel // released by the deadline
	return ctx
}
