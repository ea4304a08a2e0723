package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
)

// writeCert writes a self-signed certificate for 127.0.0.1 with serial
// and its key to dir, and returns the certificate.
func writeCert(t testing.TB, dir string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "corestream test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// The HTTP API over TLS: a client that trusts the certificate is served,
// a plaintext request to the TLS port is refused with a reason and the
// node carries on, and SIGHUP's reload serves a renewed certificate to
// new connections; a reload of a broken file keeps the old one.
func TestHTTPTLSAndReload(t *testing.T) {
	dir := t.TempDir()
	first := writeCert(t, dir, 1)
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		c.Node.HTTPAddr = "127.0.0.1:0"
		c.Security.TLSCertFile, c.Security.TLSKeyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	})
	served := func(trust *x509.Certificate) (*x509.Certificate, error) {
		pool := x509.NewCertPool()
		pool.AddCert(trust)
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		resp, err := cl.Get("https://" + n.HTTPAddr() + "/v1/health")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("health over TLS: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0], nil
	}
	if c, err := served(first); err != nil || c.SerialNumber.Int64() != 1 {
		t.Fatalf("over TLS: %v", err)
	}
	code, _, raw := httpRaw(t, "GET", "http://"+n.HTTPAddr()+"/v1/health", "", nil)
	if code != http.StatusBadRequest {
		t.Fatalf("plaintext to the TLS port: %d %s", code, raw)
	}

	second := writeCert(t, dir, 2)
	if err := n.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if c, err := served(second); err != nil || c.SerialNumber.Int64() != 2 {
		t.Fatalf("after the reload: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.ReloadTLS(); err == nil {
		t.Fatal("a broken certificate file reloaded")
	}
	if c, err := served(second); err != nil || c.SerialNumber.Int64() != 2 {
		t.Fatalf("after a failed reload: %v", err)
	}
}
