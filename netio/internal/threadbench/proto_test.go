package threadbench

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The experiment protocol. A request is
//
//	u32 length | u8 op | u8 target | u16 pad | u64 seq | payload
//
// and a response is u32 length (9) | u8 shard | u64 seq.
const (
	opHello = 0 // answer with the shard that received the connection
	opWork  = 1 // tiny work on the target shard
	opIO    = 2 // work that waits for an engine completion on the target shard
	opBulk  = 3 // copy the payload into the target shard's log buffer

	targetSame  = 0 // the shard whose loop received the request
	targetOther = 1 // the next shard

	reqHdrBytes  = 12
	respBytes    = 4 + 9
	shardCount   = 2
	logBufBytes  = 4 << 20 // the per-shard "log" bulk payloads are copied into
	bulkFrameMax = 1 << 20
)

func putResp(b []byte, shard byte, seq uint64) []byte {
	b = binary.BigEndian.AppendUint32(b, 9)
	b = append(b, shard)
	return binary.BigEndian.AppendUint64(b, seq)
}

// req is a parsed request header.
type req struct {
	op, target byte
	seq        uint64
	payload    []byte
}

func parseReq(body []byte) (req, error) {
	if len(body) < reqHdrBytes {
		return req{}, fmt.Errorf("short request: %d bytes", len(body))
	}
	return req{op: body[0], target: body[1], seq: binary.BigEndian.Uint64(body[4:12]), payload: body[12:]}, nil
}

// logBuf stands in for a partition log: bulk payloads are copied into it,
// wrapping around, the way an append copies a batch into a write buffer.
type logBuf struct {
	buf []byte
	off int
}

func newLogBuf() *logBuf { return &logBuf{buf: make([]byte, logBufBytes)} }

func (l *logBuf) append(p []byte) {
	if l.off+len(p) > len(l.buf) {
		l.off = 0
	}
	l.off += copy(l.buf[l.off:], p)
}

// server is a prototype under test.
type server interface {
	Addr() string
	Close()
}

// client is one pipelining-capable connection speaking the protocol.
type client struct {
	c   net.Conn
	req []byte
	res [respBytes]byte
}

func dial(addr string) (*client, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &client{c: c}, nil
}

func (cl *client) send(op, target byte, seq uint64, payload int) error {
	n := reqHdrBytes + payload
	if cap(cl.req) < 4+n {
		cl.req = make([]byte, 4+n)
	}
	b := cl.req[:4+n]
	binary.BigEndian.PutUint32(b, uint32(n))
	b[4], b[5] = op, target
	binary.BigEndian.PutUint64(b[8:16], seq)
	_, err := cl.c.Write(b)
	return err
}

func (cl *client) recv() (shard byte, seq uint64, err error) {
	if _, err = io.ReadFull(cl.c, cl.res[:]); err != nil {
		return 0, 0, err
	}
	return cl.res[4], binary.BigEndian.Uint64(cl.res[5:]), nil
}

// roundTrips sends n requests one at a time and records each round trip.
func roundTrips(addr string, op, target byte, warmup, n int) (*hdrhistogram.Histogram, error) {
	cl, err := dial(addr)
	if err != nil {
		return nil, err
	}
	defer cl.c.Close()
	h := hdrhistogram.New(1, int64(time.Second/time.Microsecond*10), 3)
	for i := 0; i < warmup+n; i++ {
		start := time.Now()
		if err := cl.send(op, target, uint64(i), 0); err != nil {
			return nil, err
		}
		_, seq, err := cl.recv()
		if err != nil {
			return nil, err
		}
		if seq != uint64(i) {
			return nil, fmt.Errorf("response %d for request %d", seq, i)
		}
		if i >= warmup {
			_ = h.RecordValue(int64(time.Since(start) / time.Microsecond))
		}
	}
	return h, nil
}

// pipelined sends frames bulk requests of size payload bytes with up to
// window unanswered, and returns the payload bytes per second.
func pipelined(addr string, target byte, frames, payload, window int) (float64, error) {
	cl, err := dial(addr)
	if err != nil {
		return 0, err
	}
	defer cl.c.Close()
	credits := make(chan struct{}, window)
	for i := 0; i < window; i++ {
		credits <- struct{}{}
	}
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		for i := 0; i < frames; i++ {
			_, seq, err := cl.recv()
			if err == nil && seq != uint64(i) {
				err = fmt.Errorf("response %d out of order, want %d", seq, i)
			}
			if err != nil {
				errc <- err
				return
			}
			credits <- struct{}{}
		}
		errc <- nil
	}()
	for i := 0; i < frames; i++ {
		<-credits
		if err := cl.send(opBulk, target, uint64(i), payload); err != nil {
			return 0, err
		}
	}
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(frames*payload) / time.Since(start).Seconds(), nil
}

// blast is the baseline: a plain Go server reading and discarding, a plain
// Go client writing chunk-sized writes; it returns bytes per second.
func blast(total, chunk int) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	var got int64
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ = io.Copy(io.Discard, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, chunk)
	start := time.Now()
	for sent := 0; sent < total; sent += chunk {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, err
		}
	}
	c.Close()
	wg.Wait()
	el := time.Since(start)
	if got < int64(total) {
		return 0, fmt.Errorf("baseline server read %d of %d bytes", got, total)
	}
	return float64(got) / el.Seconds(), nil
}

func reportHist(b *testing.B, h *hdrhistogram.Histogram) {
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99.9)), "p999-µs")
	b.ReportMetric(0, "ns/op")
}
