package netio

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard"
)

// Adopting connections another part accepted or dialled.
//
// The shards' loops read and write plain sockets; they cannot run a TLS
// session (crypto/tls wants a blocking net.Conn and its own goroutine). A
// TLS listener is therefore accepted by Go's crypto/tls outside the loops,
// and each session is bridged to a shard through a unix socketpair: the
// bridge encrypts and decrypts, and the loop serves the pair's other end
// as an ordinary connection, adopted here. Nothing on the plaintext path
// changes; an adopted connection is a Conn like any other (sendfile ranges
// go to the socketpair, and the bridge encrypts them).

// ServeElsewhere takes l for connections that another part accepts and
// hands over with Adopt: it returns l as a net.Listener, records l's
// address (Addr) and closes the net.Listener at Shutdown, which ends the
// other part's accept loop. It may be called once, instead of Serve.
func (s *Server) ServeElsewhere(l *Listener) (net.Listener, error) {
	if !s.state.CompareAndSwap(srvNew, srvListening) {
		return nil, ErrServerClosed
	}
	fd, err := l.take()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "listener "+l.addr.String())
	nl, err := net.FileListener(f) // dups fd
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("netio: serve %v elsewhere: %w", l.addr, err)
	}
	s.addr.Store(l.addr)
	s.elsewhere.Store(&nl)
	return nl, nil
}

// closeElsewhere closes the listener ServeElsewhere handed out, if any.
func (s *Server) closeElsewhere() {
	if p := s.elsewhere.Swap(nil); p != nil {
		_ = (*p).Close()
	}
}

// Adopt serves fd, a connected stream socket (the shard side of a TLS
// bridge's socketpair), as a connection accepted from remote (the peer's
// real address, for logs, limits and metrics). It picks the shards in
// turn and may be called from any goroutine. On success the server owns
// fd; on an error (the server is shutting down, the shard's inbox is
// full) the caller still owns it and closes it. Above MaxConnections the
// connection is closed on the shard and counted in Stats.Refused, as an
// accepted one is.
func (s *Server) Adopt(fd int, remote *net.TCPAddr) error {
	if s.state.Load() != srvListening {
		return ErrServerClosed
	}
	lp := s.loops[int(s.nextAdopt.Add(1)-1)%len(s.loops)]
	return lp.sh.Post(func() {
		if s.clients.Load() >= int64(s.cfg.MaxConnections) || s.state.Load() != srvListening {
			s.stats.Refused.Add(1)
			_ = unix.Close(fd)
			return
		}
		s.stats.Accepted.Add(1)
		s.clients.Add(1)
		lp.start(lp.newConn(fd, remote, s.handler, true))
	})
}

// AdoptDialed serves fd, a connected stream socket (the shard side of a
// TLS bridge whose session this node dialled to remote), on shard sh with
// handler h, as Dial would once its connect succeeded: OnOpen runs, and
// the connection is returned. On an error the server has closed fd (and
// OnClose has run if OnOpen had).
//
// REQUIRES: called on sh's thread.
func (s *Server) AdoptDialed(sh *shard.Shard, fd int, remote *net.TCPAddr, h Handler) (*Conn, error) {
	if s.state.Load() >= srvDraining {
		_ = unix.Close(fd)
		return nil, ErrServerClosed
	}
	lp := s.loops[sh.ID()]
	tuneSocket(fd, &s.cfg)
	c := lp.newConn(fd, remote, h, false)
	c.events = unix.EPOLLIN
	if err := lp.sh.Watch(fd, c.events, c.onEvent); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	c.watched = true
	lp.conns[c] = struct{}{}
	s.open.Add(1)
	s.stats.Dialed.Add(1)
	if err := c.handler.OnOpen(c); err != nil {
		c.closeNow(err)
		return nil, err
	}
	return c, nil
}
