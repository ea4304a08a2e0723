package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
)

// BenchmarkSecurity measures what security costs one request at a time
// over loopback (fsync off): a produce through the Go SDK as an
// authenticated user with rules (every call checked by the Guard) against
// a node without authentication, and a produce over the HTTP API with TLS
// against plain HTTP (keep-alive: the handshake is paid once). Reproduce:
// go test -run '^$' -bench BenchmarkSecurity -benchtime 3000x ./cluster/node
func BenchmarkSecurity(b *testing.B) {
	fast := func(c *config.Config) { c.Storage.Fsync = "never" }
	sdkProduce := func(b *testing.B, n *testNode, user, pw string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cl, err := client.DialConfig(ctx, client.Config{Brokers: []string{n.ClientAddr()}, Username: user, Password: pw})
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		p, err := cl.NewProducer(ctx, client.ProducerConfig{Linger: -1}) // one record, sent at once
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		rec := client.Record{Topic: "bench", Value: []byte("a value of some thirty-two bytes")}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := p.Produce(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("native-produce/auth-none", func(b *testing.B) {
		n := runNode(b, b.TempDir(), fast)
		svcCreate(b, n.svc, "bench", 1)
		sdkProduce(b, n, "", "")
	})
	b.Run("native-produce/scram-user", func(b *testing.B) {
		n := runNode(b, b.TempDir(), func(c *config.Config) { fast(c); scramNode(c) })
		waitUser(b, n.svc, "root", true)
		svcCreate(b, n.svc, "bench", 1)
		if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: "app", Password: "pw",
			Rules: []security.Rule{{Allow: true, Op: security.OpRead, Prefix: true}, {Allow: true, Op: security.OpWrite, Topic: "bench"}}}); err != nil {
			b.Fatal(err)
		}
		sdkProduce(b, n, "app", "pw")
	})
	httpProduce := func(b *testing.B, tlsOn bool) {
		dir := b.TempDir()
		var cert *x509.Certificate
		n := runNode(b, b.TempDir(), func(c *config.Config) {
			fast(c)
			c.Node.HTTPAddr = "127.0.0.1:0"
			if tlsOn {
				cert = writeCert(b, dir, 1)
				c.Security.TLSCertFile, c.Security.TLSKeyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
			}
		})
		svcCreate(b, n.svc, "bench", 1)
		tr := &http.Transport{}
		url := "http://" + n.HTTPAddr() + "/v1/topics/bench/partitions/0/records"
		if tlsOn {
			pool := x509.NewCertPool()
			pool.AddCert(cert)
			tr.TLSClientConfig = &tls.Config{RootCAs: pool}
			url = "https" + strings.TrimPrefix(url, "http")
		}
		cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		body := `{"records":[{"value_text":"a value of some thirty-two bytes"}]}`
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			resp, err := cl.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body) // read to the end: the connection is reused
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("produce: %d", resp.StatusCode)
			}
		}
	}
	b.Run("http-produce/plain", func(b *testing.B) { httpProduce(b, false) })
	b.Run("http-produce/tls", func(b *testing.B) { httpProduce(b, true) })
}
