package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// ErrTLS is returned when the TLS handshake with a node fails: its
// certificate is not trusted (Config.TLS's RootCAs), has expired or names
// another host, the node wants a client certificate, or its port does not
// serve TLS. Retrying does not help until the configuration changes.
var ErrTLS = errors.New("client: TLS handshake failed")

// TLSConfig builds a Config.TLS from PEM files: caFile is the CA that
// signed the nodes' certificates ("" : the system's roots); certFile and
// keyFile, both or neither, are this client's certificate for a node that
// asks for one (security.tls_client_auth).
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("client: TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: TLS CA file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("client: a TLS client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client: TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// startTLS runs the TLS handshake over nc with the node at addr (its host
// is the name checked, unless cfg names one) within ctx.
func startTLS(ctx context.Context, nc net.Conn, cfg *tls.Config, addr string) (net.Conn, error) {
	c := cfg
	if c.ServerName == "" {
		c = cfg.Clone()
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		c.ServerName = host
	}
	tc := tls.Client(nc, c)
	if err := tc.HandshakeContext(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w with %s: %w (is its port serving TLS, and is its certificate signed by the CA given?)", ErrTLS, addr, err)
	}
	return tc, nil
}

// plaintextHint explains a plaintext handshake cut short, which is what a
// node whose port serves TLS does to a client without Config.TLS.
func plaintextHint(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w (the node closed the connection: does its port serve TLS? then set Config.TLS, or --tls in the CLI)", err)
	}
	return err
}
