package netio

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// echoHandler answers every frame at once with the frame's first bytes.
type echoHandler struct{}

func (echoHandler) OnOpen(*Conn) error { return nil }
func (echoHandler) OnFrame(c *Conn, body []byte) {
	n := min(len(body), 8)
	_ = c.Reply(Response{Header: append(binary.BigEndian.AppendUint32(nil, uint32(n)), body[:n]...)})
}
func (echoHandler) OnFrameTooLarge(*Conn, uint32, []byte) {}
func (echoHandler) OnClose(*Conn, error)                  {}

// FuzzFraming writes arbitrary bytes on a connection and half-closes it:
// the server must answer with well-formed frames and close the connection
// (never hang it), and keep serving another connection.
func FuzzFraming(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})                                   // the largest length
	f.Add(append(request(1, opEcho, []byte("ok")), 0xde, 0xad, 0xbe, 0xef)) // valid, then garbage
	f.Add(append(request(1, opEcho, nil), request(2, opEcho, make([]byte, 70000))...))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 5, 1})
	ts := startServer(f, 2, Config{MaxFrameBytes: MaxFrameBytesMin, CloseTimeout: 5 * time.Second}, nil)
	f.Fuzz(func(t *testing.T, input []byte) {
		c, err := net.DialTimeout("tcp", ts.addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			_, _ = c.Write(input)
			_ = c.(*net.TCPConn).CloseWrite()
		}()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			var hdr [4]byte
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("server neither answered nor closed")
				}
				break
			}
			n := binary.BigEndian.Uint32(hdr[:])
			if n > 8 {
				t.Fatalf("malformed answer length %d", n)
			}
			if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
				t.Fatalf("truncated answer: %v", err)
			}
		}
		probe := dialT(t, ts.addr())
		if _, err := probe.Write(request(9, opEcho, nil)); err != nil {
			t.Fatal(err)
		}
		var hdr [12]byte
		_ = probe.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(probe, hdr[:]); err != nil || binary.BigEndian.Uint64(hdr[4:]) != 9 {
			t.Fatalf("server stopped serving: %v", err)
		}
	})
}
