package netio

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testFile writes n random bytes to a temporary file and returns them and
// its descriptor (closed with the test).
func testFile(t *testing.T, n int) ([]byte, int) {
	t.Helper()
	data := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(data)
	path := filepath.Join(t.TempDir(), "segment.log")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return data, fd
}

func ranges(rs ...[2]int64) []byte {
	var b []byte
	for _, r := range rs {
		b = binary.BigEndian.AppendUint64(b, uint64(r[0]))
		b = binary.BigEndian.AppendUint64(b, uint64(r[1]))
	}
	return b
}

// A response made of a header and file ranges arrives byte-exact, and
// pipelined plain responses stay in order around it.
func TestSendfileResponse(t *testing.T) {
	data, fd := testFile(t, 3<<20)
	h := newTestHandler()
	h.fileFd = fd
	ts := startServer(t, 1, Config{}, h)
	c := dialT(t, ts.addr())
	c.send(1, opEcho, []byte("a"))
	c.send(2, opFile, ranges([2]int64{100, 1 << 20}, [2]int64{0, 10}, [2]int64{2 << 20, 1<<20 - 1}))
	c.send(3, opEcho, []byte("b"))
	c.send(4, opFile, ranges([2]int64{5, 0}))
	want := append(append(append([]byte(nil), data[100:100+1<<20]...), data[:10]...), data[2<<20:3<<20-1]...)
	for _, exp := range []struct {
		corr uint64
		body []byte
	}{{1, []byte("a")}, {2, want}, {3, []byte("b")}, {4, nil}} {
		corr, _, p := c.mustRecv()
		if corr != exp.corr || !bytes.Equal(p, exp.body) {
			t.Fatalf("response %d: got %d with %d bytes (want %d bytes), equal=%v", exp.corr, corr, len(p), len(exp.body), bytes.Equal(p, exp.body))
		}
	}
	if got := ts.srv.Stats().SendfileBytes.Load(); got != uint64(len(want)) {
		t.Fatalf("sendfile sent %d bytes, want %d", got, len(want))
	}
}

// dialSlow connects with a tiny receive buffer, so the server's sends meet
// a full socket (EAGAIN) long before a large response is through.
func dialSlow(t *testing.T, addr string) *client {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)
		})
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, Conn: nc}
}

// A slow reader: sendfile and writev meet EAGAIN, resume on EPOLLOUT, and
// every byte still arrives in order.
func TestSendfileResumesAfterEAGAIN(t *testing.T) {
	data, fd := testFile(t, 4<<20)
	h := newTestHandler()
	h.fileFd = fd
	ts := startServer(t, 1, Config{SocketSendBufferBytes: 8192}, h)
	c := dialSlow(t, ts.addr())
	c.send(1, opFile, ranges([2]int64{0, 4 << 20}))
	for i := uint64(2); i < 20; i++ {
		c.send(i, opEcho, []byte{byte(i)})
	}
	c.send(20, opFile, ranges([2]int64{7, 1000}))
	waitFor(t, "a send to block", func() bool { return ts.srv.Stats().SendBlocked.Load() > 0 })
	corr, _, p := c.mustRecv()
	if corr != 1 || !bytes.Equal(p, data) {
		t.Fatalf("large response: corr %d, %d bytes, equal %v", corr, len(p), bytes.Equal(p, data))
	}
	for i := uint64(2); i < 20; i++ {
		if corr, _, p := c.mustRecv(); corr != i || len(p) != 1 || p[0] != byte(i) {
			t.Fatalf("response %d: got %d %v", i, corr, p)
		}
	}
	if corr, _, p := c.mustRecv(); corr != 20 || !bytes.Equal(p, data[7:1007]) {
		t.Fatalf("last response %d", corr)
	}
}

// A client that sends requests and never reads: the server stops reading
// it once OutboundBytesMax is queued, so its memory stays bounded, and
// everything is delivered once the client reads.
func TestSlowReaderBoundsServerMemory(t *testing.T) {
	const respBytes = 32 << 10
	cfg := Config{OutboundBytesMax: 256 << 10, SocketSendBufferBytes: 8192, SocketRecvBufferBytes: 16 << 10}
	ts := startServer(t, 1, cfg, newTestHandler())
	c := dialSlow(t, ts.addr())
	const n = 2000 // 2000 × 32 KiB = 62.5 MiB of answers if nothing pushed back
	// 8 KiB requests: 16 MiB in all, more than the socket buffers hold.
	sizeArg := append(binary.BigEndian.AppendUint32(nil, respBytes), make([]byte, 8<<10)...)
	writerDone := make(chan error, 1)
	go func() {
		var stream []byte
		for i := 0; i < n; i++ {
			stream = append(stream, request(uint64(i), opBig, sizeArg)...)
		}
		_, err := c.Write(stream)
		writerDone <- err
	}()
	waitFor(t, "the server to stop reading", func() bool { return ts.srv.Stats().ReadPauses.Load() > 0 })
	var out int64
	var pend int
	onShard(t, ts.g, 0, func() {
		for cc := range ts.srv.loops[0].conns {
			out, pend = cc.OutboundBytes(), cap(cc.pend)
		}
	})
	if limit := cfg.OutboundBytesMax + respBytes + respHeaderBytes; out > limit {
		t.Fatalf("%d bytes queued for a slow reader, bound %d", out, limit)
	}
	if pend > ReadBufferBytesDefault/2 {
		t.Fatalf("input buffer grew to %d bytes", pend)
	}
	if f := ts.srv.Stats().Frames.Load(); f >= n {
		t.Fatalf("all %d requests were read despite the slow reader", f)
	}
	select {
	case err := <-writerDone:
		t.Fatalf("client wrote everything (%v): no TCP backpressure", err)
	default:
	}
	for i := 0; i < n; i++ {
		corr, _, p, err := c.recv()
		if err != nil || corr != uint64(i) || len(p) != respBytes {
			t.Fatalf("response %d: corr %d, %d bytes, %v", i, corr, len(p), err)
		}
	}
	if err := recvWithin(t, writerDone); err != nil {
		t.Fatal(err)
	}
}
