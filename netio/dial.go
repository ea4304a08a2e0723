package netio

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard"
)

// ErrDialTimeout is passed to Dial's done when the connect did not finish
// within Config.DialTimeout.
var ErrDialTimeout = errors.New("netio: dial timed out")

// Dial opens an outbound connection from shard sh to addr ("host:port"),
// served by h on sh's epoll set, like an accepted connection: the way a
// shard owns its replication stream to a peer (connection hash(partition)
// mod K lives on the shard that owns the partition). done runs on sh's
// thread with the open connection (after h.OnOpen) or the error; it always
// runs exactly once unless Dial itself returns an error.
//
// A host name is resolved on another goroutine, so the shard never blocks
// on DNS. REQUIRES: called on sh's thread.
func (s *Server) Dial(sh *shard.Shard, addr string, h Handler, done func(*Conn, error)) error {
	if s.state.Load() >= srvDraining {
		return ErrServerClosed
	}
	ta, literal, err := resolveLiteral(addr)
	if err != nil {
		return err
	}
	lp := s.loops[sh.ID()]
	if literal {
		lp.connect(ta, h, done)
		return nil
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DialTimeout)
		defer cancel()
		host, _, _ := net.SplitHostPort(addr)
		var r net.Resolver
		ips, err := r.LookupIPAddr(ctx, host)
		if err == nil && len(ips) == 0 {
			err = fmt.Errorf("netio: %q resolves to no address", addr)
		}
		var resolved *net.TCPAddr
		if err == nil {
			resolved = &net.TCPAddr{IP: ips[0].IP, Port: ta.Port, Zone: ips[0].Zone}
		}
		if perr := sh.Post(func() {
			if err != nil {
				done(nil, err)
				return
			}
			lp.connect(resolved, h, done)
		}); perr != nil {
			s.logf("netio: dial %s: cannot return to shard %d: %v", addr, sh.ID(), perr)
		}
	}()
	return nil
}

// connect starts a non-blocking connect; connected finishes it when the
// socket becomes writable.
func (lp *loop) connect(ta *net.TCPAddr, h Handler, done func(*Conn, error)) {
	s := lp.srv
	sa, family, err := sockaddr(ta)
	if err != nil {
		done(nil, err)
		return
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		done(nil, fmt.Errorf("netio: socket: %w", err))
		return
	}
	tuneSocket(fd, &s.cfg)
	c := lp.newConn(fd, ta, h, false)
	c.state = connDialing
	c.dialDone = done
	err = unix.Connect(fd, sa)
	if err != nil && err != unix.EINPROGRESS && err != unix.EINTR {
		_ = unix.Close(fd)
		done(nil, fmt.Errorf("netio: connect %v: %w", ta, err))
		return
	}
	c.events = unix.EPOLLOUT
	if err := lp.sh.Watch(fd, c.events, c.onEvent); err != nil {
		_ = unix.Close(fd)
		done(nil, err)
		return
	}
	c.watched = true
	c.armTimer(s.cfg.DialTimeout, func() { c.closeNow(ErrDialTimeout) })
}

// connected completes a connect once the socket is writable (or failed).
func (c *Conn) connected() {
	lp, s := c.lp, c.srv
	if e, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || e != 0 {
		if err == nil {
			err = unix.Errno(e)
		}
		c.closeNow(fmt.Errorf("netio: connect %v: %w", c.remote, err))
		return
	}
	if sa, err := unix.Getpeername(c.fd); err == nil {
		c.remote = tcpAddr(sa)
	}
	lp.sh.Stop(c.timer)
	if s.state.Load() >= srvDraining {
		c.closeNow(ErrServerClosed) // runs done with the error
		return
	}
	c.state = connOpen
	done := c.dialDone
	c.dialDone = nil
	lp.conns[c] = struct{}{}
	s.open.Add(1)
	s.stats.Dialed.Add(1)
	c.updateEvents()
	if err := c.handler.OnOpen(c); err != nil {
		c.closeNow(err)
		done(nil, err)
		return
	}
	done(c, nil)
}

// Migrate moves the connection to shard to, with its unread input and its
// queued output: for a replication stream accepted on whichever shard the
// kernel picked, once its handshake names the shard that owns its
// partitions. The move happens at the end of the current round; nothing
// more is delivered here. done runs exactly once: on to's thread with the
// connection, which reads again there, or on this shard with the error
// (shard.ErrInboxFull, shard.ErrStopped), the connection staying here.
//
// REQUIRES: called on the connection's shard, with no request in flight
// (answer the handshake with Reply first); nothing on this shard may touch
// the connection after the move (a Call reply would race).
func (c *Conn) Migrate(to *shard.Shard, done func(*Conn, error)) error {
	switch {
	case c.state != connOpen || c.moving:
		return ErrClosed
	case c.inflight != 0:
		return ErrInFlight
	}
	c.moving = true
	c.migrateTo, c.migrateDone = to, done
	c.lp.markDirty(c, dirtyMigrate)
	return nil
}

// handOver runs at the end of the round on the old shard: it takes the
// connection out of this shard's epoll set and posts it to the new one.
func (c *Conn) handOver() {
	from, to, done := c.lp, c.migrateTo, c.migrateDone
	c.migrateTo, c.migrateDone = nil, nil
	dst := c.srv.loops[to.ID()]
	if dst == from {
		c.moving = false
		done(c, nil)
		c.lp.markDirty(c, dirtyResume|dirtyFlush)
		return
	}
	from.forget(c)
	if c.timer != nil {
		from.sh.Stop(c.timer)
	}
	if c.frameTimer != nil {
		from.sh.Stop(c.frameTimer) // armed again on to's wheel (settle)
	}
	_ = from.sh.Unwatch(c.fd)
	c.watched = false
	delete(from.conns, c)
	err := to.Post(func() {
		// From here on c belongs to to's thread.
		c.lp, c.moving = dst, false
		dst.conns[c] = struct{}{}
		if err := dst.sh.Watch(c.fd, c.events, c.onEvent); err != nil {
			c.closeNow(err)
			done(nil, err)
			return
		}
		c.watched = true
		done(c, nil)
		dst.markDirty(c, dirtyResume|dirtyFlush)
	})
	if err != nil { // stay here
		c.moving = false
		from.conns[c] = struct{}{}
		if werr := from.sh.Watch(c.fd, c.events, c.onEvent); werr != nil {
			c.closeNow(werr)
		} else {
			c.watched = true
			from.markDirty(c, dirtyResume|dirtyFlush)
		}
		done(c, err)
	}
}
