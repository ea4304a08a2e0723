package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
)

// TLS of the HTTP API (security.tls_cert_file, tls_key_file,
// tls_ca_file). The certificate is read at start and again on Reload
// (SIGHUP), so a renewed certificate is served without a restart; a
// reload that fails keeps the certificate in use.

// ErrTLS wraps every TLS configuration error; the message names the file.
var ErrTLS = errors.New("security: tls")

// CertStore holds the certificate a listener serves. Safe for concurrent
// use; mu guards cert.
type CertStore struct {
	certFile, keyFile string
	mu                sync.RWMutex
	cert              *tls.Certificate
}

// LoadCertStore reads the certificate and key files.
func LoadCertStore(certFile, keyFile string) (*CertStore, error) {
	s := &CertStore{certFile: certFile, keyFile: keyFile}
	return s, s.Reload()
}

// Reload reads the files again; on an error the certificate in use stays.
func (s *CertStore) Reload() error {
	c, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return fmt.Errorf("%w: security.tls_cert_file %s, tls_key_file %s: %v", ErrTLS, s.certFile, s.keyFile, err)
	}
	s.mu.Lock()
	s.cert = &c
	s.mu.Unlock()
	return nil
}

// ServerConfig serves the store's current certificate (TLS 1.2 and up).
func (s *CertStore) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.cert, nil
	}}
}

// ClientConfig trusts the CA certificates of caFile ("" : the system's
// roots), for one node calling another over TLS.
func ClientConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: security.tls_ca_file: %v", ErrTLS, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: security.tls_ca_file %s holds no PEM certificate", ErrTLS, caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
