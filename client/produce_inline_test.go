package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// These tests pin the synchronous produce path's shortcuts: a Produce
// that runs its partition's sender itself, and a send that writes its
// frame itself on an idle connection. Run them under -race too.

// One goroutine alternating Produce and ProduceAsync on one partition sees
// every outcome in offset order: a Produce returns only after the
// callbacks of the records produced before it, though it completes its own
// record without the delivery goroutine.
func TestSyncAndAsyncProduceKeepOffsetOrder(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(client.ProducerConfig{Linger: -1})
	const n = 300
	var mu sync.Mutex
	var seen []int64 // offsets in the order their outcomes were seen
	note := func(off int64) {
		mu.Lock()
		seen = append(seen, off)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		rec := client.Record{Topic: "t", Value: []byte(fmt.Sprint(i))}
		if i%3 == 2 {
			pr, err := p.Produce(e.ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			note(pr.Offset)
			continue
		}
		wg.Add(1)
		if err := p.ProduceAsync(e.ctx, rec, func(pr client.Produced, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
			note(pr.Offset)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = int64(i)
	}
	e.wantExactlyOnce("t", 0, n, offsets)
	for i, off := range seen {
		if off != int64(i) {
			t.Fatalf("outcome %d was for offset %d: out of order (%v)", i, off, seen[:i+1])
		}
	}
}

// A Produce whose record is acknowledged while the callback of an earlier
// record of its partition still runs waits for that callback to return.
func TestProduceWaitsForEarlierCallback(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(client.ProducerConfig{Linger: -1})
	gate, started := make(chan struct{}), make(chan struct{})
	var openGate sync.Once
	release := func() { openGate.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the producer's Close, which waits for the callback
	var order []string
	var mu sync.Mutex
	if err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: []byte("a")}, func(client.Produced, error) {
		close(started)
		<-gate
		mu.Lock()
		order = append(order, "a")
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	<-started // a's batch is acknowledged and delivered: no sender runs now
	done := make(chan error, 1)
	go func() {
		_, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("b")})
		mu.Lock()
		order = append(order, "b")
		mu.Unlock()
		done <- err
	}()
	waitFor(t, "b to be stored", func() bool { return len(e.values("t", 0)) == 2 })
	// Give a wrong Produce the time to return: it has its answer already.
	select {
	case err := <-done:
		t.Fatalf("Produce returned (%v) while the earlier record's callback ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "a,b" {
		t.Fatalf("outcomes in order %s, want a,b", got)
	}
}

// Synchronous and asynchronous produces and admin round trips share one
// connection from many goroutines, so that sends written directly race
// sends queued for the writer goroutine: every request is answered, and
// every partition holds its records once each, in order.
func TestDirectWritesRaceTheWriter(t *testing.T) {
	const parts, n = 4, 60
	e := newEnv(t, 1, map[string]int32{"t": parts})
	p := e.producer(client.ProducerConfig{Linger: -1, Partitioner: client.ManualPartitioner()})
	var wg sync.WaitGroup
	errs := make(chan error, parts*n+n)
	for part := int32(0); part < parts; part++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				rec := client.Record{Topic: "t", Partition: part, Value: []byte(fmt.Sprint(i))}
				if part%2 == 0 || i%2 == 0 {
					pr, err := p.Produce(e.ctx, rec)
					if err == nil && pr.Offset != int64(i) {
						err = fmt.Errorf("partition %d record %d got offset %d", part, i, pr.Offset)
					}
					errs <- err
					continue
				}
				if err := p.ProduceAsync(e.ctx, rec, func(pr client.Produced, err error) {
					if err == nil && pr.Offset != int64(i) {
						err = fmt.Errorf("partition %d record %d got offset %d", part, i, pr.Offset)
					}
					errs <- err
				}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			_, err := e.c.ListOffsets(e.ctx, "t", int32(i%parts), wire.TimestampLatest)
			errs <- err
		}
	}()
	wg.Wait()
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < parts*n+n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = int64(i)
	}
	for part := int32(0); part < parts; part++ {
		e.wantExactlyOnce("t", part, n, offsets)
	}
	if c := e.fc.Connections(1); c != 1 {
		t.Fatalf("%d connections, want one shared", c)
	}
}

// failingConn breaks its connection in the middle of the first Produce
// frame written after arm, and records whether a send wrote it directly.
type failingConn struct {
	net.Conn
	armed  *atomic.Bool
	direct *atomic.Int32 // 1: written by conn.send, 2: by the writer goroutine
}

func (c *failingConn) Write(b []byte) (int, error) {
	if len(b) >= 6 && wire.APIKey(binary.BigEndian.Uint16(b[4:])) == wire.APIProduce && c.armed.CompareAndSwap(true, false) {
		c.direct.Store(2)
		if calledFrom("(*conn).send") {
			c.direct.Store(1)
		}
		n, _ := c.Conn.Write(b[:len(b)/2])
		c.Conn.Close()
		return n, errors.New("injected write failure")
	}
	return c.Conn.Write(b)
}

// calledFrom reports whether a function whose name ends with fn is on the
// caller's stack.
func calledFrom(fn string) bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// A direct write that fails half way leaves its request to the connection's
// failure: the Produce is retried on a new connection and succeeds, and
// the record is stored once.
func TestDirectWriteFailureRetriesOnce(t *testing.T) {
	var armed atomic.Bool
	var direct atomic.Int32
	var dials atomic.Int32
	e := newEnv(t, 1, map[string]int32{"t": 1}, func(cfg *client.Config) {
		var d net.Dialer
		cfg.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			dials.Add(1)
			return &failingConn{Conn: nc, armed: &armed, direct: &direct}, nil
		}
	})
	p := e.producer(client.ProducerConfig{Linger: -1})
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	before := dials.Load()
	armed.Store(true)
	pr, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("1")})
	if err != nil || pr.Offset != 1 {
		t.Fatalf("Produce after a failed write: %+v, %v; want offset 1", pr, err)
	}
	if d := direct.Load(); d != 1 {
		t.Fatalf("the failed write was made by %d (1: the send itself, 2: the writer goroutine), want 1", d)
	}
	if dials.Load() == before {
		t.Fatal("no new connection after the write failed")
	}
	e.wantExactlyOnce("t", 0, 2, []int64{0, 1})
}

// The same failure under a non-idempotent producer fails the record
// exactly once or stores it once: never lost silently, never twice.
func TestDirectWriteFailureNonIdempotent(t *testing.T) {
	var armed atomic.Bool
	var direct atomic.Int32
	e := newEnv(t, 1, map[string]int32{"t": 1}, func(cfg *client.Config) {
		var d net.Dialer
		cfg.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &failingConn{Conn: nc, armed: &armed, direct: &direct}, nil
		}
	})
	p := e.producer(client.ProducerConfig{Linger: -1, DisableIdempotence: true})
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	_, err := p.Produce(e.ctx, client.Record{Topic: "t", Value: []byte("1")})
	if d := direct.Load(); d != 1 {
		t.Fatalf("the failed write was made by %d, want 1 (the send itself)", d)
	}
	stored := len(e.values("t", 0))
	switch {
	case err == nil && stored == 2:
	case err != nil && errors.Is(err, client.ErrConnectionLost) && stored == 1:
	default:
		t.Fatalf("Produce: %v with %d records stored", err, stored)
	}
}
