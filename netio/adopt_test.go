package netio

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard"
)

// pair returns a socketpair: the netio end (non-blocking) and the other
// end as a net.Conn speaking the test protocol.
func pair(t *testing.T) (int, *client) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "pair")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return fds[0], &client{t: t, Conn: c}
}

// A listener served elsewhere: Addr names it, its connections come back
// through Adopt with the address given (not the socketpair's), frames are
// served on the shards in turn, MaxConnections holds for adopted
// connections too, and Shutdown closes the listener handed out and
// refuses later adoptions.
func TestServeElsewhereAndAdopt(t *testing.T) {
	g, err := shard.NewGroup(shard.Config{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	h := newTestHandler()
	srv, err := NewServer(g, Config{MaxConnections: 2}, h)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nl, err := srv.ServeElsewhere(l)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr().String() != nl.Addr().String() {
		t.Fatalf("Addr %v, listener %v", srv.Addr(), nl.Addr())
	}
	remote := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 4242}
	shards := map[int]bool{}
	for i := 0; i < 2; i++ {
		fd, c := pair(t)
		if err := srv.Adopt(fd, remote); err != nil {
			t.Fatal(err)
		}
		c.send(uint64(i), opEcho, []byte("hi"))
		_, sid, p := c.mustRecv()
		if string(p) != "hi" {
			t.Fatalf("echo %q", p)
		}
		shards[sid] = true
	}
	if len(shards) != 2 {
		t.Errorf("adopted connections served on shards %v, want both in turn", shards)
	}
	fd, over := pair(t)
	if err := srv.Adopt(fd, remote); err != nil {
		t.Fatal(err)
	}
	over.expectEOF()
	waitFor(t, "the third adoption refused", func() bool { return srv.Stats().Refused.Load() == 1 })
	var seen net.Addr
	onShard(t, g, 0, func() {
		for c := range srv.loops[0].conns {
			seen = c.RemoteAddr()
		}
	})
	if seen == nil || seen.String() != remote.String() {
		t.Errorf("RemoteAddr %v, want %v", seen, remote)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := nl.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Shutdown: %v", err)
	}
	fd, _ = pair(t)
	if err := srv.Adopt(fd, remote); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Adopt after Shutdown: %v", err)
	}
	unix.Close(fd)
}

// AdoptDialed serves a dialled connection on the shard asked for, with
// OnOpen run and the connection counted as dialled.
func TestAdoptDialed(t *testing.T) {
	ts := startServer(t, 2, Config{}, newTestHandler())
	fd, c := pair(t)
	remote := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 8), Port: 7071}
	var conn *Conn
	var err error
	onShard(t, ts.g, 1, func() { conn, err = ts.srv.AdoptDialed(ts.g.Shard(1), fd, remote, ts.h) })
	if err != nil {
		t.Fatal(err)
	}
	if conn.Shard() != ts.g.Shard(1) || conn.RemoteAddr().String() != remote.String() || ts.srv.Stats().Dialed.Load() != 1 {
		t.Fatalf("shard %d, remote %v, dialed %d", conn.Shard().ID(), conn.RemoteAddr(), ts.srv.Stats().Dialed.Load())
	}
	c.send(1, opEcho, []byte("x"))
	if _, sid, p := c.mustRecv(); sid != 1 || string(p) != "x" {
		t.Fatalf("served on shard %d: %q", sid, p)
	}
}
