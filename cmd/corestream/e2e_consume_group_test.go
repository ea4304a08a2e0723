package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// Two `consume --group` processes share a topic as Kafka's console
// consumers do: together they print every record once, each with its
// partition and offset as the --format string says; interrupted, each
// commits, leaves and exits 0, and the group is left empty with lag 0.
func TestE2EConsumeGroup(t *testing.T) {
	addrs, err := launch.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOpts{httpAddr: addrs[0]})
	s.cliOK("", "topic", "create", "shared", "--partitions", "4")
	const n = 200
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "k%d\tv%d\n", i, i)
	}
	s.cliOK(in.String(), "produce", "shared", "--key-separator", "\t")

	type member struct {
		cmd      *exec.Cmd
		out, err *syncBuf
	}
	start := func() *member {
		m := &member{out: &syncBuf{}, err: &syncBuf{}}
		m.cmd = exec.Command(corestreamBin(t), "--brokers", s.addr, "--timeout", "20s",
			"consume", "shared", "--group", "cli-readers", "-f", `%p %o %s\n`)
		m.cmd.Stdout, m.cmd.Stderr = m.out, m.err
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.cmd.Process.Kill(); m.cmd.Wait() })
		return m
	}
	members := []*member{start(), start()}
	eventually(t, 60*time.Second, "both members together printing every record", func() bool {
		c := 0
		for _, m := range members {
			c += strings.Count(m.out.String(), "\n")
		}
		return c >= n
	})
	for _, m := range members {
		if err := m.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range members {
		done := make(chan error, 1)
		go func() { done <- m.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("member %d: %v\n%s", i, err, m.err.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("member %d did not exit after SIGINT\n%s", i, m.err.String())
		}
	}
	seen := map[string]int{}
	for _, m := range members {
		for _, line := range strings.Split(strings.TrimSpace(m.out.String()), "\n") {
			if line == "" {
				continue
			}
			f := strings.Fields(line)
			if len(f) != 3 {
				t.Fatalf("line %q is not \"partition offset value\"", line)
			}
			seen[f[2]]++
		}
	}
	var dup []string
	for v, c := range seen {
		if c != 1 {
			dup = append(dup, v)
		}
	}
	sort.Strings(dup)
	if len(seen) != n || len(dup) > 0 {
		t.Fatalf("the members printed %d distinct records of %d; printed more than once: %v", len(seen), n, dup)
	}

	var desc groupDescJSON
	if err := json.Unmarshal([]byte(s.cliOK("", "--json", "group", "describe", "cli-readers")), &desc); err != nil {
		t.Fatal(err)
	}
	if len(desc.Members) != 0 || desc.TotalLag != 0 || len(desc.Partitions) != 4 {
		t.Fatalf("after both left: %+v, want no member, 4 partitions, lag 0", desc)
	}
	// The HTTP API and /metrics show the same: one number for lag.
	var detail struct {
		Lag        int64 `json:"lag"`
		Partitions []struct {
			Committed int64  `json:"committed"`
			Lag       *int64 `json:"lag"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(httpGet(t, "http://"+addrs[0]+"/v1/groups/cli-readers"), &detail); err != nil {
		t.Fatal(err)
	}
	committed := int64(0)
	for _, p := range detail.Partitions {
		committed += p.Committed
		if p.Lag == nil || *p.Lag != 0 {
			t.Fatalf("GET /v1/groups/cli-readers: a partition's lag %v, want 0: %+v", p.Lag, detail)
		}
	}
	if len(detail.Partitions) != 4 || detail.Lag != 0 || committed != n {
		t.Fatalf("GET /v1/groups/cli-readers: %d partitions, lag %d, %d committed; want 4, 0, %d", len(detail.Partitions), detail.Lag, committed, n)
	}
	waitUntil(t, 20*time.Second, "the group's lag in /metrics", func() (bool, string) {
		text := string(httpGet(t, "http://"+addrs[0]+"/metrics"))
		v := metricValue(text, `corestream_group_lag_records{group="cli-readers"}`)
		return v == 0, fmt.Sprintf("corestream_group_lag_records{group=\"cli-readers\"} = %v", v)
	})
}

// The --format string's verbs and escapes, and a refusal of one it lacks.
func TestE2EConsumeFormat(t *testing.T) {
	s := startServer(t, serverOpts{})
	s.cliOK("", "topic", "create", "fmt", "--partitions", "1")
	s.cliOK("key1\thello\n", "produce", "fmt", "--key-separator", "\t")
	out := s.cliOK("", "consume", "fmt", "--count", "1", "-f", `%t|%p|%k|%K|%s|%S|100%%\t.\n`)
	if want := "fmt|0|key1|4|hello|5|100%\t.\n"; out != want {
		t.Fatalf("consume -f printed %q, want %q", out, want)
	}
	code, _, errs := s.cli("", "consume", "fmt", "--count", "1", "-f", "%x")
	if code == 0 || !bytes.Contains([]byte(errs), []byte("%x")) {
		t.Fatalf("an unknown verb: exit %d, %q", code, errs)
	}
}
