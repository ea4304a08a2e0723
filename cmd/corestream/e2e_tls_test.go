package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/tlsbridge"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// A node whose client and Kafka ports serve TLS, driven by the CLI with
// --tls-ca (and $CORESTREAM_TLS_CA) and by kcat with
// security.protocol=SSL: both write and read the same records; the CLI
// without TLS is refused with a hint to use it.
func TestE2ETLSListeners(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsbridge.NewCA("e2e CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node.pem"), filepath.Join(dir, "node-key.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteIssued(certFile, keyFile, "node", []string{"127.0.0.1", "localhost"}, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	addrs, err := launch.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	kafka := addrs[0]
	s := startServer(t, serverOpts{kafkaAddr: kafka, config: fmt.Sprintf(
		"[security]\ntls_cert_file = %q\ntls_key_file = %q\ntls_ca_file = %q\ntls_listeners = [\"client\", \"kafka\"]\n", certFile, keyFile, caFile)})

	s.cliOK("", "--tls-ca", caFile, "topic", "create", "secure", "--partitions", "1")
	s.cliOK("a\nb\n", "--tls-ca", caFile, "produce", "secure")
	code, out, errs := runBin(t, "", "--brokers", s.addr, "--timeout", "5s", "topic", "list")
	if code == 0 || !strings.Contains(errs, "does its port serve TLS") {
		t.Fatalf("plaintext CLI on a TLS port: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}

	if kcat, err := exec.LookPath("kcat"); err == nil {
		run := func(stdin string, args ...string) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", kafka, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + caFile}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		run("c\n", "-P", "-t", "secure", "-p", "0")
		got := run("", "-C", "-t", "secure", "-o", "beginning", "-e", "-q", "-f", "%s\n")
		if got != "a\nb\nc\n" {
			t.Errorf("kcat over TLS read %q", got)
		}
	} else {
		t.Log("kcat is not installed: the Kafka port over TLS is tested with franz-go only (cluster/node)")
	}
	// The CA from the environment, as scripts set it.
	t.Setenv(envTLSCA, caFile) // the child inherits it
	code, out, errs = s.cli("", "consume", "secure", "--partition", "0", "--json", "--count", "2")
	if code != 0 || !strings.Contains(out, `"value":"a"`) {
		t.Fatalf("consume with $%s: exit %d\nstdout: %s\nstderr: %s", envTLSCA, code, out, errs)
	}
}
