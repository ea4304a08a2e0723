package threadbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// quietLogger drops gnet's informational logging.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(f string, a ...any) {
	panic(fmt.Sprintf(f, a...))
}

var _ logging.Logger = quietLogger{}

// gnetRunner starts a gnet engine on a free loopback port with one loop
// per shard and waits until its loops exist.
type gnetRunner struct {
	addr   string
	eng    gnet.Engine
	booted chan struct{}
	ticked chan struct{}
	exited chan error
}

// freePort reserves a port for SO_REUSEPORT listeners: every loop binds the
// same port, which must be known before gnet binds (gnet would give each
// loop its own port for ":0").
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startGnet(h gnet.EventHandler, r *gnetRunner, loops int, lockOSThread bool) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	r.addr = fmt.Sprintf("127.0.0.1:%d", port)
	r.booted = make(chan struct{})
	r.ticked = make(chan struct{})
	r.exited = make(chan error, 1)
	go func() {
		r.exited <- gnet.Run(h, "tcp://"+r.addr,
			gnet.WithNumEventLoop(loops),
			gnet.WithLockOSThread(lockOSThread),
			gnet.WithReusePort(true),
			gnet.WithTicker(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLogger(quietLogger{}))
	}()
	select {
	case <-r.ticked:
		return nil
	case err := <-r.exited:
		return fmt.Errorf("gnet exited at start: %v", err)
	case <-time.After(10 * time.Second):
		return errors.New("gnet did not start")
	}
}

// onBoot and onTick are called by the prototypes' handlers.
func (r *gnetRunner) onBoot(e gnet.Engine) { r.eng = e; close(r.booted) }

func (r *gnetRunner) onTick() time.Duration {
	select {
	case <-r.ticked:
	default:
		close(r.ticked)
	}
	return time.Hour
}

func (r *gnetRunner) stop() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = r.eng.Stop(ctx) }()
	<-r.exited
	cancel()
}

// anchor gives a prototype one connection per gnet loop, registered in loop
// order (round-robin), so it holds every loop's EventLoop handle and runs
// set-up code on every loop thread. gnet offers no other way to reach a
// loop that has no client connection yet.
type anchorCtx struct{ idx int }

func anchorLoops(r *gnetRunner, n int) (closeAll func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	var peers []net.Conn
	closeAll = func() {
		for _, p := range peers {
			p.Close()
		}
	}
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			closeAll()
			return nil, err
		}
		p, err := ln.Accept()
		if err != nil {
			c.Close()
			closeAll()
			return nil, err
		}
		peers = append(peers, p)
		ctx := gnet.NewNetConnContext(gnet.NewContext(context.Background(), anchorCtx{i}), c)
		ch, err := r.eng.Register(ctx)
		if err != nil {
			closeAll()
			return nil, err
		}
		res := <-ch
		c.Close() // gnet holds a dup of the descriptor
		if res.Err != nil {
			closeAll()
			return nil, res.Err
		}
	}
	return closeAll, nil
}

// frames calls fn for every complete frame buffered on c (body without the
// length prefix; valid until fn returns) and consumes it.
func frames(c gnet.Conn, fn func(body []byte)) {
	for {
		hdr, err := c.Peek(4)
		if err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr))
		if c.InboundBuffered() < 4+n {
			return
		}
		f, err := c.Peek(4 + n)
		if err != nil {
			return
		}
		fn(f[4:])
		_, _ = c.Discard(4 + n)
	}
}
