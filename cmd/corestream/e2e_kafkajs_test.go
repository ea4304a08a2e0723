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

// kafkajsVersion is the kafkajs release the test installs: pinned, so a
// new release cannot change what the test proves without a commit.
const kafkajsVersion = "2.2.4"

// kafkajs (Node.js, pure JavaScript, its own protocol code), unchanged,
// against a real node: an idempotent producer writes 10 keyed records
// and they are read back with kafkajs's own Fetch, at the log's offsets,
// and through the native consumer with the same offsets and bytes.
// kafkajs consumes only in groups, which the Kafka port does not serve
// yet, so the read uses kafkajs's cluster and broker (what its consumer
// runs on) without a group. The test installs kafkajs with npm into a
// temporary directory; it skips when node or npm is missing or the npm
// registry cannot be reached.
func TestE2EKafkajs(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (Debian: apt-get install nodejs npm)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed (Debian: apt-get install npm)")
	}
	dir := t.TempDir()
	ictx, icancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer icancel()
	install := exec.CommandContext(ictx, npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", dir, "kafkajs@"+kafkajsVersion)
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Skipf("npm could not install kafkajs@%s (is the npm registry reachable?): %v\n%s", kafkajsVersion, err, out)
	}

	addrs, err := launch.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOpts{kafkaAddr: addrs[0]})
	s.cliOK("", "topic", "create", "js-orders", "--partitions", "1")
	script := fmt.Sprintf(`
const { Kafka, logLevel } = require("kafkajs");
const assert = require("assert");
const topic = "js-orders";
const kafka = new Kafka({ clientId: "corestream-e2e", brokers: [%[1]q], logLevel: logLevel.WARN });
(async () => {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const sent = await producer.send({ topic, acks: -1,
    messages: Array.from({ length: 10 }, (_, i) => ({ partition: 0, key: "k" + i, value: "v" + i })) });
  const first = Number(sent[0].baseOffset);
  await producer.disconnect();

  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  assert.strictEqual(Number(ends[0].high), first + 10, JSON.stringify(ends));
  await admin.disconnect();

  // kafkajs's consumer needs a group; its cluster and broker fetch without one.
  const sym = Object.getOwnPropertySymbols(kafka).find((s) => String(s).includes("createCluster"));
  const cluster = kafka[sym]({});
  await cluster.connect();
  await cluster.addTargetTopic(topic);
  const leader = cluster.findTopicPartitionMetadata(topic)[0].leader;
  const broker = await cluster.findBroker({ nodeId: String(leader) });
  const got = [];
  let offset = 0;
  for (let tries = 0; got.length < 10 && tries < 50; tries++) {
    const resp = await broker.fetch({ replicaId: -1, isolationLevel: 1, maxWaitTime: 200, minBytes: 1, maxBytes: 1 << 20,
      topics: [{ topic, partitions: [{ partition: 0, fetchOffset: String(offset), maxBytes: 1 << 20 }] }] });
    const p = resp.responses[0].partitions[0];
    assert.strictEqual(p.errorCode, 0, JSON.stringify(p));
    for (const m of p.messages) {
      if (Number(m.offset) >= offset) {
        got.push([Number(m.offset), m.key.toString(), m.value.toString()]);
        offset = Number(m.offset) + 1;
      }
    }
  }
  await cluster.disconnect();
  const want = Array.from({ length: 10 }, (_, i) => [first + i, "k" + i, "v" + i]);
  assert.deepStrictEqual(got, want);
  console.log("ok", got.length, "first", first);
})().catch((e) => { console.error(e); process.exit(1); });
`, addrs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, node, "-e", script)
	run.Dir = dir
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok 10 first ") {
		t.Fatalf("kafkajs: %v\n%s", err, out)
	}
	var first int
	if _, err := fmt.Sscanf(string(out[strings.Index(string(out), "ok 10 first "):]), "ok 10 first %d", &first); err != nil {
		t.Fatalf("kafkajs printed %q: %v", out, err)
	}
	// The same records through the native protocol: same offsets, same
	// bytes.
	native := s.cliOK("", "consume", "js-orders", "--partition", "0", "--json")
	for i := range 10 {
		for _, want := range []string{fmt.Sprintf(`"offset":%d,`, first+i), fmt.Sprintf(`"key":"k%d","value":"v%d"`, i, i)} {
			if !strings.Contains(native, want) {
				t.Errorf("the native consumer read %q; missing %s", native, want)
			}
		}
	}
}
