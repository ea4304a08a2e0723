package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// librdkafka (Debian's kcat, and confluent-kafka for Python), unchanged, logging in to a node with
// security.auth = scram over SASL_PLAINTEXT with each mechanism Kafka
// clients configure: librdkafka uses SASL only when ApiVersions lists
// SaslHandshake from v0. A wrong password is refused and produces
// nothing. Skips when kcat is not installed (CI installs it).
func TestE2EKafkaSASLLibrdkafka(t *testing.T) {
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

	// confluent-kafka for Python (librdkafka too), with the system's
	// interpreter, which sees Debian's packages.
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import confluent_kafka").Run() != nil {
		t.Log("python3-confluent-kafka is not installed for /usr/bin/python3: its part is skipped")
		return
	}
	script := `
import sys
from confluent_kafka import Producer, Consumer
conf = {"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "root", "sasl.password": sys.argv[2]}
p = Producer(dict(conf, **{"message.timeout.ms": 5000}))
errs = []
p.produce("sasl-orders", b"confluent", partition=0, on_delivery=lambda e, m: errs.append(e))
p.flush(10)
if errs[0] is not None:
    print("delivery failed:", errs[0]); sys.exit(1)
c = Consumer(dict(conf, **{"group.id": "py-sasl", "auto.offset.reset": "earliest"}))
c.assign([__import__("confluent_kafka").TopicPartition("sasl-orders", 0, 0)])
got = []
for _ in range(100):
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    got.append(m.value().decode())
    if len(got) == 4:
        break
print(" ".join(got))
c.close()
`
	runPy := func(pass string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b, err := exec.CommandContext(ctx, py, "-c", script, kafka, pass).CombinedOutput()
		return string(b), err
	}
	out, err = runPy("rootpw")
	if err != nil {
		t.Fatalf("confluent-kafka: %v\n%s", err, out)
	}
	if want := "SCRAM-SHA-512 SCRAM-SHA-256 PLAIN confluent"; !strings.Contains(out, want) {
		t.Fatalf("confluent-kafka read back %q, want %q", out, want)
	}
	if out, err := runPy("nope"); err == nil {
		t.Fatalf("confluent-kafka with a wrong password succeeded:\n%s", out)
	}
}
