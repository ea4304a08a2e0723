package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// wireConn is a hand-driven protocol connection: the tests below need
// what the SDK never does (a thousand separate connections, a reader that
// stops reading, garbage).
type wireConn struct {
	c    net.Conn
	r    *bufio.Reader
	corr uint32
}

const wireIOTimeout = 30 * time.Second

func dialWire(addr string) (*wireConn, error) {
	c, err := net.DialTimeout("tcp", addr, wireIOTimeout)
	if err != nil {
		return nil, err
	}
	return &wireConn{c: c, r: bufio.NewReader(c)}, nil
}

func (w *wireConn) send(req wire.Request) (uint32, error) {
	w.corr++
	w.c.SetWriteDeadline(time.Now().Add(wireIOTimeout))
	_, err := w.c.Write(wire.AppendRequest(nil, w.corr, 0, req))
	return w.corr, err
}

// call sends req and decodes the answer into resp (a broker error comes
// back as *wire.ErrorResponse).
func (w *wireConn) call(req wire.Request, resp wire.Response) error {
	corr, err := w.send(req)
	if err != nil {
		return err
	}
	return w.readFor(corr, resp)
}

// readFor reads the next response, which must answer corr, into resp.
func (w *wireConn) readFor(corr uint32, resp wire.Response) error {
	w.c.SetReadDeadline(time.Now().Add(wireIOTimeout))
	var size [4]byte
	if _, err := io.ReadFull(w.r, size[:]); err != nil {
		return err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(w.r, buf); err != nil {
		return err
	}
	h, body, err := wire.ParseResponseHeader(buf)
	if err != nil {
		return err
	}
	if h.CorrelationID != corr {
		return fmt.Errorf("answer to %d, want %d", h.CorrelationID, corr)
	}
	return wire.DecodeResponseBody(h, body, 0, resp)
}

func (w *wireConn) handshake() error {
	var resp wire.HandshakeResponse
	return w.call(&wire.HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1, ClientID: "e2e"}, &resp)
}

func oneRecordBatch(value []byte) []byte {
	b, _ := batch.NewBuilder(batch.Options{})
	b.AppendKV(time.Now().UnixMilli(), nil, value)
	out, _ := b.Build()
	return out
}

// TestE2EThousandConnections opens 1,000 connections at once; each
// handshakes and produces one record, and all of them stay open and are
// served again once every one is connected; then the broker stops
// gracefully with all of them open.
func TestE2EThousandConnections(t *testing.T) {
	const conns, partitions = 1000, 4
	s := startServer(t, serverOpts{})
	c := s.dial(client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := c.CreateTopic(ctx, client.TopicSpec{Name: "many", Partitions: partitions})
	if err != nil {
		t.Fatal(err)
	}

	ws := make([]*wireConn, conns)
	t.Cleanup(func() {
		for _, w := range ws {
			if w != nil {
				w.c.Close()
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	connected := make(chan struct{})
	var ready atomic.Int32
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := dialWire(s.addr)
			if err != nil {
				errs <- fmt.Errorf("connection %d: %w", i, err)
				return
			}
			ws[i] = w
			if err := w.handshake(); err != nil {
				errs <- fmt.Errorf("connection %d handshake: %w", i, err)
				return
			}
			ref := wire.PartitionRef{Topic: "many", TopicID: created.TopicID, Partition: int32(i % partitions), Generation: wire.GenerationUnknown}
			var pr wire.ProduceResponse
			if err := w.call(&wire.ProduceRequest{PartitionRef: ref, Records: oneRecordBatch([]byte(fmt.Sprint(i)))}, &pr); err != nil {
				errs <- fmt.Errorf("connection %d produce: %w", i, err)
				return
			}
			ready.Add(1)
			<-connected // every connection is open at once before the second round
			var md wire.MetadataResponse
			if err := w.call(&wire.MetadataRequest{Topics: []string{"many"}}, &md); err != nil {
				errs <- fmt.Errorf("connection %d second request: %w", i, err)
			}
		}()
	}
	eventually(t, time.Minute, "1000 connections served", func() bool { return int(ready.Load())+len(errs) >= conns })
	close(connected)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var records int64
	for p := int32(0); p < partitions; p++ {
		lo, err := c.ListOffsets(ctx, "many", p, wire.TimestampLatest)
		if err != nil {
			t.Fatal(err)
		}
		records += lo.Offset // dense from 0: the primary's no-op takes no offset
	}
	if records != conns {
		t.Fatalf("%d records in the topic, %d produced", records, conns)
	}
	// A graceful stop with every connection still open is quick.
	start := time.Now()
	if code := s.stop(syscall.SIGTERM); code != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("stop with %d idle connections: exit %d after %v", conns, code, time.Since(start))
	}
}

// TestE2ESlowConsumer pipelines fetches of a 32 MiB partition on a
// connection that never reads its answers. The server stops reading that
// connection (in-flight and outbound bounds) instead of queueing ever more
// response bytes: its resident memory stays flat while other clients are
// still served.
func TestE2ESlowConsumer(t *testing.T) {
	const (
		dataBytes  = 32 << 20
		valueBytes = 16 << 10
		growthMax  = 64 << 20 // allowed RSS growth while the reader is stuck
	)
	s := startServer(t, serverOpts{config: "[storage]\nfsync = \"never\"\n"})
	c := s.dial(client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := c.CreateTopic(ctx, client.TopicSpec{Name: "big", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, client.ProducerConfig{BatchBytesMax: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, valueBytes)
	for i := 0; i < dataBytes/valueBytes; i++ {
		if err := p.ProduceAsync(ctx, client.Record{Topic: "big", Value: value}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	base := s.rssBytes()

	slow, err := dialWire(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.c.Close()
	if err := slow.handshake(); err != nil {
		t.Fatal(err)
	}
	// Every fetch asks for 8 MiB from the start: if the server queued the
	// answers it would hold gigabytes. The writer blocks once the server
	// stops reading and the socket buffers fill.
	ref := wire.PartitionRef{Topic: "big", TopicID: created.TopicID, Generation: wire.GenerationUnknown}
	frame := wire.AppendRequest(nil, 1, 0, &wire.FetchRequest{PartitionRef: ref, FetchOffset: 0, MaxBytes: 8 << 20})
	var sent atomic.Int64
	writerDone := make(chan error, 1)
	go func() {
		for {
			slow.c.SetWriteDeadline(time.Now().Add(wireIOTimeout))
			if _, err := slow.c.Write(frame); err != nil {
				writerDone <- err
				return
			}
			sent.Add(1)
		}
	}()
	// The writer stalls: the count stops moving for a while.
	last, still := int64(-1), 0
	eventually(t, time.Minute, "the server to stop reading the slow connection", func() bool {
		if n := sent.Load(); n == last {
			still++
		} else {
			last, still = n, 0
		}
		return still >= 40 // 200 ms without progress
	})
	var peak int64
	for i := 0; i < 20; i++ {
		peak = max(peak, s.rssBytes())
		// Meanwhile another client is served.
		if _, err := c.ListOffsets(ctx, "big", 0, wire.TimestampLatest); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("slow consumer: %d fetches of 8 MiB sent before the server stopped reading; server RSS %d MiB before, peak %d MiB while stuck (provisional)",
		sent.Load(), base>>20, peak>>20)
	if peak-base > growthMax {
		t.Fatalf("server RSS grew from %d MiB to %d MiB behind a reader that never reads", base>>20, peak>>20)
	}
	slow.c.Close()
	if err := <-writerDone; err == nil {
		t.Fatal("the writer stopped without an error")
	}
}

// TestE2EBadInputKeepsServing sends garbage, half frames and an oversize
// length on separate connections of the real binary; the broker drops
// them and keeps serving the CLI. (cluster/node's TestBadInput checks the
// precise answer to each kind.)
func TestE2EBadInputKeepsServing(t *testing.T) {
	s := startServer(t, serverOpts{})
	s.cliOK("", "topic", "create", "ok", "--partitions", "2")
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 50; i++ {
		w, err := dialWire(s.addr)
		if err != nil {
			t.Fatal(err)
		}
		junk := make([]byte, 1+rng.IntN(512))
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		switch i % 3 {
		case 1: // a length over the maximum
			binary.BigEndian.PutUint32(junk, 1<<30)
		case 2: // a frame cut short
			junk = wire.AppendRequest(nil, 1, 0, &wire.MetadataRequest{})[:9]
		}
		w.c.Write(junk)
		w.c.Close()
	}
	s.cliOK("ok\n", "produce", "ok")
	if out := s.cliOK("", "consume", "ok", "--count", "1"); out != "ok\n" {
		t.Fatalf("consume after the garbage: %q", out)
	}
	var er *wire.ErrorResponse
	w, err := dialWire(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer w.c.Close()
	if err := w.call(&wire.MetadataRequest{}, &wire.MetadataResponse{}); !errors.As(err, &er) || !errors.Is(err, wire.ErrInvalidRequest) {
		t.Fatalf("a request before the handshake: %v", err)
	}
}
