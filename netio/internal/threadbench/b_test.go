package threadbench

import (
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/enginetest"
)

// Prototype B: a shard goroutine beside each gnet loop. The loops only
// frame bytes and hand every request to a shard (shard.Shard.Post, which
// parks on an eventfd in the shard's own epoll set together with the
// engine's completion eventfd). Responses go back with Conn.AsyncWrite,
// which schedules the write on the connection's loop.
type bServer struct {
	gnet.BuiltinEventEngine
	run   gnetRunner
	group *shard.Group
	state []*bShard

	mu    sync.Mutex
	loops map[gnet.EventLoop]int // loop → index, in order of first connection
}

// bShard is the state of one shard; touched on its thread only.
type bShard struct {
	log     *logBuf
	waiting map[uint64]func()
	token   uint64
}

func startB(spin time.Duration) (*bServer, error) {
	s := &bServer{loops: map[gnet.EventLoop]int{}}
	for i := 0; i < shardCount; i++ {
		s.state = append(s.state, &bShard{log: newLogBuf(), waiting: map[uint64]func(){}})
	}
	g, err := shard.NewGroup(shard.Config{
		Count:    shardCount,
		SpinIdle: spin,
		EngineFactory: func(int) (shard.Engine, error) {
			return enginetest.New()
		},
		OnStart: func(sh *shard.Shard) {
			st := s.state[sh.ID()]
			sh.SetCompletionHandler(func(token uint64, _ error) {
				fn := st.waiting[token]
				delete(st.waiting, token)
				fn()
			})
		},
	})
	if err != nil {
		return nil, err
	}
	if err := g.Start(); err != nil {
		return nil, err
	}
	s.group = g
	if err := startGnet(s, &s.run, shardCount, true); err != nil {
		_ = g.Stop()
		return nil, err
	}
	return s, nil
}

func (s *bServer) Addr() string { return s.run.addr }

func (s *bServer) Close() {
	s.run.stop()
	_ = s.group.Stop()
}

func (s *bServer) OnBoot(e gnet.Engine) gnet.Action { s.run.onBoot(e); return gnet.None }

func (s *bServer) OnTick() (time.Duration, gnet.Action) { return s.run.onTick(), gnet.None }

func (s *bServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	s.mu.Lock()
	idx, ok := s.loops[c.EventLoop()]
	if !ok {
		idx = len(s.loops) % shardCount
		s.loops[c.EventLoop()] = idx
	}
	s.mu.Unlock()
	c.SetContext(idx)
	return nil, gnet.None
}

func (s *bServer) OnTraffic(c gnet.Conn) gnet.Action {
	idx := c.Context().(int)
	frames(c, func(body []byte) {
		r, err := parseReq(body)
		if err != nil {
			panic(err)
		}
		if r.op == opHello {
			_, _ = c.Write(putResp(nil, byte(idx), r.seq))
			return
		}
		ti := idx
		if r.target == targetOther {
			ti = (idx + 1) % shardCount
		}
		sh, st := s.group.Shard(ti), s.state[ti]
		seq, op := r.seq, r.op
		var p []byte
		if op == opBulk {
			p = append([]byte(nil), r.payload...) // the loop's buffer is reused
		}
		reply := func() { _ = c.AsyncWrite(putResp(nil, byte(ti), seq), nil) }
		err = sh.Post(func() {
			switch op {
			case opWork:
				reply()
			case opBulk:
				st.log.append(p)
				reply()
			case opIO:
				st.token++
				st.waiting[st.token] = reply
				sh.Engine().(*enginetest.Engine).Add(st.token)
			}
		})
		if err != nil {
			panic(err)
		}
	})
	return gnet.None
}
