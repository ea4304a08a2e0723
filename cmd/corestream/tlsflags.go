package main

import (
	"crypto/tls"

	"github.com/spf13/pflag"

	"github.com/corestream/corestream/client"
)

// Environment variables of the TLS flags.
const (
	envTLSCA   = "CORESTREAM_TLS_CA"
	envTLSCert = "CORESTREAM_TLS_CERT"
	envTLSKey  = "CORESTREAM_TLS_KEY"
)

// tlsFlags are the global flags that connect to a cluster whose client
// port serves TLS (security.tls_listeners names client).
type tlsFlags struct {
	on                bool
	ca, cert, keyFile string
}

func (t *tlsFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&t.on, "tls", false, "connect with TLS (a cluster whose security.tls_listeners names client); implied by --tls-ca and $"+envTLSCA)
	f.StringVar(&t.ca, "tls-ca", "", "PEM file of the CA that signed the nodes' certificates (default $"+envTLSCA+", else the system's roots)")
	f.StringVar(&t.cert, "tls-cert", "", "PEM client certificate, for nodes with security.tls_client_auth (default $"+envTLSCert+")")
	f.StringVar(&t.keyFile, "tls-key", "", "PEM key of --tls-cert (default $"+envTLSKey+")")
}

// config is the client's TLS (nil: plaintext), with the environment
// filling what the flags left empty.
func (t *tlsFlags) config(getenv func(string) string) (*tls.Config, error) {
	for _, v := range []struct {
		dst *string
		env string
	}{{&t.ca, envTLSCA}, {&t.cert, envTLSCert}, {&t.keyFile, envTLSKey}} {
		if *v.dst == "" {
			*v.dst = getenv(v.env)
		}
	}
	if !t.on && t.ca == "" && t.cert == "" {
		return nil, nil
	}
	if (t.cert == "") != (t.keyFile == "") {
		return nil, usageErrorf("--tls-cert and --tls-key go together")
	}
	return client.TLSConfig(t.ca, t.cert, t.keyFile)
}
