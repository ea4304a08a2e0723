package launch

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/corestream/corestream/cluster/tlsbridge"
)

// certTTL is how long the test certificates of Options.TLS are valid.
const certTTL = 365 * 24 * time.Hour

func nodeCertFile(n Node) string { return filepath.Join(n.DataDir, "tls", "node.pem") }
func nodeKeyFile(n Node) string  { return filepath.Join(n.DataDir, "tls", "node-key.pem") }

// writeTLS generates the test CA into CAFile and each node's certificate
// and key into its data directory (tls/node.pem, tls/node-key.pem),
// keeping a CA already there (a cluster directory used again).
func (p *Plan) writeTLS() error {
	if err := os.MkdirAll(filepath.Dir(p.CAFile), 0o755); err != nil {
		return fmt.Errorf("launch: tls: %w", err)
	}
	ca, err := tlsbridge.NewCA("corestream localcluster test CA", time.Now().Add(-time.Hour), time.Now().Add(certTTL))
	if err != nil {
		return fmt.Errorf("launch: tls: %w", err)
	}
	if err := os.WriteFile(p.CAFile, ca.PEM, 0o644); err != nil {
		return fmt.Errorf("launch: tls: %w", err)
	}
	for _, n := range p.Nodes {
		if err := os.MkdirAll(filepath.Dir(nodeCertFile(n)), 0o755); err != nil {
			return fmt.Errorf("launch: node %d: tls: %w", n.ID, err)
		}
		if err := ca.WriteIssued(nodeCertFile(n), nodeKeyFile(n), fmt.Sprintf("corestream node %d", n.ID),
			[]string{p.Options.Host, "localhost"}, certTTL); err != nil {
			return fmt.Errorf("launch: node %d: tls: %w", n.ID, err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	p.clientTLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return nil
}

// ClientTLS trusts the plan's CA (nil without Options.TLS, or before
// Write).
func (p *Plan) ClientTLS() *tls.Config { return p.clientTLS }
