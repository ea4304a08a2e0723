package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/tlsbridge"
)

// The TLS flags: nothing set is plaintext; --tls alone trusts the
// system's roots; a CA from the flag or the environment implies TLS; a
// client certificate needs its key; an unreadable CA names the problem.
func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsbridge.NewCA("flags CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caFile, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteIssued(cert, key, "cli", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name    string
		flags   tlsFlags
		env     map[string]string
		tls     bool
		roots   bool
		certs   int
		wantErr string
	}{
		{name: "none"},
		{name: "--tls", flags: tlsFlags{on: true}, tls: true},
		{name: "--tls-ca", flags: tlsFlags{ca: caFile}, tls: true, roots: true},
		{name: "env CA", env: map[string]string{envTLSCA: caFile}, tls: true, roots: true},
		{name: "client certificate", flags: tlsFlags{ca: caFile, cert: cert, keyFile: key}, tls: true, roots: true, certs: 1},
		{name: "certificate without key", flags: tlsFlags{ca: caFile, cert: cert}, wantErr: "--tls-cert and --tls-key go together"},
		{name: "missing CA", flags: tlsFlags{ca: filepath.Join(dir, "nope.pem")}, wantErr: "TLS CA file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.flags
			got, err := f.config(env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tc.tls {
				t.Fatalf("TLS %v, want %v", got != nil, tc.tls)
			}
			if got != nil && ((got.RootCAs != nil) != tc.roots || len(got.Certificates) != tc.certs) {
				t.Fatalf("roots %v, %d certificates", got.RootCAs != nil, len(got.Certificates))
			}
		})
	}
}
