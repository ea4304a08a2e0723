package node

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/httpapi"
	"github.com/corestream/corestream/cluster/kafka"
	"github.com/corestream/corestream/cluster/native"
	"github.com/corestream/corestream/cluster/security"
)

// The node's security wiring (docs/security.md): one failed-login
// limiter shared by every listener, the native protocol's authentication,
// and the warning for a node that anyone who can reach it may empty.

// newLoginLimiter is the limiter of security.login_failures_max.
func newLoginLimiter(cfg config.Security) *security.Limiter {
	return security.NewLimiter(cfg.LoginFailuresMax, time.Duration(cfg.LoginFailureWindowMs)*time.Millisecond)
}

// nativeAuth is the native listener's authentication (nil: auth none).
func (n *Node) nativeAuth() *native.Auth {
	if n.cfg.Security.Auth != config.AuthSCRAM {
		return nil
	}
	return &native.Auth{Users: n.svc, Limiter: n.logins, Now: n.clock.Now}
}

// httpAuth is the HTTP API's authentication (nil: auth none).
func (n *Node) httpAuth() *httpapi.Auth {
	if n.cfg.Security.Auth != config.AuthSCRAM {
		return nil
	}
	return &httpapi.Auth{Users: n.svc, Limiter: n.logins, Now: n.clock.Now,
		TokenTTL: time.Duration(n.cfg.Security.TokenTTLMs) * time.Millisecond}
}

// kafkaAuth is the Kafka listener's SASL (nil: auth none).
func (n *Node) kafkaAuth() *kafka.Auth {
	if n.cfg.Security.Auth != config.AuthSCRAM {
		return nil
	}
	return &kafka.Auth{Users: n.svc, Limiter: n.logins, Now: n.clock.Now}
}

// warnUnauthenticated logs a warning for each listener bound to an
// address other machines can reach while security.auth is none.
func (n *Node) warnUnauthenticated(listeners map[string]string) {
	if n.cfg.Security.Auth != config.AuthNone {
		return
	}
	for key, addr := range listeners {
		if addr != "" && !loopback(addr) {
			n.log.Warn("security.auth is none and a listener is bound to a non-loopback address: anyone who can reach it may produce, read and delete every topic; set security.auth = \"scram\" (docs/security.md)",
				"listener", key, "addr", addr)
		}
	}
}

// loopback reports whether addr (HOST:PORT) binds only the loopback
// interface; a wildcard or a name other than localhost does not.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loadTLS reads the HTTP API's certificate (security.tls_cert_file).
func (n *Node) loadTLS() error {
	s := n.cfg.Security
	if s.TLSCertFile == "" {
		n.tls, _ = newNodeTLS(s, nil)
		return nil
	}
	certs, err := security.LoadCertStore(s.TLSCertFile, s.TLSKeyFile)
	if err != nil {
		return err
	}
	if n.tls, err = newNodeTLS(s, certs); err != nil {
		return err
	}
	client, err := security.ClientConfig(s.TLSCAFile)
	if err != nil {
		return err
	}
	if certs != nil {
		// A node forwarding an HTTP request to another presents its own
		// certificate when asked (security.tls_client_auth on HTTP).
		client.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return certs.ServerConfig().GetCertificate(nil)
		}
	}
	n.certs, n.clientTLS = certs, client
	return nil
}

// serverTLS is the HTTP API's TLS configuration (nil: plain HTTP): the
// same as the framed listeners', so security.tls_client_auth asks HTTPS
// clients for a certificate too, and SIGHUP's reload reaches it.
func (n *Node) serverTLS() *tls.Config {
	if n.certs == nil || !n.cfg.Security.TLSOn(config.ListenerHTTP) {
		return nil
	}
	return n.tls.server.Clone()
}

// ReloadTLS reads the certificate and key files again (on SIGHUP): new
// connections get the new certificate; on an error the old one stays.
func (n *Node) ReloadTLS() error {
	if n.certs == nil {
		return nil
	}
	if err := n.certs.Reload(); err != nil {
		n.log.Error("security: TLS certificate not reloaded; the previous one is still served", "err", err)
		return err
	}
	n.log.Info("security: TLS certificate reloaded", "cert_file", n.cfg.Security.TLSCertFile)
	return nil
}
