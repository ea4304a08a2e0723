package threadbench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/enginetest"
)

// Prototype A: each gnet loop is a shard. Partition work runs on the loop
// thread. Cross-shard messages go through the target's shard.Inbox whose
// wake function schedules a drain with EventLoop.Execute. Engine
// completions are noticed by a side poller goroutine blocked in epoll_wait
// on the engine's eventfd, which schedules a reap with Execute.
type aServer struct {
	gnet.BuiltinEventEngine
	run     gnetRunner
	loops   []*aLoop
	anchors func()
	ready   chan int
}

type aLoop struct {
	idx int
	// el is set on the loop's thread by the anchor connection and read by
	// posters on other threads (through the inbox's wake).
	el      atomic.Pointer[gnet.EventLoop]
	inbox   *shard.Inbox[func()] // created before gnet starts
	log     *logBuf
	eng     *enginetest.Engine
	waiting map[uint64]func() // engine token → completion action; loop thread
	token   uint64
	reaping atomic.Bool // a reap is scheduled on the loop
	sideEp  int
	stopFd  int
	sideEnd chan struct{}
}

// startA starts prototype A. lockOSThread false is a diagnostic only: the
// shard's thread must be locked (io_uring single issuer, pinning).
func startA(lockOSThread bool) (*aServer, error) {
	s := &aServer{ready: make(chan int, shardCount)}
	for i := 0; i < shardCount; i++ {
		l := &aLoop{idx: i, log: newLogBuf(), waiting: map[uint64]func(){}}
		l.inbox = shard.NewInbox[func()](4096, func() {
			_ = (*l.el.Load()).Execute(context.Background(), gnet.RunnableFunc(l.drain))
		})
		l.inbox.Arm()
		s.loops = append(s.loops, l)
	}
	if err := startGnet(s, &s.run, shardCount, lockOSThread); err != nil {
		return nil, err
	}
	closeAnchors, err := anchorLoops(&s.run, shardCount)
	if err != nil {
		s.run.stop()
		return nil, err
	}
	s.anchors = closeAnchors
	for i := 0; i < shardCount; i++ {
		select {
		case <-s.ready:
		case <-time.After(10 * time.Second):
			s.Close()
			return nil, fmt.Errorf("loop set-up timed out")
		}
	}
	return s, nil
}

func (s *aServer) Addr() string { return s.run.addr }

func (s *aServer) Close() {
	s.anchors()
	s.run.stop()
	for _, l := range s.loops {
		if l.sideEnd != nil {
			signal(l.stopFd)
			<-l.sideEnd
			_ = unix.Close(l.sideEp)
			_ = unix.Close(l.stopFd)
			_ = l.eng.Close()
		}
	}
}

func (s *aServer) OnBoot(e gnet.Engine) gnet.Action { s.run.onBoot(e); return gnet.None }

func (s *aServer) OnTick() (time.Duration, gnet.Action) { return s.run.onTick(), gnet.None }

// OnOpen runs on the connection's loop thread. An anchor connection sets
// the loop's shard up on that thread (the engine must be created there).
func (s *aServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if a, ok := c.Context().(anchorCtx); ok {
		l := s.loops[a.idx]
		el := c.EventLoop()
		l.el.Store(&el)
		if err := l.setup(); err != nil {
			panic(err)
		}
		s.ready <- a.idx
		return nil, gnet.None
	}
	for _, l := range s.loops {
		if el := l.el.Load(); el != nil && *el == c.EventLoop() {
			c.SetContext(l)
			return nil, gnet.None
		}
	}
	return nil, gnet.Close
}

func (l *aLoop) setup() error {
	var err error
	if l.eng, err = enginetest.New(); err != nil {
		return err
	}
	if l.sideEp, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return err
	}
	if l.stopFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return err
	}
	for _, fd := range []int{l.eng.WakeFd(), l.stopFd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(fd)}
		if err := unix.EpollCtl(l.sideEp, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return err
		}
	}
	l.sideEnd = make(chan struct{})
	go l.side()
	return nil
}

// side is the side poller: it blocks on the engine's eventfd and schedules
// a reap on the loop.
func (l *aLoop) side() {
	defer close(l.sideEnd)
	evs := make([]unix.EpollEvent, 4)
	for {
		n, err := unix.EpollWait(l.sideEp, evs, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range evs[:n] {
			if int(ev.Fd) == l.stopFd {
				return
			}
		}
		if l.reaping.CompareAndSwap(false, true) {
			_ = (*l.el.Load()).Execute(context.Background(), gnet.RunnableFunc(l.reap))
		}
	}
}

func (l *aLoop) reap(context.Context) error {
	l.reaping.Store(false)
	_, _ = l.eng.Reap(false, l.completed)
	return nil
}

func (l *aLoop) completed(token uint64, _ error) {
	fn := l.waiting[token]
	delete(l.waiting, token)
	fn()
}

// drain runs the inbox on the loop thread.
func (l *aLoop) drain(context.Context) error {
	for {
		for {
			t, ok := l.inbox.Pop()
			if !ok {
				break
			}
			t()
		}
		l.inbox.Arm()
		if l.inbox.Empty() || !l.inbox.Disarm() {
			return nil
		}
	}
}

// submitIO queues an engine write whose completion runs done.
func (l *aLoop) submitIO(done func()) {
	l.token++
	l.waiting[l.token] = done
	l.eng.Add(l.token)
	_ = l.eng.Submit()
	_, _ = l.eng.Reap(false, l.completed) // completions that are already there
}

func (l *aLoop) post(t func()) {
	if err := l.inbox.TryPush(t); err != nil {
		panic(err)
	}
}

func (s *aServer) OnTraffic(c gnet.Conn) gnet.Action {
	l, ok := c.Context().(*aLoop)
	if !ok {
		return gnet.None // anchor
	}
	frames(c, func(body []byte) {
		r, err := parseReq(body)
		if err != nil {
			panic(err)
		}
		t := l
		if r.target == targetOther {
			t = s.loops[(l.idx+1)%len(s.loops)]
		}
		seq := r.seq
		reply := func(from *aLoop) {
			_, _ = c.Write(putResp(nil, byte(from.idx), seq))
		}
		switch {
		case r.op == opHello:
			reply(l)
		case t == l && r.op == opWork:
			reply(l)
		case t == l && r.op == opBulk:
			l.log.append(r.payload)
			reply(l)
		case t == l && r.op == opIO:
			l.submitIO(func() { reply(l) })
		case r.op == opWork:
			t.post(func() { l.post(func() { reply(t) }) })
		case r.op == opBulk:
			p := append([]byte(nil), r.payload...)
			t.post(func() { t.log.append(p); l.post(func() { reply(t) }) })
		case r.op == opIO:
			t.post(func() { t.submitIO(func() { l.post(func() { reply(t) }) }) })
		}
	})
	return gnet.None
}

func signal(fd int) {
	one := [8]byte{1}
	_, _ = unix.Write(fd, one[:])
}
