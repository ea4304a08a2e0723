package tlsbridge

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/shard"
)

// echo answers each frame with the frame itself, followed by the file
// range file (when set) sent with sendfile, and records the peers'
// addresses.
type echo struct {
	file    *os.File
	fileLen int64
	mu      sync.Mutex
	remotes []string
	opened  chan *netio.Conn
}

func (e *echo) OnOpen(c *netio.Conn) error {
	e.mu.Lock()
	e.remotes = append(e.remotes, c.RemoteAddr().String())
	e.mu.Unlock()
	if e.opened != nil {
		e.opened <- c
	}
	return nil
}

func (e *echo) OnFrame(c *netio.Conn, body []byte) {
	n := len(body)
	var files []netio.FileRange
	if e.file != nil {
		n += int(e.fileLen)
		files = []netio.FileRange{{Fd: int(e.file.Fd()), Off: 0, Len: e.fileLen}}
	}
	h := binary.BigEndian.AppendUint32(nil, uint32(n))
	c.Reply(netio.Response{Header: append(h, body...), Files: files})
}
func (e *echo) OnFrameTooLarge(*netio.Conn, uint32, []byte) {}
func (e *echo) OnClose(*netio.Conn, error)                  {}

type rig struct {
	group *shard.Group
	srv   *netio.Server
	h     *echo
	ca    *CA
	pool  *x509.CertPool
	cert  tls.Certificate
	log   *strings.Builder
	logMu *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (r *rig) logs() string {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return r.log.String()
}

// newRig starts one shard and a netio server with the echo handler, and
// a CA with a certificate for 127.0.0.1.
func newRig(t *testing.T, h *echo) *rig {
	t.Helper()
	g, err := shard.NewGroup(shard.Config{Count: 2, InboxDepth: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	srv, err := netio.NewServer(g, netio.Config{}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		g.Stop()
	})
	ca, err := NewCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := ca.Issue("node", []string{"127.0.0.1"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &rig{group: g, srv: srv, h: h, ca: ca, pool: pool, cert: pair, log: &strings.Builder{}, logMu: &sync.Mutex{}}
}

func (r *rig) config(name string, tc *tls.Config) Config {
	return Config{Name: name, TLS: tc, Log: slog.New(slog.NewTextHandler(lockedWriter{r.logMu, r.log}, nil)), HandshakeTimeout: 500 * time.Millisecond}
}

func (r *rig) serve(t *testing.T, cfg Config) *Acceptor {
	t.Helper()
	l, err := netio.Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Serve(r.srv, l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, body []byte, want int) []byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body)))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
	var n [4]byte
	if _, err := io.ReadFull(br, n[:]); err != nil {
		t.Fatal(err)
	}
	if int(binary.BigEndian.Uint32(n[:])) != want {
		t.Fatalf("answer of %d bytes, want %d", binary.BigEndian.Uint32(n[:]), want)
	}
	out := make([]byte, want)
	if _, err := io.ReadFull(br, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Frames and sendfile ranges cross the bridge both ways intact, the shard
// sees the client's real address, and a client's close ends the session
// on both sides.
func TestAcceptorBridgesFramesAndSendfile(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 300<<10) // several TLS records and socket buffers
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(dir, "seg")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := newRig(t, &echo{file: f, fileLen: int64(len(data))})
	a := r.serve(t, r.config("client", &tls.Config{Certificates: []tls.Certificate{r.cert}}))
	c, err := tls.Dial("tcp", r.srv.Addr().String(), &tls.Config{RootCAs: r.pool})
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		got := roundTrip(t, c, br, []byte("hello"), 5+len(data))
		if string(got[:5]) != "hello" || string(got[5:]) != string(data) {
			t.Fatalf("round %d: answer corrupted", i)
		}
	}
	r.h.mu.Lock()
	remote := r.h.remotes[0]
	r.h.mu.Unlock()
	if remote != c.LocalAddr().String() {
		t.Errorf("shard saw %s, the client is %s", remote, c.LocalAddr())
	}
	c.Close()
	waitStat(t, "the client's close to end its session and connection", func() bool {
		return a.Stats().Open.Load() == 0 && r.srv.Connections() == 0
	})
	if a.Stats().Handshakes.Load() != 1 || a.Stats().BytesOut.Load() < uint64(3*len(data)) {
		t.Errorf("stats: %d handshakes, %d bytes out", a.Stats().Handshakes.Load(), a.Stats().BytesOut.Load())
	}
}

// Sessions that fail are refused with their reason, logged with the
// address and counted: plaintext, a silent peer (timeout), beyond
// SessionsMax; and Shutdown ends the accept loop.
func TestAcceptorRefusals(t *testing.T) {
	r := newRig(t, &echo{})
	cfg := r.config("kafka", &tls.Config{Certificates: []tls.Certificate{r.cert}})
	cfg.SessionsMax = 1
	a := r.serve(t, cfg)
	addr := r.srv.Addr().String()

	silent, err := net.Dial("tcp", addr) // holds the one session, then times out
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitStat(t, "the silent session open", func() bool { return a.Stats().Open.Load() == 1 })
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil {
		t.Error("a session beyond SessionsMax was served")
	}
	over.Close()
	waitStat(t, "the silent session timed out", func() bool { return a.Stats().Refused(ReasonTimeout) == 1 && a.Stats().Open.Load() == 0 })

	p, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.Write([]byte{0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'})
	p.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, p) // closed by the node
	p.Close()
	waitStat(t, "the plaintext refusal", func() bool { return a.Stats().Refused(ReasonNotTLS) == 1 })
	if a.Stats().Refused(ReasonLimit) != 1 {
		t.Errorf("limit refusals: %d", a.Stats().Refused(ReasonLimit))
	}
	for _, want := range []string{"reason=timeout", "reason=not_tls", "reason=limit", "listener=kafka", "remote=127.0.0.1:"} {
		if !strings.Contains(r.logs(), want) {
			t.Errorf("log lacks %s:\n%s", want, r.logs())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.srv.Shutdown(ctx)
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the accept loop outlived Shutdown")
	}
}

// The Dialer's sessions are served by the shard it names and carry
// frames; a server certificate from another CA is refused with
// ErrRefused and counted, and the server side sees a certificate refusal.
func TestDialer(t *testing.T) {
	opened := make(chan *netio.Conn, 4)
	r := newRig(t, &echo{opened: opened})
	srvStats := &Stats{}
	cfg := r.config("replication", &tls.Config{Certificates: []tls.Certificate{r.cert}})
	cfg.Stats = srvStats
	r.serve(t, cfg)
	addr := r.srv.Addr().String()
	// A second server dials the first through its own group's shard 1.
	out := &echo{}
	g2, err := shard.NewGroup(shard.Config{Count: 2, InboxDepth: 1024})
	if err != nil {
		t.Fatal(err)
	}
	g2.Start()
	s2, err := netio.NewServer(g2, netio.Config{}, out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s2.Shutdown(ctx)
		g2.Stop()
	}()
	dial := func(pool *x509.CertPool) (*netio.Conn, error, *Dialer) {
		d := NewDialer(s2, r.config("replication_out", &tls.Config{RootCAs: pool}))
		type res struct {
			c   *netio.Conn
			err error
		}
		ch := make(chan res, 1)
		sh := g2.Shard(1)
		if err := d.Dial(sh, addr, out, func(c *netio.Conn, err error) {
			if c != nil && c.Shard() != sh {
				err = errors.New("served on another shard")
			}
			ch <- res{c, err}
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case x := <-ch:
			return x.c, x.err, d
		case <-time.After(20 * time.Second):
			t.Fatal("dial never finished")
		}
		return nil, nil, nil
	}
	c, err, d := dial(r.pool)
	if err != nil {
		t.Fatal(err)
	}
	if d.Stats().Handshakes.Load() != 1 || c.RemoteAddr().String() != addr {
		t.Errorf("handshakes %d, remote %v", d.Stats().Handshakes.Load(), c.RemoteAddr())
	}
	select {
	case <-opened:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never adopted the dialled session")
	}
	other, err := NewCA("other", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(other.Cert)
	_, err, d = dial(pool)
	if !errors.Is(err, ErrRefused) || d.Stats().Refused(ReasonCertificate) != 1 {
		t.Fatalf("wrong CA: %v, %d certificate refusals", err, d.Stats().Refused(ReasonCertificate))
	}
	waitStat(t, "the server's certificate refusal", func() bool { return srvStats.Refused(ReasonCertificate) == 1 })
}

func waitStat(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLooksLikeTLS(t *testing.T) {
	for _, tc := range []struct {
		size uint32
		want bool
	}{{0x16030100, true}, {0x160303ff, true}, {0x00000010, false}, {0x16020000, false}, {0x15030100, false}} {
		if got := LooksLikeTLS(tc.size); got != tc.want {
			t.Errorf("LooksLikeTLS(%#x) = %v", tc.size, got)
		}
	}
}
