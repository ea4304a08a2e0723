package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// librdkafka (Debian's kcat), unchanged, logging in to a node with
// security.auth = scram over SASL_PLAINTEXT with each mechanism Kafka
// clients configure: librdkafka uses SASL only when ApiVersions lists
// SaslHandshake from v0. A wrong password is refused and produces
// nothing. Skips when kcat is not installed (CI installs it).
func TestE2EKafkaSASLKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (Debian: apt-get install kcat)")
	}
	addrs, err := launch.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	kafka := addrs[0]
	s := startServer(t, serverOpts{kafkaAddr: kafka,
		config: "[security]\nauth = \"scram\"\nadmin_user = \"root\"\nadmin_password = \"rootpw\"\n[http]\njwt_secret = \"j\"\n"})
	s.cliOK("", "--user", "root", "--password", "rootpw", "topic", "create", "sasl-orders", "--partitions", "1")

	kc := func(stdin, mech, pass string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		all := append([]string{"-b", kafka, "-X", "security.protocol=SASL_PLAINTEXT",
			"-X", "sasl.mechanisms=" + mech, "-X", "sasl.username=root", "-X", "sasl.password=" + pass}, args...)
		cmd := exec.CommandContext(ctx, kcat, all...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mechs := []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}
	for _, m := range mechs {
		if out, err := kc(m+"\n", m, "rootpw", "-P", "-t", "sasl-orders", "-p", "0"); err != nil {
			t.Fatalf("kcat -P with %s: %v\n%s", m, err, out)
		}
	}
	if out, err := kc("wrong\n", "SCRAM-SHA-512", "nope", "-P", "-t", "sasl-orders", "-p", "0",
		"-X", "message.timeout.ms=3000"); err == nil {
		t.Fatalf("kcat with a wrong password succeeded:\n%s", out)
	}
	out, err := kc("", "SCRAM-SHA-256", "rootpw", "-C", "-t", "sasl-orders", "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%s\n")
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, out)
	}
	if got, want := strings.Fields(out), mechs; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("kcat read back %q, want %q (and nothing of the wrong password)", got, want)
	}
}
