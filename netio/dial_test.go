package netio

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// peerHandler is the dialing side: it hands every response frame to a
// channel.
type peerHandler struct {
	frames chan [2]uint64 // correlation id, serving shard
	closed chan error
}

func (p *peerHandler) OnOpen(*Conn) error { return nil }
func (p *peerHandler) OnFrame(c *Conn, body []byte) {
	p.frames <- [2]uint64{binary.BigEndian.Uint64(body), uint64(body[8])}
	c.Release()
}
func (p *peerHandler) OnFrameTooLarge(*Conn, uint32, []byte) {}
func (p *peerHandler) OnClose(_ *Conn, err error)            { p.closed <- err }

// A shard dials a peer; the accepted side migrates to the shard named in
// the handshake, taking pipelined frames that followed it along.
func TestDialAndMigrate(t *testing.T) {
	ts := startServer(t, 2, Config{}, newTestHandler())
	peer := &peerHandler{frames: make(chan [2]uint64, 64), closed: make(chan error, 1)}
	type dialed struct {
		c   *Conn
		err error
	}
	res := make(chan dialed, 1)
	onShard(t, ts.g, 1, func() {
		if err := ts.srv.Dial(ts.g.Shard(1), ts.addr(), peer, func(c *Conn, err error) { res <- dialed{c, err} }); err != nil {
			res <- dialed{nil, err}
		}
	})
	d := recvWithin(t, res)
	if d.err != nil {
		t.Fatal(d.err)
	}
	pc := d.c
	send := func(frames ...[]byte) {
		onShard(t, ts.g, 1, func() {
			if pc.Shard().ID() != 1 {
				t.Error("dialed connection is not on the dialing shard")
			}
			var b []byte
			for _, f := range frames {
				b = append(b, f...)
			}
			if err := pc.Send(Response{Header: b}); err != nil {
				t.Error(err)
			}
		})
	}
	send(request(1, opEcho, nil))
	first := recvWithin(t, peer.frames)
	target := 1 - int(first[1])
	// The handshake and the frames after it leave in one write, so they
	// are read together on the accepting shard.
	send(request(2, opHandshake, []byte{byte(target)}), request(3, opEcho, nil), request(4, opEcho, nil))
	if hs := recvWithin(t, peer.frames); hs != [2]uint64{2, first[1]} {
		t.Fatalf("handshake answered %v", hs)
	}
	for _, corr := range []uint64{3, 4} {
		if f := recvWithin(t, peer.frames); f != [2]uint64{corr, uint64(target)} {
			t.Fatalf("after migration got %v, want %d served by shard %d", f, corr, target)
		}
	}
	send(request(5, opEcho, nil))
	if f := recvWithin(t, peer.frames); f != [2]uint64{5, uint64(target)} {
		t.Fatalf("got %v", f)
	}
	if ts.srv.Stats().Dialed.Load() != 1 {
		t.Fatal("dial not counted")
	}
}

func TestDialRefused(t *testing.T) {
	ts := startServer(t, 1, Config{}, newTestHandler())
	// A port nobody listens on: bind one, close it.
	sa0, fam := mustSockaddr(t, "127.0.0.1:0")
	fd, err := listenSocket(sa0, fam, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	unix.Close(fd)
	errc := make(chan error, 1)
	onShard(t, ts.g, 0, func() {
		_ = ts.srv.Dial(ts.g.Shard(0), tcpAddr(sa).String(), &peerHandler{}, func(c *Conn, err error) { errc <- err })
	})
	if err := recvWithin(t, errc); !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("dial error %v, want ECONNREFUSED", err)
	}
}

func mustSockaddr(t *testing.T, addr string) (unix.Sockaddr, int) {
	t.Helper()
	ta, _, err := resolveLiteral(addr)
	if err != nil {
		t.Fatal(err)
	}
	sa, fam, err := sockaddr(ta)
	if err != nil {
		t.Fatal(err)
	}
	return sa, fam
}
