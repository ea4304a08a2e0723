package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// Kafka clients we did not write, unchanged, against a real node: kcat
// (librdkafka) and kafka-python, as Debian packages them. Each part skips
// when its client is not installed (CI installs both).
func TestE2EKafkaForeignClients(t *testing.T) {
	addrs, err := launch.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	kafka := addrs[0]
	s := startServer(t, serverOpts{kafkaAddr: kafka})

	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			t.Skip("kcat is not installed (Debian: apt-get install kcat)")
		}
		s.cliOK("", "topic", "create", "kcat-orders", "--partitions", "2")
		run := func(stdin string, args ...string) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", kafka}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		if md := run("", "-L", "-t", "kcat-orders"); !strings.Contains(md, `topic "kcat-orders" with 2 partitions`) {
			t.Fatalf("kcat -L does not show the topic with its 2 partitions:\n%s", md)
		}
		run("k1:hello\nk2:world\n", "-P", "-t", "kcat-orders", "-p", "0", "-K:")
		run("k3:idem\n", "-P", "-t", "kcat-orders", "-p", "1", "-K:", "-X", "enable.idempotence=true")
		got := run("", "-C", "-t", "kcat-orders", "-o", "beginning", "-e", "-q", "-f", "%p %o %k=%s\n")
		// Offsets are dense from 0 in send order, as on Kafka: the
		// primary's no-op takes none.
		for _, want := range []string{"0 0 k1=hello", "0 1 k2=world", "1 0 k3=idem"} {
			if !strings.Contains(got, want+"\n") {
				t.Errorf("kcat consumed %q; missing %q", got, want)
			}
		}
		// The same records through the native protocol: same offsets,
		// same bytes.
		native := s.cliOK("", "consume", "kcat-orders", "--partition", "0", "--json")
		for _, want := range []string{`"offset":0,`, `"key":"k1","value":"hello"`, `"offset":1,`, `"key":"k2","value":"world"`} {
			if !strings.Contains(native, want) {
				t.Errorf("the native consumer read %q; missing %s", native, want)
			}
		}
	})

	t.Run("kafka-python", func(t *testing.T) {
		// Debian's python3-kafka is installed for the system interpreter.
		py := "/usr/bin/python3"
		if err := exec.Command(py, "-c", "import kafka").Run(); err != nil {
			t.Skip("kafka-python is not installed for /usr/bin/python3 (Debian: apt-get install python3-kafka)")
		}
		s.cliOK("", "topic", "create", "py-orders", "--partitions", "1")
		script := fmt.Sprintf(`
import time
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
p = KafkaProducer(bootstrap_servers=%[1]q, acks="all")
first = 0  # a fresh partition's first record is at 0, as on Kafka
for i in range(10):
    md = p.send("py-orders", key=b"k%%d" %% i, value=b"v%%d" %% i, partition=0).get(timeout=20)
    assert md.offset == first + i, (i, first, md.offset)
p.flush()
c = KafkaConsumer(bootstrap_servers=%[1]q, group_id=None, enable_auto_commit=False)
tp = TopicPartition("py-orders", 0)
c.assign([tp])
c.seek_to_beginning(tp)
got, deadline = [], time.time() + 30
while len(got) < 10 and time.time() < deadline:
    for ms in c.poll(timeout_ms=200).values():
        got += [(m.offset, m.key, m.value) for m in ms]
want = [(first + i, b"k%%d" %% i, b"v%%d" %% i) for i in range(10)]
assert got == want, got
print("ok", len(got))
`, kafka)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, py, "-c", script).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok 10") {
			t.Fatalf("kafka-python: %v\n%s", err, out)
		}
	})
}
