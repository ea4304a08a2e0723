package threadbench

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/enginetest"
)

// Prototype C: no gnet. Each shard's own epoll loop owns a SO_REUSEPORT
// listener and its connections (shard.Shard.Watch), next to its inbox
// eventfd, timerfd and engine eventfd. Cross-shard work uses shard.Call.
type cServer struct {
	addr  string
	group *shard.Group
	state []*cShard
	kind  engineKind
}

// The io_uring engine is driven by the shard as a shard.Engine.
var _ shard.Engine = (*uring.Engine)(nil)

// engineKind chooses what an opIO request waits for.
type engineKind int

const (
	engineFake        engineKind = iota // enginetest: completion from another thread
	engineUringNever                    // io_uring: a 1 KiB write to a file
	engineUringAlways                   // io_uring: a 1 KiB write linked to fdatasync
)

// uringFileBytes is the preallocated size of each shard's log file; writes
// wrap around inside it.
const uringFileBytes = 64 << 20

type cShard struct {
	lfd     int
	log     *logBuf
	waiting map[uint64]func()
	token   uint64
	conns   map[int]*cConn
	// io_uring variants: the engine, its file and the next write offset.
	ring *uring.Engine
	file vfs.File
	off  int64
	buf  []byte
}

type cConn struct {
	fd  int
	sh  *shard.Shard
	st  *cShard
	in  []byte
	out []byte
	rd  []byte
	// outWatched: EPOLLOUT is armed because out could not be fully written.
	outWatched bool
}

func startC(spin time.Duration) (*cServer, error) { return startCWith(spin, engineFake, "") }

// startCWith starts prototype C whose opIO requests wait for the given
// engine; the io_uring engines write into files under dir.
func startCWith(spin time.Duration, kind engineKind, dir string) (*cServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &cServer{addr: fmt.Sprintf("127.0.0.1:%d", port), kind: kind}
	for i := 0; i < shardCount; i++ {
		s.state = append(s.state, &cShard{lfd: -1, log: newLogBuf(), waiting: map[uint64]func(){}, conns: map[int]*cConn{}})
	}
	startErr := make(chan error, shardCount)
	g, err := shard.NewGroup(shard.Config{
		Count:    shardCount,
		SpinIdle: spin,
		EngineFactory: func(id int) (shard.Engine, error) {
			if kind == engineFake {
				return enginetest.New()
			}
			// On the shard's locked thread: the ring may use
			// IORING_SETUP_SINGLE_ISSUER.
			e, err := uring.NewEngine(uring.Options{SingleIssuer: true})
			if err != nil {
				return nil, err
			}
			st := s.state[id]
			st.ring = e
			if st.file, err = vfs.OS().Create(filepath.Join(dir, fmt.Sprintf("shard-%d.log", id))); err != nil {
				e.Close()
				return nil, err
			}
			if err := st.file.Preallocate(0, uringFileBytes, false); err != nil {
				e.Close()
				return nil, err
			}
			st.buf = make([]byte, 1024)
			return e, nil
		},
		OnStart: func(sh *shard.Shard) { startErr <- s.boot(sh, port) },
		OnStop: func(sh *shard.Shard) {
			st := s.state[sh.ID()]
			for _, c := range st.conns {
				c.close()
			}
			if st.lfd >= 0 {
				_ = sh.Unwatch(st.lfd)
				_ = unix.Close(st.lfd)
			}
			if st.ring != nil {
				for st.ring.InFlight() > 0 {
					_, _ = st.ring.Reap(true, func(uint64, error) {})
				}
				_ = st.file.Close()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	s.group = g // before Start: the shards read it
	if err := g.Start(); err != nil {
		return nil, err
	}
	for i := 0; i < shardCount; i++ {
		if err := <-startErr; err != nil {
			_ = g.Stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *cServer) Addr() string { return s.addr }

func (s *cServer) Close() { _ = s.group.Stop() }

func (s *cServer) boot(sh *shard.Shard, port int) error {
	st := s.state[sh.ID()]
	sh.SetCompletionHandler(func(token uint64, _ error) {
		fn := st.waiting[token]
		delete(st.waiting, token)
		fn()
	})
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	sa := &unix.SockaddrInet4{Port: port}
	copy(sa.Addr[:], net.IPv4(127, 0, 0, 1).To4())
	if err := unix.Bind(fd, sa); err != nil {
		_ = unix.Close(fd)
		return err
	}
	if err := unix.Listen(fd, 1024); err != nil {
		_ = unix.Close(fd)
		return err
	}
	st.lfd = fd
	return sh.Watch(fd, unix.EPOLLIN, func(uint32) { s.accept(sh, st) })
}

func (s *cServer) accept(sh *shard.Shard, st *cShard) {
	for {
		nfd, _, err := unix.Accept4(st.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		_ = unix.SetsockoptInt(nfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		c := &cConn{fd: nfd, sh: sh, st: st, rd: make([]byte, 64<<10)}
		st.conns[nfd] = c
		if err := sh.Watch(nfd, unix.EPOLLIN, func(ev uint32) { s.ready(c, ev) }); err != nil {
			c.close()
		}
	}
}

func (c *cConn) close() {
	if c.fd < 0 {
		return
	}
	_ = c.sh.Unwatch(c.fd)
	_ = unix.Close(c.fd)
	delete(c.st.conns, c.fd)
	c.fd = -1
}

func (s *cServer) ready(c *cConn, ev uint32) {
	if ev&unix.EPOLLOUT != 0 {
		c.flush()
	}
	if ev&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
		return
	}
	for c.fd >= 0 {
		n, err := unix.Read(c.fd, c.rd)
		if err == unix.EAGAIN {
			break
		}
		if err != nil || n == 0 {
			c.close()
			return
		}
		c.in = append(c.in, c.rd[:n]...)
		c.in = s.parse(c, c.in)
		if n < len(c.rd) {
			break
		}
	}
	c.flush()
}

// parse handles every complete frame in b and returns the rest.
func (s *cServer) parse(c *cConn, b []byte) []byte {
	for len(b) >= 4 {
		n := int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		if len(b) < 4+n {
			break
		}
		r, err := parseReq(b[4 : 4+n])
		if err != nil {
			panic(err)
		}
		s.handle(c, r)
		b = b[4+n:]
	}
	return append(c.in[:0], b...)
}

func (s *cServer) handle(c *cConn, r req) {
	from := c.sh
	to := from
	if r.target == targetOther && r.op != opHello {
		to = s.group.Shard((from.ID() + 1) % shardCount)
	}
	seq := r.seq
	if to == from {
		switch r.op {
		case opHello, opWork:
			c.out = putResp(c.out, byte(from.ID()), seq)
		case opBulk:
			c.st.log.append(r.payload)
			c.out = putResp(c.out, byte(from.ID()), seq)
		case opIO:
			c.st.token++
			c.st.waiting[c.st.token] = func() {
				c.out = putResp(c.out, byte(from.ID()), seq)
				c.flush()
			}
			s.submitIO(from, c.st)
		}
		return
	}
	op := r.op
	var p []byte
	if op == opBulk {
		p = append([]byte(nil), r.payload...)
	}
	respond := func(id int) {
		c.out = putResp(c.out, byte(id), seq)
		c.flush()
	}
	tst := s.state[to.ID()]
	var err error
	if op == opIO {
		err = to.Post(func() {
			tst.token++
			tst.waiting[tst.token] = func() {
				if err := from.Post(func() { respond(to.ID()) }); err != nil {
					panic(err)
				}
			}
			s.submitIO(to, tst)
		})
	} else {
		err = shard.Call(from, to, func(t *shard.Shard) int {
			if op == opBulk {
				tst.log.append(p)
			}
			return t.ID()
		}, respond)
	}
	if err != nil {
		panic(err)
	}
}

// submitIO queues the engine operation for st.token; the shard submits it
// at the end of its round and dispatches the completion to st.waiting.
func (s *cServer) submitIO(sh *shard.Shard, st *cShard) {
	if s.kind == engineFake {
		sh.Engine().(*enginetest.Engine).Add(st.token)
		return
	}
	if err := st.ring.Write(st.file, st.buf, st.off, s.kind == engineUringAlways, st.token); err != nil {
		panic(err)
	}
	st.off = (st.off + int64(len(st.buf))) % uringFileBytes
}

func (c *cConn) flush() {
	for c.fd >= 0 && len(c.out) > 0 {
		n, err := unix.Write(c.fd, c.out)
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			c.close()
			return
		}
		c.out = c.out[n:]
	}
	if c.fd < 0 {
		return
	}
	if len(c.out) == 0 {
		c.out = c.out[:0:cap(c.out)]
		if c.outWatched {
			c.outWatched = false
			_ = c.sh.Rewatch(c.fd, unix.EPOLLIN)
		}
		return
	}
	if !c.outWatched {
		c.outWatched = true
		_ = c.sh.Rewatch(c.fd, unix.EPOLLIN|unix.EPOLLOUT)
	}
}
