package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

func TestMain(m *testing.M) {
	// `bench probe` runs this binary as `bench echo` for its two-process
	// round trip: the test binary then answers as the CLI would.
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == "echo" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	goleak.VerifyTestMain(m)
}

// cli runs command lines in-process against a fake cluster.
type cli struct {
	t  *testing.T
	fc *clienttest.Cluster
}

func newCLI(t *testing.T, nodes int) *cli {
	t.Helper()
	return newCLIOpts(t, clienttest.Options{Nodes: nodes})
}

func newCLIOpts(t *testing.T, opts clienttest.Options) *cli {
	t.Helper()
	fc, err := clienttest.NewCluster(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	return &cli{t: t, fc: fc}
}

// run executes args with stdin and returns the exit code, stdout and
// stderr. The fake's first node is given through the environment.
func (c *cli) run(stdin string, args ...string) (int, string, string) {
	c.t.Helper()
	return c.runReader(strings.NewReader(stdin), args...)
}

// runReader is run with stdin read from r.
func (c *cli) runReader(stdin io.Reader, args ...string) (int, string, string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == envBrokers {
			return c.fc.Addrs()[0]
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := run(ctx, append([]string{"--timeout", "5s"}, args...), stdin, &out, &errb, env)
	return code, out.String(), errb.String()
}

// ok runs args and fails the test unless they exit 0.
func (c *cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(stdin, args...)
	if code != exitOK {
		c.t.Fatalf("corestream %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// okJSON runs args with --json and decodes stdout into v.
func (c *cli) okJSON(v any, stdin string, args ...string) {
	c.t.Helper()
	out := c.ok(stdin, append([]string{"--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("corestream %s: bad JSON %v:\n%s", strings.Join(args, " "), err, out)
	}
}

func TestTopicCommands(t *testing.T) {
	c := newCLI(t, 3)
	out := c.ok("", "topic", "create", "orders", "--partitions", "4", "--replication-factor", "2", "--config", "retention.ms=60000")
	if !strings.Contains(out, "created topic orders") || !strings.Contains(out, "4 partitions, replication factor 2") {
		t.Fatalf("create output: %q", out)
	}
	var created topicJSON
	c.okJSON(&created, "", "topic", "create", "logs", "--partitions", "2", "--replication-factor", "all")
	if created.Name != "logs" || created.Partitions != 2 || created.ReplicationFactor != 3 || created.ID == "" {
		t.Fatalf("create --json: %+v", created)
	}
	code, _, errs := c.run("", "topic", "create", "orders")
	if code != exitError || !strings.Contains(errs, "TOPIC_ALREADY_EXISTS") || !strings.Contains(errs, `"orders"`) {
		t.Fatalf("duplicate create: exit %d, %q", code, errs)
	}
	var list []topicJSON
	c.okJSON(&list, "", "topic", "list")
	if len(list) != 2 || list[0].Name != "logs" || list[1].Name != "orders" {
		t.Fatalf("list --json: %+v", list)
	}
	if out := c.ok("", "topic", "list"); !strings.Contains(out, "NAME") || !strings.Contains(out, "orders") {
		t.Fatalf("list: %q", out)
	}
	out = c.ok("", "topic", "describe", "orders")
	if !strings.Contains(out, "PARTITION") || !strings.Contains(out, "retention_ms = 60000") {
		t.Fatalf("describe: %q", out)
	}
	var desc struct {
		Name   string      `json:"name"`
		Routes []routeJSON `json:"routes"`
	}
	c.okJSON(&desc, "", "topic", "describe", "orders")
	if len(desc.Routes) != 4 || len(desc.Routes[0].Replicas) != 2 {
		t.Fatalf("describe --json: %+v", desc)
	}
	if out := c.ok("", "topic", "add-partitions", "orders", "--partitions", "6"); !strings.Contains(out, "now has 6 partitions") {
		t.Fatalf("add-partitions: %q", out)
	}
	if out := c.ok("", "topic", "delete", "orders"); !strings.Contains(out, "deleted topic orders") {
		t.Fatalf("delete: %q", out)
	}
	code, _, errs = c.run("", "topic", "describe", "orders")
	if code != exitError || !strings.Contains(errs, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("describe deleted: exit %d, %q", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	c := newCLI(t, 1)
	for _, args := range [][]string{
		{"bogus"},
		{"topic"},
		{"topic", "create"},
		{"topic", "create", "a", "b"},
		{"topic", "create", "x", "--partitions", "many"},
		{"topic", "list", "--nope"},
		{"topic", "add-partitions", "x"},
		{"consume", "t", "--from", "yesterday"},
		{"consume", "t", "--from", "committed"},
		{"produce", "t", "--compression", "brotli"},
		{"partition", "move-primary", "t", "0"},
		{"partition", "describe", "t", "-1"},
		{"cluster", "add-node", "4"},
		{"cluster", "add-node", "33", "--addr", "h:1", "--replication-addr", "h:2"},
		{"cluster", "add-node", "four", "--addr", "h:1", "--replication-addr", "h:2"},
		{"cluster", "remove-node"},
		{"cluster", "remove-node", "0"},
	} {
		code, _, errs := c.run("", args...)
		if code != exitUsage || !strings.Contains(errs, "corestream:") {
			t.Errorf("corestream %s: exit %d, stderr %q; want usage (2)", strings.Join(args, " "), code, errs)
		}
	}
}

func TestProduceAndConsume(t *testing.T) {
	c := newCLI(t, 2)
	c.ok("", "topic", "create", "t", "--partitions", "3")
	long := strings.Repeat("x", 1<<20)
	input := "k1:hello\nk2:world\nk1:again\nk3:" + long + "\r\nk4:last-without-newline"
	c.ok(input, "produce", "t", "--key-separator", ":")
	total := 0
	for p := int32(0); p < 3; p++ {
		hw, _ := c.fc.HighWatermark("t", p)
		total += int(hw)
	}
	if total != 5 {
		t.Fatalf("%d messages stored, want 5", total)
	}
	// Same key, same partition, in order.
	out := c.ok("", "consume", "t", "--print-key", "--key-separator", "=")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("consumed %d lines, want 5: %q", len(lines), out[:min(len(out), 200)])
	}
	var k1 []string
	for _, l := range lines {
		if strings.HasPrefix(l, "k1=") {
			k1 = append(k1, l)
		}
		if strings.HasPrefix(l, "k3=") && l != "k3="+long {
			t.Fatal("the 1 MiB line did not round-trip")
		}
	}
	if len(k1) != 2 || k1[0] != "k1=hello" || k1[1] != "k1=again" {
		t.Fatalf("key k1: %q", k1)
	}
	// One partition, from an offset, a count, JSON.
	c.ok("a\nb\nc\nd\n", "produce", "t", "--partition", "2")
	hw, _ := c.fc.HighWatermark("t", 2)
	if out := c.ok("", "consume", "t", "--partition", "2", "--from", fmt.Sprint(hw-3), "--count", "2"); out != "b\nc\n" {
		t.Fatalf("consume --from --count: %q", out)
	}
	out = c.ok("", "--json", "consume", "t", "--partition", "2", "--from", fmt.Sprint(hw-1))
	var rec recordJSON
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Value == nil || *rec.Value != "d" || rec.Offset != hw-1 || rec.Key != nil {
		t.Fatalf("consume --json: %q (%v)", out, err)
	}
	// latest with nothing new stops at once; an empty topic too.
	if out := c.ok("", "consume", "t", "--from", "latest"); out != "" {
		t.Fatalf("consume --from latest printed %q", out)
	}
	c.ok("", "topic", "create", "empty")
	if out := c.ok("", "consume", "empty"); out != "" {
		t.Fatalf("empty topic printed %q", out)
	}
}

// Partitions that begin with a primary's no-op control batch, or hold
// nothing else, still end where they should (found against the real
// broker, which writes one per generation).
func TestConsumeOverControlBatches(t *testing.T) {
	c := newCLIOpts(t, clienttest.Options{NoOpBatches: true})
	c.ok("", "topic", "create", "t", "--partitions", "2")
	c.ok("x\ny\n", "produce", "t", "--partition", "1")
	if out := c.ok("", "consume", "t", "--partition", "0"); out != "" {
		t.Fatalf("a partition with only a no-op printed %q", out)
	}
	if out := c.ok("", "consume", "t"); out != "x\ny\n" {
		t.Fatalf("consume: %q", out)
	}
}

// --follow keeps polling: a message produced after the start is printed.
func TestConsumeFollow(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t")
	c.ok("old\n", "produce", "t")
	done := make(chan string, 1)
	go func() { done <- c.ok("", "consume", "t", "--follow", "--count", "2") }()
	waitFor(t, "the consumer to fetch", func() bool { return c.fc.Requests(0, wire.APIFetch) >= 2 })
	c.ok("new\n", "produce", "t")
	if out := <-done; out != "old\nnew\n" {
		t.Fatalf("consume --follow: %q", out)
	}
}

// A named consumer commits on exit and resumes with --from committed.
func TestConsumeCommitted(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t")
	c.ok("1\n2\n3\n", "produce", "t")
	if out := c.ok("", "consume", "t", "--consumer", "app", "--from", "committed", "--count", "2"); out != "1\n2\n" {
		t.Fatalf("first run: %q", out)
	}
	if out := c.ok("", "consume", "t", "--consumer", "app", "--from", "committed"); out != "3\n" {
		t.Fatalf("resumed run: %q", out)
	}
}

// produce exits 1 at the first line it cannot deliver and says which
// lines were acknowledged and what became of the others.
func TestProduceReportsUnacknowledged(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t")
	c.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce},
		Err: &wire.ErrorResponse{Err: wire.ErrMessageTooLarge, Message: "batch of 99 bytes exceeds the maximum 10"}})
	code, _, errs := c.run("a\nb\nc\n", "produce", "t")
	if code != exitError || !strings.Contains(errs, "no line acknowledged; line 1 failed: MESSAGE_TOO_LARGE: batch of 99 bytes") ||
		!strings.Contains(errs, "not written: lines 1-3") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	c.fc.ClearFaults()
	code, _, errs = c.run("k=a\nnosep\nk=c\n", "produce", "t", "--key-separator", "=")
	if code != exitError || !strings.Contains(errs, `acknowledged line 1; line 2 failed: line 2 has no key separator "="`) ||
		!strings.Contains(errs, "then any input after line 2 (produce stopped reading there)") {
		t.Fatalf("missing separator: exit %d, stderr %q", code, errs)
	}
	if got := c.values("t", 0); len(got) != 1 || got[0] != "a" {
		t.Fatalf("stored %q, want only the line before the bad one", got)
	}
	code, _, errs = c.run("a\n", "produce", "missing")
	if code != exitError || !strings.Contains(errs, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("unknown topic: exit %d, stderr %q", code, errs)
	}
	var rep produceReport
	c.okJSON(&rep, "x\ny\n", "produce", "t")
	if rep.Sent != 2 || rep.Acknowledged != 2 || rep.Failed != 0 || rep.AcknowledgedThrough != 2 || rep.FirstFailedLine != 0 || rep.UnreadInput {
		t.Fatalf("produce --json: %+v", rep)
	}
}

// values returns the values stored in a partition of the fake cluster.
func (c *cli) values(topic string, partition int32) []string {
	c.t.Helper()
	recs, err := c.fc.Records(topic, partition)
	if err != nil {
		c.t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

func TestClusterAndPartitionCommands(t *testing.T) {
	c := newCLI(t, 3)
	c.ok("", "topic", "create", "t", "--partitions", "3")
	out := c.ok("", "cluster", "status")
	if !strings.Contains(out, "metadata primary: node 1") || !strings.Contains(out, "PRIMARIES") {
		t.Fatalf("cluster status: %q", out)
	}
	var st struct {
		MetadataPrimary int32      `json:"metadata_primary"`
		Nodes           []nodeJSON `json:"nodes"`
	}
	c.okJSON(&st, "", "cluster", "status")
	if st.MetadataPrimary != 1 || len(st.Nodes) != 3 || st.Nodes[1].Primaries != 1 || !st.Nodes[2].Alive {
		t.Fatalf("cluster status --json: %+v", st)
	}
	var parts []partitionJSON
	c.okJSON(&parts, "", "partition", "describe", "t")
	if len(parts) != 3 || parts[2].Route.Primary != 3 || len(parts[2].Replicas) != 3 {
		t.Fatalf("partition describe --json: %+v", parts)
	}
	if out := c.ok("", "partition", "describe", "t", "1"); !strings.Contains(out, "HIGH-WATERMARK") ||
		!regexp.MustCompile(`\b2:\d+:(yes|no):([\d.]+m?s|-)\b`).MatchString(out) {
		t.Fatalf("partition describe: %q", out)
	}
	if out := c.ok("", "partition", "move-primary", "t", "1", "--to", "3"); !strings.Contains(out, "t/1: primary is node 3 (generation 2)") {
		t.Fatalf("move-primary: %q", out)
	}
	code, _, errs := c.run("", "partition", "move-primary", "t", "1", "--to", "9")
	if code != exitError || !strings.Contains(errs, "NOT_REPLICA") {
		t.Fatalf("move to a non-replica: exit %d, %q", code, errs)
	}
	if out := c.ok("", "cluster", "rebalance", "--dry-run"); !strings.Contains(out, "dry run: 1 primary moves planned") || !strings.Contains(out, "t/1: node 3 -> node 2") {
		t.Fatalf("rebalance --dry-run: %q", out)
	}
	var plan struct {
		Started bool       `json:"started"`
		Moves   []moveJSON `json:"moves"`
	}
	c.okJSON(&plan, "", "cluster", "rebalance")
	if !plan.Started || len(plan.Moves) != 1 {
		t.Fatalf("rebalance --json: %+v", plan)
	}
	if out := c.ok("", "cluster", "rebalance"); !strings.Contains(out, "balanced") {
		t.Fatalf("second rebalance: %q", out)
	}
}

// --brokers wins over the environment.
func TestBrokersFlag(t *testing.T) {
	c := newCLI(t, 1)
	code, _, errs := c.run("", "--brokers", "127.0.0.1:1", "topic", "list")
	if code != exitError || !strings.Contains(errs, "127.0.0.1:1") {
		t.Fatalf("exit %d, %q", code, errs)
	}
}

// The built binary, as a subprocess: produce then consume, with the
// brokers from the environment.
func TestBinaryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t")
	bin := filepath.Join(t.TempDir(), "corestream")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := append(os.Environ(), envBrokers+"="+c.fc.Addrs()[0])
	produce := exec.Command(bin, "produce", "t")
	produce.Env = env
	produce.Stdin = strings.NewReader("one\ntwo\n")
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	consume := exec.Command(bin, "consume", "t", "--from", "earliest")
	consume.Env = env
	out, err := consume.Output()
	if err != nil || string(out) != "one\ntwo\n" {
		t.Fatalf("consume: %q, %v", out, err)
	}
	bad := exec.Command(bin, "topic", "create")
	bad.Env = env
	if err := bad.Run(); err == nil || bad.ProcessState.ExitCode() != exitUsage {
		t.Fatalf("usage error exit: %v", err)
	}
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// --config takes the documented Kafka names and ours, and refuses what the
// broker would, listing what it accepts.
func TestParseTopicConfigs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want map[string]string
		err  string // a substring of the usage error; "" for success
	}{
		{[]string{"retention.ms=86400000"}, map[string]string{"retention_ms": "86400000"}, ""},
		{[]string{"retention_ms=1000", "retention.bytes=-1"}, map[string]string{"retention_ms": "1000", "retention_bytes": "-1"}, ""},
		{nil, map[string]string{}, ""},
		{[]string{"cleanup.policy=compact", "min.cleanable.dirty.ratio=0.1"}, map[string]string{"cleanup_policy": "compact", "min_cleanable_dirty_ratio": "0.1"}, ""},
		{[]string{"delete.retention.ms=1h"}, nil, "must be an integer"},
		{[]string{"compression.type=zstd"}, nil, "unknown topic setting; accepted: retention.ms (or retention_ms), retention.bytes (or retention_bytes), cleanup.policy"},
		{[]string{"segment.bytes=1048576", "segment_ms=60000"}, map[string]string{"segment_bytes": "1048576", "segment_ms": "60000"}, ""},
		{[]string{"max.message.bytes=8388608"}, map[string]string{"max_message_bytes": "8388608"}, ""},
		{[]string{"flush.ms=10"}, nil, "storage.fsync in the node's configuration"},
		{[]string{"retention.ms=1d"}, nil, "must be an integer"},
		{[]string{"retention.ms=1", "retention_ms=2"}, nil, "sets retention_ms twice"},
		{[]string{"retention.ms"}, nil, "not KEY=VALUE"},
	} {
		got, err := parseTopicConfigs(c.args)
		switch {
		case c.err == "" && (err != nil || fmt.Sprint(got) != fmt.Sprint(c.want)):
			t.Errorf("%q: %v, %v; want %v", c.args, got, err, c.want)
		case c.err != "" && (!isUsage(err) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v; want a usage error containing %q", c.args, err, c.err)
		}
	}
}

// A missing topic is a clear error at once: describe, delete and
// add-partitions say it does not exist and exit 1 without sending the
// admin request (which the broker answers with a retriable error the
// client retried for seconds, ending with an all-zero topic id).
// add-partitions to the current count or below is refused likewise.
func TestMissingTopicAdmin(t *testing.T) {
	c := newCLI(t, 2)
	c.ok("", "topic", "create", "t", "--partitions", "2")
	for _, tc := range []struct {
		args []string
		api  wire.APIKey
	}{
		{[]string{"topic", "describe", "nope"}, wire.APIDescribeTopic},
		{[]string{"topic", "delete", "nope"}, wire.APIDeleteTopic},
		{[]string{"topic", "add-partitions", "nope", "--partitions", "3"}, wire.APIAddPartitions},
	} {
		code, out, errs := c.run("", tc.args...)
		if code != exitError || out != "" || !strings.Contains(errs, `UNKNOWN_TOPIC_OR_PARTITION: topic "nope" does not exist`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.args, code, out, errs)
		}
		if n := c.fc.Requests(0, tc.api); n != 0 {
			t.Errorf("%v: %d %v requests sent for a topic the metadata lacks", tc.args, n, tc.api)
		}
	}
	for _, total := range []string{"2", "1"} {
		code, _, errs := c.run("", "topic", "add-partitions", "t", "--partitions", total)
		if code != exitError || !strings.Contains(errs, `INVALID_PARTITIONS: topic "t" has 2 partitions`) {
			t.Errorf("add-partitions --partitions %s: exit %d, %q", total, code, errs)
		}
	}
}
