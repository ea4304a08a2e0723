package tlsbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/shard"
)

// Bounds of the bridge.
const (
	// HandshakeTimeoutDefault bounds a session's handshake, so a peer
	// that connects and says nothing holds no goroutine for long.
	HandshakeTimeoutDefault = 10 * time.Second
	// bufferBytes is each direction's copy buffer (a TLS record holds at
	// most 16 KiB of data; 64 KiB lets one read take several).
	bufferBytes = 64 << 10
	// acceptBackoffMax bounds the pause after a failing Accept (EMFILE).
	acceptBackoffMax = time.Second
	// postTriesMax bounds how often a dialled session is offered to a
	// shard whose inbox is full, postPause apart.
	postTriesMax = 200
	postPause    = 5 * time.Millisecond
)

// ErrRefused wraps the error of a dial whose TLS handshake failed.
var ErrRefused = errors.New("tlsbridge: TLS handshake failed")

// Config configures one listener's bridge.
type Config struct {
	// Name labels the listener in logs and metrics: native, kafka,
	// replication.
	Name string
	// TLS is the server's configuration for an Acceptor (its
	// GetCertificate reads the current certificate, so a reload applies
	// to new sessions), the client's for a Dialer.
	TLS *tls.Config
	// HandshakeTimeout bounds a handshake (HandshakeTimeoutDefault when
	// zero); for a Dialer it bounds the TCP connect and the handshake.
	HandshakeTimeout time.Duration
	// SessionsMax bounds the sessions open at once, handshaking ones
	// included; more are closed at accept and counted as ReasonLimit.
	SessionsMax int
	// Log receives one line per refused session (limited) and nil means
	// slog.Default.
	Log *slog.Logger
	// Stats, when set, is counted into (else a private one is).
	Stats *Stats
}

func (c *Config) fill() {
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = HandshakeTimeoutDefault
	}
	if c.SessionsMax <= 0 {
		c.SessionsMax = 1 << 16
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Stats == nil {
		c.Stats = &Stats{}
	}
}

// Acceptor accepts TLS sessions on a listener and hands each, bridged,
// to a netio.Server.
type Acceptor struct {
	cfg  Config
	srv  *netio.Server
	ln   net.Listener
	logs *logLimit
	done chan struct{}
}

// Serve takes l for srv (srv.ServeElsewhere) and accepts TLS sessions on
// it until srv shuts down, which closes the listener.
func Serve(srv *netio.Server, l *netio.Listener, cfg Config) (*Acceptor, error) {
	cfg.fill()
	if cfg.TLS == nil {
		return nil, fmt.Errorf("tlsbridge: %s: no TLS configuration", cfg.Name)
	}
	ln, err := srv.ServeElsewhere(l)
	if err != nil {
		return nil, err
	}
	a := &Acceptor{cfg: cfg, srv: srv, ln: ln, logs: newLogLimit(), done: make(chan struct{})}
	go a.run()
	return a, nil
}

// Done is closed when the accept loop has ended (the server shut down).
func (a *Acceptor) Done() <-chan struct{} { return a.done }

// Stats are the acceptor's counters.
func (a *Acceptor) Stats() *Stats { return a.cfg.Stats }

func (a *Acceptor) run() {
	defer close(a.done)
	pause := time.Duration(0)
	for {
		c, err := a.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), acceptBackoffMax)
			a.cfg.Log.Warn("tls: accept failed; retrying", "listener", a.cfg.Name, "err", err, "pause", pause)
			time.Sleep(pause) // EMFILE and the like: nothing to wait on but time
			continue
		}
		pause = 0
		if a.cfg.Stats.Open.Add(1) > int64(a.cfg.SessionsMax) {
			a.cfg.Stats.Open.Add(-1)
			a.refuse(c.RemoteAddr(), ReasonLimit, fmt.Errorf("%d TLS sessions open (the listener's bound)", a.cfg.SessionsMax))
			_ = c.Close()
			continue
		}
		go a.session(c)
	}
}

// session runs one accepted connection's handshake, then its bridge.
func (a *Acceptor) session(c net.Conn) {
	defer a.cfg.Stats.Open.Add(-1)
	tc := tls.Server(c, a.cfg.TLS)
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		a.refuse(c.RemoteAddr(), classify(err), err)
		_ = c.Close()
		return
	}
	a.cfg.Stats.Handshakes.Add(1)
	shardFd, bridge, err := socketpair()
	if err != nil {
		a.cfg.Log.Error("tls: cannot bridge a session", "listener", a.cfg.Name, "remote", c.RemoteAddr(), "err", err)
		_ = tc.Close()
		return
	}
	if err := a.srv.Adopt(shardFd, tcpAddr(c.RemoteAddr())); err != nil {
		_ = unix.Close(shardFd)
		_ = bridge.Close()
		_ = tc.Close()
		return
	}
	pump(tc, bridge, a.cfg.Stats)
}

func (a *Acceptor) refuse(remote net.Addr, r Reason, err error) {
	a.cfg.Stats.refused[r].Add(1)
	logRefusal(a.cfg.Log, a.logs, a.cfg.Name, remote.String(), r, err)
}

func logRefusal(log *slog.Logger, lim *logLimit, name, remote string, r Reason, err error) {
	ok, suppressed := lim.admit(time.Now())
	if suppressed > 0 {
		log.Warn("tls: refused sessions not logged", "listener", name, "count", suppressed)
	}
	if ok {
		log.Warn("tls: session refused", "listener", name, "remote", remote, "reason", r.String(), "err", explain(r, err))
	}
}

// Dialer dials TLS sessions for a netio.Server (the replication links)
// and hands each, bridged, to a shard.
type Dialer struct {
	cfg  Config
	srv  *netio.Server
	logs *logLimit
}

// NewDialer dials for srv with cfg (cfg.TLS is the client configuration;
// its ServerName, when empty, is each address's host).
func NewDialer(srv *netio.Server, cfg Config) *Dialer {
	cfg.fill()
	return &Dialer{cfg: cfg, srv: srv, logs: newLogLimit()}
}

// Stats are the dialer's counters.
func (d *Dialer) Stats() *Stats { return d.cfg.Stats }

// Dial is netio.Server.Dial over TLS: it connects to addr and runs the
// handshake on a goroutine, then serves the session on shard sh with h.
// done runs on sh's thread exactly once (with the connection after
// h.OnOpen, or the error) unless the shard stopped meanwhile. It may be
// called from any goroutine.
func (d *Dialer) Dial(sh *shard.Shard, addr string, h netio.Handler, done func(*netio.Conn, error)) error {
	go d.dial(sh, addr, h, done)
	return nil
}

func (d *Dialer) dial(sh *shard.Shard, addr string, h netio.Handler, done func(*netio.Conn, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.HandshakeTimeout)
	td := &tls.Dialer{NetDialer: &net.Dialer{}, Config: d.cfg.TLS}
	c, err := td.DialContext(ctx, "tcp", addr)
	cancel()
	if err != nil {
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" { // a connect failure is no TLS matter
			r := classify(err)
			d.cfg.Stats.refused[r].Add(1)
			logRefusal(d.cfg.Log, d.logs, d.cfg.Name, addr, r, err)
			err = fmt.Errorf("%w with %s: %s", ErrRefused, addr, explain(r, err))
		}
		d.post(sh, func() { done(nil, err) }, nil)
		return
	}
	tc := c.(*tls.Conn)
	d.cfg.Stats.Handshakes.Add(1)
	shardFd, bridge, err := socketpair()
	if err != nil {
		_ = tc.Close()
		d.post(sh, func() { done(nil, err) }, nil)
		return
	}
	d.cfg.Stats.Open.Add(1)
	adopted := make(chan bool, 1)
	d.post(sh, func() {
		conn, err := d.srv.AdoptDialed(sh, shardFd, tcpAddr(tc.RemoteAddr()), h)
		adopted <- err == nil
		done(conn, err)
	}, func() {
		_ = unix.Close(shardFd)
		adopted <- false
	})
	var ok bool
	select {
	case ok = <-adopted:
	case <-sh.Done(): // stopped before it ran the adoption
		select {
		case ok = <-adopted:
		default:
			_ = unix.Close(shardFd)
		}
	}
	if !ok {
		_ = bridge.Close()
		_ = tc.Close()
		d.cfg.Stats.Open.Add(-1)
		return
	}
	pump(tc, bridge, d.cfg.Stats)
	d.cfg.Stats.Open.Add(-1)
}

// post runs fn on sh, retrying while its inbox is full; failed runs when
// the shard cannot take it.
func (d *Dialer) post(sh *shard.Shard, fn, failed func()) {
	var err error
	for i := 0; i < postTriesMax; i++ {
		if err = sh.Post(fn); err == nil {
			return
		}
		if errors.Is(err, shard.ErrStopped) {
			break
		}
		time.Sleep(postPause) // the inbox drains as the shard runs; nothing to wait on
	}
	d.cfg.Log.Warn("tls: a dialled session cannot reach its shard", "listener", d.cfg.Name, "shard", sh.ID(), "err", err)
	if failed != nil {
		failed()
	}
}

// socketpair returns the shard's end (a non-blocking descriptor for
// netio) and the bridge's end.
func socketpair() (int, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("tlsbridge: socketpair: %w", err)
	}
	f := os.NewFile(uintptr(fds[1]), "tls bridge")
	c, err := net.FileConn(f) // dups
	_ = f.Close()
	if err != nil {
		_ = unix.Close(fds[0])
		return -1, nil, fmt.Errorf("tlsbridge: socketpair: %w", err)
	}
	return fds[0], c.(*net.UnixConn), nil
}

// pump copies both ways until the session ends: the peer's end of stream
// is passed on as a half close (the shard answers what is in flight,
// then closes), and the shard's close ends the TLS session.
func pump(tc *tls.Conn, bridge *net.UnixConn, st *Stats) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, _ := copyBuf(bridge, tc)
		st.BytesIn.Add(uint64(n))
		_ = bridge.CloseWrite()
	}()
	n, _ := copyBuf(tc, bridge)
	st.BytesOut.Add(uint64(n))
	_ = tc.Close()
	_ = bridge.Close()
	wg.Wait()
}

var bufs = sync.Pool{New: func() any { b := make([]byte, bufferBytes); return &b }}

// copyBuf copies with a pooled buffer (io.CopyBuffer without the
// ReaderFrom/WriterTo shortcuts, which would pick small buffers).
func copyBuf(dst io.Writer, src io.Reader) (int64, error) {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *bp)
}

// tcpAddr is a as a *net.TCPAddr (nil for another kind of address).
func tcpAddr(a net.Addr) *net.TCPAddr {
	ta, _ := a.(*net.TCPAddr)
	return ta
}
