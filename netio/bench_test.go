package netio

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/shard"
)

// benchHandler acknowledges every frame with a 13-byte answer, on the
// receiving shard or, when crossShard is set, after a shard.Call to the
// next shard (the path of a request for a partition owned elsewhere).
type benchHandler struct {
	crossShard bool
	fileFd     int // when >= 0, answer with this file's first fileLen bytes
	fileLen    int64
}

func (h *benchHandler) OnOpen(*Conn) error                    { return nil }
func (h *benchHandler) OnFrameTooLarge(*Conn, uint32, []byte) {}
func (h *benchHandler) OnClose(*Conn, error)                  {}
func (h *benchHandler) OnFrame(c *Conn, body []byte) {
	corr := binary.BigEndian.Uint64(body)
	if h.fileFd >= 0 {
		_ = c.Reply(Response{Header: response(corr, 0, int(h.fileLen)), Files: []FileRange{{Fd: h.fileFd, Len: h.fileLen}}})
		return
	}
	if !h.crossShard {
		_ = c.Reply(Response{Header: response(corr, c.Shard().ID(), 0)})
		return
	}
	from := c.Shard()
	to := from.Group().Shard((from.ID() + 1) % from.Group().Len())
	err := shard.Call(from, to, func(s *shard.Shard) int { return s.ID() }, func(id int) {
		_ = c.Reply(Response{Header: response(corr, id, 0)})
	})
	if err != nil {
		c.Abort(err)
	}
}

func benchServer(b *testing.B, h Handler) (addr string, stop func()) {
	g, err := shard.NewGroup(shard.Config{Count: 2})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Start(); err != nil {
		b.Fatal(err)
	}
	srv, err := NewServer(g, Config{}, h)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	return srv.Addr().String(), func() {
		_ = srv.Shutdown(contextWithTimeout(10 * time.Second))
		_ = g.Stop()
	}
}

// blast is the baseline: a plain Go client writing total bytes in chunk
// writes to a plain Go server that discards them; bytes per second.
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
	if got != int64(total) {
		return 0, fmt.Errorf("baseline read %d of %d bytes", got, total)
	}
	return float64(got) / time.Since(start).Seconds(), nil
}

// ingest pipelines frames requests of payload bytes (window unanswered at
// most) on one connection and returns payload bytes per second.
func ingest(addr string, frames, payload, window int) (float64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	credits := make(chan struct{}, window)
	for i := 0; i < window; i++ {
		credits <- struct{}{}
	}
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		var hdr [respHeaderBytes]byte
		for i := 0; i < frames; i++ {
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				errc <- err
				return
			}
			if corr := binary.BigEndian.Uint64(hdr[4:]); corr != uint64(i) {
				errc <- fmt.Errorf("answer %d, want %d", corr, i)
				return
			}
			credits <- struct{}{}
		}
		errc <- nil
	}()
	req := request(0, opEcho, make([]byte, payload))
	for i := 0; i < frames; i++ {
		<-credits
		binary.BigEndian.PutUint64(req[4:], uint64(i))
		if _, err := c.Write(req); err != nil {
			return 0, err
		}
	}
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(frames*payload) / time.Since(start).Seconds(), nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// BenchmarkIngest64K: one producer pipelines 64 KiB frames (32 unanswered
// at most), the server acknowledges each on the receiving shard ("local")
// or after a hop to the other shard ("cross"); "local-1MiB" sends the same
// bytes in 1 MiB frames (2 in flight), larger than the read buffer. Five rounds, each a plain
// Go socket blast of the same bytes then the server run, so each ratio
// compares runs made under the same load; medians are reported.
func BenchmarkIngest64K(b *testing.B) {
	for _, mode := range []struct {
		name  string
		cross bool
		size  int
	}{{"local", false, 64 << 10}, {"cross", true, 64 << 10}, {"local-1MiB", false, 1 << 20}} {
		b.Run(mode.name, func(b *testing.B) {
			addr, stop := benchServer(b, &benchHandler{crossShard: mode.cross, fileFd: -1})
			defer stop()
			frames := max(b.N, 256) * (64 << 10) / mode.size
			var rates, ratios, bases []float64
			for round := 0; round < 5; round++ {
				base, err := blast(frames*mode.size, mode.size)
				if err != nil {
					b.Fatal(err)
				}
				r, err := ingest(addr, frames, mode.size, max(2, 32*(64<<10)/mode.size))
				if err != nil {
					b.Fatal(err)
				}
				rates, ratios, bases = append(rates, r), append(ratios, r/base), append(bases, base)
			}
			b.ReportMetric(median(rates)/1e6, "MB/s")
			b.ReportMetric(median(bases)/1e6, "blast-MB/s")
			b.ReportMetric(100*median(ratios), "%-of-blast")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRoundTrip: one connection, one small request at a time,
// answered on the receiving shard or after a hop to the other shard.
func BenchmarkRoundTrip(b *testing.B) {
	for _, mode := range []struct {
		name  string
		cross bool
	}{{"local", false}, {"cross", true}} {
		b.Run(mode.name, func(b *testing.B) {
			addr, stop := benchServer(b, &benchHandler{crossShard: mode.cross, fileFd: -1})
			defer stop()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			h := hdrhistogram.New(1, 10_000_000, 3)
			req := request(0, opEcho, make([]byte, 100))
			var resp [respHeaderBytes]byte
			for i := -500; i < b.N; i++ { // 500 warm-up round trips
				binary.BigEndian.PutUint64(req[4:], uint64(i))
				start := time.Now()
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, resp[:]); err != nil {
					b.Fatal(err)
				}
				if i >= 0 {
					_ = h.RecordValue(time.Since(start).Microseconds())
				}
			}
			b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-µs")
			b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-µs")
			b.ReportMetric(float64(h.ValueAtQuantile(99.9)), "p999-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkFetchSendfile: one consumer asks for 1 MiB at a time (4
// requests unanswered at most); each answer is a header plus a sendfile
// range of a 1 MiB file in the page cache. Medians of five rounds against a
// plain socket blast of the same bytes.
func BenchmarkFetchSendfile(b *testing.B) {
	const chunk = 1 << 20
	path := filepath.Join(b.TempDir(), "segment.log")
	if err := os.WriteFile(path, make([]byte, chunk), 0o600); err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	addr, stop := benchServer(b, &benchHandler{fileFd: fd, fileLen: chunk})
	defer stop()
	fetches := max(b.N, 64)
	var rates, ratios []float64
	for round := 0; round < 5; round++ {
		base, err := blast(fetches*chunk, 64<<10)
		if err != nil {
			b.Fatal(err)
		}
		r, err := fetch(addr, fetches, chunk, 4)
		if err != nil {
			b.Fatal(err)
		}
		rates, ratios = append(rates, r), append(ratios, r/base)
	}
	b.ReportMetric(median(rates)/1e6, "MB/s")
	b.ReportMetric(100*median(ratios), "%-of-blast")
	b.ReportMetric(0, "ns/op")
}

// fetch sends n small requests (window unanswered at most) and reads n
// answers of size bytes each; bytes per second.
func fetch(addr string, n, size, window int) (float64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	credits := make(chan struct{}, window)
	for i := 0; i < window; i++ {
		credits <- struct{}{}
	}
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		buf := make([]byte, respHeaderBytes+size)
		for i := 0; i < n; i++ {
			if _, err := io.ReadFull(c, buf); err != nil {
				errc <- err
				return
			}
			credits <- struct{}{}
		}
		errc <- nil
	}()
	req := request(0, opEcho, nil)
	for i := 0; i < n; i++ {
		<-credits
		if _, err := c.Write(req); err != nil {
			return 0, err
		}
	}
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(n*size) / time.Since(start).Seconds(), nil
}

// BenchmarkConnect: a new connection's first answer — connect, one small
// request, its answer — with the earlier connections left open; the cost of accepting on whichever
// shard the kernel woke and placing the connection on its home shard
// (docs/design/threading.md, "One listening socket").
func BenchmarkConnect(b *testing.B) {
	addr, stop := benchServer(b, &benchHandler{fileFd: -1})
	defer stop()
	h := hdrhistogram.New(1, 10_000_000, 3)
	req := request(0, opEcho, make([]byte, 100))
	var resp [respHeaderBytes]byte
	var open []net.Conn
	for i := -200; i < b.N; i++ { // 200 warm-up connections
		start := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp[:]); err != nil {
			b.Fatal(err)
		}
		if i >= 0 {
			_ = h.RecordValue(time.Since(start).Microseconds())
		}
		open = append(open, c) // closed at the end: not a churn benchmark
	}
	for _, c := range open {
		_ = c.Close()
	}
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkMigrate: the cost of moving a connection to another shard
// (Conn.Migrate: EPOLL_CTL_DEL on the old shard's epoll set, a Post to
// the new shard, EPOLL_CTL_ADD there), as a client pays it: a handshake
// request whose answer is queued before the move, then one echo served on
// the new shard. "move" alternates the target shard so every handshake
// moves the connection; "stay" names the shard it is on (no move). The
// difference is what a shard-aware connection's Home costs once, against
// the two hand-offs per request it saves (BenchmarkRoundTrip/cross).
func BenchmarkMigrate(b *testing.B) {
	for _, mode := range []struct {
		name string
		move bool
	}{{"stay", false}, {"move", true}} {
		b.Run(mode.name, func(b *testing.B) {
			ts := startServer(b, 2, Config{}, newTestHandler())
			c, err := net.Dial("tcp", ts.addr())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			h := hdrhistogram.New(1, 10_000_000, 3)
			echo := request(0, opEcho, make([]byte, 100))
			var resp [respHeaderBytes]byte
			roundTrip := func(req []byte) byte {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, resp[:]); err != nil {
					b.Fatal(err)
				}
				n := int(binary.BigEndian.Uint32(resp[:4])) - 9
				if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
					b.Fatal(err)
				}
				return resp[12]
			}
			on := roundTrip(echo)
			for i := -200; i < b.N; i++ { // 200 warm-up moves
				to := on
				if mode.move {
					to = 1 - on
				}
				start := time.Now()
				roundTrip(request(1, opHandshake, []byte{to}))
				if on = roundTrip(echo); on != to {
					b.Fatalf("served on shard %d after a move to %d", on, to)
				}
				if i >= 0 {
					_ = h.RecordValue(time.Since(start).Microseconds())
				}
			}
			b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-µs")
			b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}
