package bench

import (
	"context"
	"errors"
	"sync"
)

// fakeSystem is an in-memory System: a produced message is acknowledged
// at once (on the sending goroutine) and appended to its partition's log,
// which consumers read. failEvery > 0 fails every failEvery-th send.
type fakeSystem struct {
	mu        sync.Mutex
	cond      *sync.Cond
	logs      [][][]byte
	sends     int
	failEvery int
	prepared  bool
	closed    bool
}

var errFake = errors.New("fake: injected failure")

func newFakeSystem() *fakeSystem {
	f := &fakeSystem{}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *fakeSystem) Name() string                     { return "fake" }
func (f *fakeSystem) Settings(*Spec) map[string]string { return map[string]string{"kind": "fake"} }

func (f *fakeSystem) Prepare(_ context.Context, s *Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logs == nil {
		f.logs = make([][][]byte, s.Partitions)
	}
	f.prepared = true
	return nil
}

func (f *fakeSystem) Close() error {
	f.mu.Lock()
	f.closed = true
	f.cond.Broadcast()
	f.mu.Unlock()
	return nil
}

func (f *fakeSystem) NewProducer(context.Context, *Spec, int) (Producer, error) {
	return &fakeProducer{f: f}, nil
}

type fakeProducer struct {
	f    *fakeSystem
	next int
}

func (p *fakeProducer) Send(_ context.Context, partition int, value []byte, done func(error)) error {
	f := p.f
	f.mu.Lock()
	f.sends++
	if f.failEvery > 0 && f.sends%f.failEvery == 0 {
		f.mu.Unlock()
		done(errFake)
		return nil
	}
	if partition == AnyPartition {
		partition = p.next % len(f.logs)
		p.next++
	}
	f.logs[partition] = append(f.logs[partition], append([]byte(nil), value...))
	f.cond.Broadcast()
	f.mu.Unlock()
	done(nil)
	return nil
}

func (p *fakeProducer) Flush(context.Context) error { return nil }
func (p *fakeProducer) Close(context.Context) error { return nil }

func (f *fakeSystem) NewConsumer(_ context.Context, _ *Spec, _ int, partitions []int, start Start) (Consumer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &fakeConsumer{f: f, parts: partitions, pos: make([]int, len(partitions))}
	if start == StartLatest {
		for i, p := range partitions {
			c.pos[i] = len(f.logs[p])
		}
	}
	return c, nil
}

type fakeConsumer struct {
	f     *fakeSystem
	parts []int
	pos   []int
}

// Run delivers what is in the logs; it wakes on every append and when
// ctx ends (through a goroutine that broadcasts).
func (c *fakeConsumer) Run(ctx context.Context, fn func([]byte), _ func(error)) error {
	f := c.f
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for ctx.Err() == nil {
		var batch [][]byte
		for i, p := range c.parts {
			batch = append(batch, f.logs[p][c.pos[i]:]...)
			c.pos[i] = len(f.logs[p])
		}
		if len(batch) == 0 {
			f.cond.Wait()
			continue
		}
		f.mu.Unlock()
		for _, v := range batch {
			fn(v)
		}
		f.mu.Lock()
	}
	return nil
}

func (c *fakeConsumer) Close() error { return nil }
