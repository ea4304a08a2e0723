package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/tlsbridge"
)

// testPKI is a CA with a node certificate for 127.0.0.1 in dir.
type testPKI struct {
	ca                        *tlsbridge.CA
	caFile, certFile, keyFile string
}

func newTestPKI(t testing.TB, dir string) *testPKI {
	t.Helper()
	ca, err := tlsbridge.NewCA("corestream test CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{ca: ca, caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "node.pem"), keyFile: filepath.Join(dir, "node-key.pem")}
	writeFile(t, p.caFile, ca.PEM)
	if err := ca.WriteIssued(p.certFile, p.keyFile, "node", []string{"127.0.0.1", "localhost"}, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientTLS trusts the PKI's CA, presenting a certificate issued for
// name valid until notAfter when name is not empty.
func (p *testPKI) clientTLS(t testing.TB, name string, notAfter time.Time) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if name != "" {
		c, k, err := p.ca.Issue(name, nil, notAfter.Add(-48*time.Hour), notAfter)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// tlsOn serves TLS on listeners with the PKI's node certificate.
func (p *testPKI) tlsOn(c *config.Config, listeners ...string) {
	c.Security.TLSCertFile, c.Security.TLSKeyFile, c.Security.TLSCAFile = p.certFile, p.keyFile, p.caFile
	c.Security.TLSListeners = listeners
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// dialTLSClient connects the SDK to addr with tc (nil: plaintext).
func dialTLSClient(ctx context.Context, addr string, tc *tls.Config, user, pass string) (*client.Client, error) {
	return client.DialConfig(ctx, client.Config{Brokers: []string{addr}, TLS: tc, Username: user, Password: pass,
		DialTimeout: 5 * time.Second, RetryAttemptsMax: 1})
}

// The native and Kafka listeners over TLS on one node with auth = scram:
// the SDK (SCRAM) and franz-go (SASL PLAIN over TLS, kgo.DialTLSConfig)
// produce and read back; then every kind of bad input is refused, logged
// with the peer's address and counted in /metrics, while a connection
// opened before keeps working: plaintext to the TLS ports, a client
// trusting another CA, and a TLS client on a plaintext port.
func TestTLSNativeAndKafkaListeners(t *testing.T) {
	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		scramNode(c)
		withKafka(c)
		pki.tlsOn(c, config.ListenerClient, config.ListenerKafka)
	})
	waitUser(t, n.svc, "root", true)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	good := pki.clientTLS(t, "", time.Time{})

	cl, err := dialTLSClient(ctx, n.ClientAddr(), good, "root", "rootpw")
	if err != nil {
		t.Fatalf("SDK over TLS: %v", err)
	}
	defer cl.Close()
	createTopic(t, ctx, cl, client.TopicSpec{Name: "secure", Partitions: 2, ReplicationFactor: 1})
	acked := produceAll(t, ctx, cl, "secure", 0, 200)
	sameValues(t, consumeAll(t, ctx, cl, "secure", 2), acked)

	kc := kafkaClient(t, []string{n.KafkaAddr()}, kgo.DialTLSConfig(good),
		kgo.SASL(plain.Auth{User: "root", Pass: "rootpw"}.AsMechanism()), kgo.DefaultProduceTopic("secure"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"secure": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	if err := kc.ProduceSync(ctx, &kgo.Record{Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatalf("franz-go SASL PLAIN over TLS: %v", err)
	}
	got := consumeN(t, ctx, kc, 201)
	if !hasValue(got, "over tls") {
		t.Fatalf("franz-go read %d records without its own", len(got))
	}
	stats := n.tls.stats
	if stats[config.ListenerClient].Handshakes.Load() == 0 || stats[config.ListenerKafka].Handshakes.Load() == 0 {
		t.Fatal("no handshake counted")
	}

	// Plaintext to the TLS ports.
	if c, err := dialTLSClient(ctx, n.ClientAddr(), nil, "root", "rootpw"); err == nil {
		c.Close()
		t.Fatal("a plaintext SDK client was served by the TLS port")
	} else if !strings.Contains(err.Error(), "does its port serve TLS") {
		t.Errorf("plaintext client's error gives no hint: %v", err)
	}
	plain := kafkaClient(t, []string{n.KafkaAddr()}, kgo.RetryTimeout(time.Second), kgo.SASL(plain.Auth{User: "root", Pass: "rootpw"}.AsMechanism()))
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	if err := plain.Ping(pctx); err == nil {
		t.Error("a plaintext Kafka client was served by the TLS port")
	}
	pcancel()
	waitFor(t, 10*time.Second, "plaintext refusals counted", func() bool {
		return stats[config.ListenerClient].Refused(tlsbridge.ReasonNotTLS) > 0 && stats[config.ListenerKafka].Refused(tlsbridge.ReasonNotTLS) > 0
	})

	// A client that trusts another CA refuses the node's certificate;
	// the node sees the handshake fail.
	other := newTestPKI(t, t.TempDir())
	if c, err := dialTLSClient(ctx, n.ClientAddr(), other.clientTLS(t, "", time.Time{}), "root", "rootpw"); err == nil {
		c.Close()
		t.Fatal("a client trusting another CA connected")
	} else if !errors.Is(err, client.ErrTLS) {
		t.Errorf("wrong-CA error does not wrap client.ErrTLS: %v", err)
	}
	waitFor(t, 10*time.Second, "the wrong CA's refusal counted", func() bool {
		return stats[config.ListenerClient].Refused(tlsbridge.ReasonCertificate) > 0
	})

	// The connection opened first still serves, and so does a new one.
	if _, err := cl.Metadata(ctx); err != nil {
		t.Fatalf("the first TLS client after the refusals: %v", err)
	}
	acked2 := produceAll(t, ctx, cl, "secure", 200, 20)
	if len(acked2) == 0 {
		t.Fatal("no produce after the refusals")
	}
	for _, want := range []string{"listener=client", "reason=not_tls", "reason=certificate", "remote=127.0.0.1:"} {
		if len(n.log.lines("tls: session refused", want)) == 0 {
			t.Errorf("no refusal logged with %q:\n%s", want, n.log)
		}
	}
	rec := httptest.NewRecorder()
	n.metricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`corestream_tls_refused_total{listener="client",reason="not_tls"}`, `corestream_tls_handshakes_total{listener="kafka"}`,
		`corestream_tls_refused_total{listener="client",reason="certificate"}`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func hasValue(rs []*kgo.Record, v string) bool {
	for _, r := range rs {
		if string(r.Value) == v {
			return true
		}
	}
	return false
}

// A TLS client on a plaintext port (native and Kafka) is told apart from
// an oversize frame: logged as such with its address and counted
// (not_tls), and the node serves a plaintext client after it.
func TestTLSClientOnPlaintextPort(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if c, err := dialTLSClient(ctx, n.ClientAddr(), pki.clientTLS(t, "", time.Time{}), "", ""); err == nil {
		c.Close()
		t.Fatal("a TLS client was served by a plaintext port")
	} else if !errors.Is(err, client.ErrTLS) {
		t.Errorf("error does not wrap client.ErrTLS: %v", err)
	}
	kc := kafkaClient(t, []string{n.KafkaAddr()}, kgo.DialTLSConfig(pki.clientTLS(t, "", time.Time{})), kgo.RetryTimeout(time.Second))
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	if err := kc.Ping(pctx); err == nil {
		t.Error("a TLS Kafka client was served by a plaintext port")
	}
	pcancel()
	waitFor(t, 10*time.Second, "TLS clients on plaintext ports counted", func() bool {
		return n.tls.stats[config.ListenerClient].Refused(tlsbridge.ReasonNotTLS) > 0 && n.tls.stats[config.ListenerKafka].Refused(tlsbridge.ReasonNotTLS) > 0
	})
	if len(n.log.lines("a TLS client on a plaintext listener", "remote=127.0.0.1:")) == 0 {
		t.Errorf("not logged:\n%s", n.log)
	}
	cl, err := dialTLSClient(ctx, n.ClientAddr(), nil, "", "")
	if err != nil {
		t.Fatalf("plaintext client after the TLS ones: %v", err)
	}
	cl.Close()
}

// security.tls_client_auth = require: a client without a certificate and
// one whose certificate has expired are refused (counted as certificate
// refusals), one with a valid certificate is served; tls_client_auth =
// request serves a client without one.
func TestTLSClientCertificates(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		pki.tlsOn(c, config.ListenerClient)
		c.Security.TLSClientAuth = config.ClientAuthRequire
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, tc := range map[string]*tls.Config{
		"no certificate":      pki.clientTLS(t, "", time.Time{}),
		"expired certificate": pki.clientTLS(t, "app", time.Now().Add(-time.Hour)),
	} {
		if c, err := dialTLSClient(ctx, n.ClientAddr(), tc, "", ""); err == nil {
			c.Close()
			t.Errorf("%s: served", name)
		}
	}
	waitFor(t, 10*time.Second, "both refusals counted", func() bool {
		return n.tls.stats[config.ListenerClient].Refused(tlsbridge.ReasonCertificate) >= 2
	})
	cl, err := dialTLSClient(ctx, n.ClientAddr(), pki.clientTLS(t, "app", time.Now().Add(time.Hour)), "", "")
	if err != nil {
		t.Fatalf("valid client certificate: %v", err)
	}
	cl.Close()

	m := runNode(t, t.TempDir(), func(c *config.Config) {
		pki.tlsOn(c, config.ListenerClient)
		c.Security.TLSClientAuth = config.ClientAuthRequest
	})
	cl, err = dialTLSClient(ctx, m.ClientAddr(), pki.clientTLS(t, "", time.Time{}), "", "")
	if err != nil {
		t.Fatalf("request, no client certificate: %v", err)
	}
	cl.Close()
}

// A cluster whose replication links (and client ports) run TLS, with
// client certificates required: each node dials its peers with its own
// certificate, partitions replicate and every acknowledged record reads
// back. (A dial refused for its CA is tlsbridge's TestDialer.)
func TestTLSReplicationCluster(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	tc := startCluster(t, 3, func(c *config.Config) {
		pki.tlsOn(c, config.ListenerClient, config.ListenerReplication)
		c.Security.TLSClientAuth = config.ClientAuthRequire
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, err := client.DialConfig(ctx, client.Config{Brokers: tc.brokers(), TLS: pki.clientTLS(t, "app", time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createTopic(t, ctx, cl, client.TopicSpec{Name: "replicated", Partitions: 3, ReplicationFactor: 3})
	acked := produceAll(t, ctx, cl, "replicated", 0, 300)
	sameValues(t, consumeAll(t, ctx, cl, "replicated", 3), acked)
	for i, n := range tc.nodes {
		if n.tls.stats[config.ListenerReplication].Handshakes.Load() == 0 || n.tls.stats[replicationOut].Handshakes.Load() == 0 {
			t.Errorf("node %d: no replication handshake counted", i+1)
		}
	}
}

// SIGHUP's reload (ReloadTLS) applies to the native and Kafka listeners'
// new sessions: after the files are replaced, a new session is served
// the new certificate.
func TestTLSListenersReload(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		withKafka(c)
		pki.tlsOn(c, config.ListenerClient, config.ListenerKafka)
	})
	served := func(addr string) string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, pki.clientTLS(t, "", time.Time{}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := served(n.ClientAddr()); cn != "node" {
		t.Fatalf("first certificate %q", cn)
	}
	if err := pki.ca.WriteIssued(pki.certFile, pki.keyFile, "renewed", []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := n.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{n.ClientAddr(), n.KafkaAddr()} {
		if cn := served(addr); cn != "renewed" {
			t.Errorf("%s after the reload: %q", addr, cn)
		}
	}
}

// security.tls_client_auth = "require" reaches HTTPS too: a client
// without a certificate is refused at the handshake, one with a
// certificate of the cluster's CA is served, and a request that reaches a
// node which is not the partition's primary is forwarded to it in one hop
// (the forwarding node presents its own certificate).
func TestTLSHTTPClientCertificates(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	ports := freePorts(t, 3)
	tc := startCluster(t, 3, func(c *config.Config) {
		pki.tlsOn(c, config.ListenerHTTP)
		c.Security.TLSClientAuth = config.ClientAuthRequire
		c.HTTP.JWTSecret = "jwt"
		for i := range c.Cluster.Nodes {
			c.Cluster.Nodes[i].HTTPAddr = ports[i]
		}
		c.Node.HTTPAddr = ports[c.Node.ID-1]
	})
	httpsClient := func(cert string) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: pki.clientTLS(t, cert, time.Now().Add(time.Hour)), DisableKeepAlives: true}}
	}
	if _, err := httpsClient("").Get("https://" + tc.nodes[0].HTTPAddr() + "/v1/health"); err == nil {
		t.Fatal("an HTTPS client without a certificate was served")
	}
	app := httpsClient("app")
	do := func(method, url, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := app.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	base := func(i int) string { return "https://" + tc.nodes[i].HTTPAddr() }
	clusterWait(t, 30*time.Second, "create over HTTPS", func() bool {
		code, _ := do("POST", base(2)+"/v1/topics", `{"name":"web","partitions":1,"replication_factor":3}`)
		return code == http.StatusCreated
	})
	served := map[float64]bool{}
	for i := 0; i < 3; i++ {
		clusterWait(t, 20*time.Second, "produce over HTTPS", func() bool {
			code, body := do("POST", base(i)+"/v1/topics/web/partitions/0/records", `{"records":[{"value_text":"v"}]}`)
			if code != http.StatusOK {
				return false
			}
			served[body["served_by"].(float64)] = true
			return true
		})
	}
	if len(served) != 1 {
		t.Fatalf("produce through every node served by %v, want the one primary", served)
	}
}
