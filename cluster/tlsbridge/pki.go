package tlsbridge

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// A test certificate authority, for tools/localcluster -tls and tests:
// P-256 keys, certificates valid for server and client authentication
// (a node presents the same certificate to the peers it dials). Not for
// production: a real cluster's certificates come from the operator's CA.

// CA is a certificate authority that issues node certificates.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// PEM is Cert, PEM encoded (the tls_ca_file).
	PEM []byte
}

// NewCA makes a self-signed CA named name, valid from notBefore to
// notAfter.
func NewCA(name string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tlsbridge: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes a certificate for name valid for hosts (IP addresses or
// DNS names) from notBefore to notAfter, signed by ca; it returns the
// certificate and its key, PEM encoded.
func (ca *CA) Issue(name string, hosts []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsbridge: certificate for %s: %w", name, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// WriteIssued issues a certificate for name and hosts valid for ttl from
// an hour ago, and writes it and its key to certFile and keyFile (mode
// 0600).
func (ca *CA) WriteIssued(certFile, keyFile, name string, hosts []string, ttl time.Duration) error {
	now := time.Now()
	c, k, err := ca.Issue(name, hosts, now.Add(-time.Hour), now.Add(ttl))
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, c, 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, k, 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
