package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/tlsbridge"
	"github.com/corestream/corestream/cluster/transport"
	"github.com/corestream/corestream/netio"
	"github.com/prometheus/client_golang/prometheus"
)

// TLS on the client, Kafka and replication listeners
// (security.tls_listeners): each is served through a tlsbridge when it
// is named, and exactly as before when not. docs/design/tls.md.

// tlsListenerNames are the listeners a nodeTLS counts, in metric order;
// replicationOut is this node's dials to its peers.
const replicationOut = "replication_out"

var tlsListenerNames = []string{config.ListenerClient, config.ListenerKafka, config.ListenerReplication, replicationOut}

// nodeTLS is the TLS of the node's framed listeners, built at New (its
// configurations are nil without a certificate). Its configurations read the certificate
// from the node's CertStore, so SIGHUP's reload applies to every
// listener's new sessions (and this node's new dials).
type nodeTLS struct {
	server *tls.Config // the listeners', with tls_client_auth
	peer   *tls.Config // this node's dials to its peers
	stats  map[string]*tlsbridge.Stats
}

// newNodeTLS builds the listeners' TLS over certs, trusting caFile for
// client certificates and peers ("" : the system's roots for peers).
func newNodeTLS(s config.Security, certs *security.CertStore) (*nodeTLS, error) {
	t := &nodeTLS{stats: map[string]*tlsbridge.Stats{}}
	for _, l := range tlsListenerNames {
		t.stats[l] = &tlsbridge.Stats{}
	}
	if certs == nil {
		return t, nil // no TLS; the counters still count TLS clients on plaintext ports
	}
	server := certs.ServerConfig()
	var pool *x509.CertPool
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: security.tls_ca_file: %v", security.ErrTLS, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: security.tls_ca_file %s holds no PEM certificate", security.ErrTLS, s.TLSCAFile)
		}
	}
	switch s.TLSClientAuth {
	case config.ClientAuthRequest:
		server.ClientAuth, server.ClientCAs = tls.VerifyClientCertIfGiven, pool
	case config.ClientAuthRequire:
		server.ClientAuth, server.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}
	current := server.GetCertificate
	peer := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool,
		// A peer that asks for a client certificate gets this node's own.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return current(nil) }}
	t.server, t.peer = server, peer
	return t, nil
}

// bridgeConfig is listener's bridge configuration.
func (n *Node) bridgeConfig(listener string, tc *tls.Config) tlsbridge.Config {
	return tlsbridge.Config{Name: listener, TLS: tc, SessionsMax: n.cfg.Network.MaxConnections,
		HandshakeTimeout: time.Duration(n.cfg.Security.TLSHandshakeTimeoutMs) * time.Millisecond,
		Log:              n.log, Stats: n.tls.stats[listener]}
}

// serveListener serves l on srv: through a TLS bridge when listener is
// named in security.tls_listeners, else directly (the plaintext path,
// unchanged).
func (n *Node) serveListener(srv *netio.Server, l *netio.Listener, listener string) error {
	if !n.cfg.Security.TLSOn(listener) {
		return srv.Serve(l)
	}
	_, err := tlsbridge.Serve(srv, l, n.bridgeConfig(listener, n.tls.server))
	if err == nil {
		n.log.Info("tls: listener serves TLS", "listener", listener, "addr", srv.Addr().String(), "client_auth", n.cfg.Security.TLSClientAuth)
	}
	return err
}

// guardPlain wraps a plaintext listener's handler so that a TLS client
// on it is told apart from an oversize frame: logged as such and counted
// (corestream_tls_refused_total{reason="not_tls"}). A TLS listener's
// handler is returned as it is.
func (n *Node) guardPlain(h netio.Handler, listener string) netio.Handler {
	if n.cfg.Security.TLSOn(listener) || n.tls == nil {
		return h
	}
	return &plainGuard{Handler: h, listener: listener, stats: n.tls.stats[listener], n: n}
}

// plainGuard is guardPlain's wrapper; only OnFrameTooLarge differs.
type plainGuard struct {
	netio.Handler
	listener string
	stats    *tlsbridge.Stats
	n        *Node
}

func (g *plainGuard) OnFrameTooLarge(c *netio.Conn, size uint32, head []byte) {
	if tlsbridge.LooksLikeTLS(size) {
		g.stats.CountRefused(tlsbridge.ReasonNotTLS)
		g.n.log.Warn("tls: a TLS client on a plaintext listener; closing (name the listener in security.tls_listeners, or connect without TLS)",
			"listener", g.listener, "remote", c.RemoteAddr())
		return
	}
	g.Handler.OnFrameTooLarge(c, size, head)
}

// peerTLS is the replication transport's TLS (nil: plaintext): the
// replication listener's bridge and this node's dials to its peers, on
// the listeners' certificate and counters.
func (n *Node) peerTLS() *transport.TLS {
	if !n.cfg.Security.TLSOn(config.ListenerReplication) {
		return nil
	}
	bridge := func(listener string, tc *tls.Config) tlsbridge.Config {
		return tlsbridge.Config{Name: listener, TLS: tc, HandshakeTimeout: time.Duration(n.cfg.Security.TLSHandshakeTimeoutMs) * time.Millisecond,
			Log: n.log, Stats: n.tls.stats[listener]}
	}
	return &transport.TLS{Serve: bridge(config.ListenerReplication, n.tls.server), Dial: bridge(replicationOut, n.tls.peer)}
}

var tlsHandshakesDesc = prometheus.NewDesc("corestream_tls_handshakes_total",
	"TLS sessions that completed their handshake, by listener (replication_out: this node's dials to its peers).", []string{"listener"}, nil)
var tlsRefusedDesc = prometheus.NewDesc("corestream_tls_refused_total",
	"TLS sessions refused, by listener and reason: not_tls (plaintext on a TLS port, or TLS on a plaintext one), certificate, timeout, limit, other.",
	[]string{"listener", "reason"}, nil)
var tlsOpenDesc = prometheus.NewDesc("corestream_tls_sessions_open", "TLS sessions open (handshaking or bridged), by listener.", []string{"listener"}, nil)

// tlsCollector exports the listeners' TLS counters at the scrape.
type tlsCollector struct{ t *nodeTLS }

func (c tlsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tlsHandshakesDesc
	ch <- tlsRefusedDesc
	ch <- tlsOpenDesc
}

func (c tlsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range tlsListenerNames {
		st := c.t.stats[l]
		ch <- prometheus.MustNewConstMetric(tlsHandshakesDesc, prometheus.CounterValue, float64(st.Handshakes.Load()), l)
		ch <- prometheus.MustNewConstMetric(tlsOpenDesc, prometheus.GaugeValue, float64(st.Open.Load()), l)
		for _, r := range tlsbridge.Reasons() {
			ch <- prometheus.MustNewConstMetric(tlsRefusedDesc, prometheus.CounterValue, float64(st.Refused(r)), l, r.String())
		}
	}
}

// registerTLSMetrics adds the TLS counters to reg.
func (n *Node) registerTLSMetrics(reg *prometheus.Registry) {
	if n.tls == nil {
		return
	}
	reg.MustRegister(tlsCollector{n.tls})
}
