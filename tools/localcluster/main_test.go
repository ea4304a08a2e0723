package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// Bad flags exit 2 before anything is built or started; a flag that makes
// a configuration the broker would refuse names the configuration key.
func TestBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0"}, "-n 0"},
		{[]string{"-n", "33"}, "-n 33"},
		{[]string{"-n", "3", "-rf", "4"}, "cluster.default_replication_factor"},
		{[]string{"-n", "3", "-rf", "some"}, "replication factor"},
		{[]string{"-k", "65"}, "replica_connections_per_peer"},
		{[]string{"-fsync", "sometimes"}, "storage.fsync"},
		{[]string{"-election-ms", "100"}, "cluster.election_timeout_ms"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"-nodes", "3"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		args := append([]string{"-dir", t.TempDir(), "-bin", "/nonexistent"}, c.args...)
		if code := run(args, &out, &errb, nil); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", c.args, code, errb.String(), c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v: printed %q on stdout", c.args, out.String())
		}
	}
}

// goBuild compiles a command of this module into dir.
func goBuild(t *testing.T, dir, pkg string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	if out, err := exec.Command(goTool, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// The launcher as an operator runs it: three nodes on free ports, each
// with its own data directory and configuration; one JSON document on
// stdout naming live processes whose client ports answer and see every
// node alive; SIGINT stops every node cleanly and the launcher exits 0.
func TestLaunchAndInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds two binaries and runs three brokers")
	}
	bins := t.TempDir()
	corestream := goBuild(t, bins, "github.com/corestream/corestream/cmd/corestream")
	tool := goBuild(t, bins, "github.com/corestream/corestream/tools/localcluster")
	dir := filepath.Join(t.TempDir(), "cluster")
	cmd, doc, exited, stderr := startLauncher(t, tool, "-n", "3", "-dir", dir, "-bin", corestream, "-shards", "1", "-fsync", "never")

	if len(doc.Nodes) != 3 || doc.Dir != dir {
		t.Fatalf("document: %+v", doc)
	}
	seen := map[string]bool{}
	for i, n := range doc.Nodes {
		if n.ID != i+1 || n.PID <= 0 || syscall.Kill(n.PID, 0) != nil {
			t.Fatalf("node %+v is not a live process", n)
		}
		for _, v := range []string{n.ClientAddr, n.ReplicationAddr, n.HTTPAddr, n.KafkaAddr, n.DataDir} {
			if v == "" || seen[v] {
				t.Fatalf("node %d: address or directory %q empty or shared", n.ID, v)
			}
			seen[v] = true
		}
		if n.DataDir != filepath.Join(dir, "node-"+string(rune('0'+n.ID))) || n.Config != filepath.Join(n.DataDir, launch.ConfigFile) {
			t.Fatalf("node %d: data dir %s, config %s", n.ID, n.DataDir, n.Config)
		}
		if _, err := os.Stat(n.Config); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := launch.Status(ctx, n.ClientAddr)
		cancel()
		if err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
		for _, m := range st.Nodes {
			if !m.Alive {
				t.Fatalf("node %d sees node %d down: %+v", n.ID, m.ID, st)
			}
		}
	}
	if want := doc.Nodes[0].ClientAddr + "," + doc.Nodes[1].ClientAddr + "," + doc.Nodes[2].ClientAddr; doc.Brokers != want {
		t.Fatalf("brokers %q, want %q", doc.Brokers, want)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("the launcher exited with %v after SIGINT:\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the launcher still runs 90 s after SIGINT:\n%s", stderr.String())
	}
	for _, n := range doc.Nodes {
		if syscall.Kill(n.PID, 0) == nil {
			t.Errorf("node %d (pid %d) still runs after the launcher exited", n.ID, n.PID)
		}
		if !strings.Contains(stderr.String(), "node "+string(rune('0'+n.ID))+" (pid") {
			t.Errorf("no stop line for node %d:\n%s", n.ID, stderr.String())
		}
	}
	if strings.Count(stderr.String(), "stopped: exit 0") != 3 {
		t.Errorf("not every node stopped cleanly:\n%s", stderr.String())
	}
	t.Logf("launcher stderr:\n%s", stderr.String())
}

// TestParseFlagsKFollowsShards: -k 0 asks for one link per shard.
func TestParseFlagsKFollowsShards(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-k", "0", "-shards", "3"}, 3},
		{[]string{"-k", "0"}, runtime.NumCPU()},
		{[]string{"-k", "5", "-shards", "3"}, 5},
		{nil, 1},
	} {
		f, err := parseFlags(c.args, io.Discard)
		if err != nil || f.opts.K != c.want {
			t.Errorf("%v: K %d, err %v; want %d", c.args, f.opts.K, err, c.want)
		}
	}
}

// A node that exits on its own is reported with the command that restarts
// it: the corestream binary the launcher started it with (absolute, so it
// works from any directory), its configuration, and its log appended to.
// The launcher's own binary cannot serve.
func TestRestartHintNamesTheBrokerBinary(t *testing.T) {
	dir := t.TempDir()
	n := launch.Node{ID: 2, Config: filepath.Join(dir, launch.ConfigFile), Log: filepath.Join(dir, "corestream.log")}
	// A binary that exits at once stands in for a node killed with kill -9.
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1) to stand in for a node that exits")
	}
	p, err := launch.Start(bin, n)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := supervise([]*launch.Process{p}, bin, nil, &stderr); code != 1 {
		t.Fatalf("supervise: exit %d, want 1 once every node exited", code)
	}
	want := "restart it with: " + bin + " serve --config " + n.Config + " >>" + n.Log + " 2>&1"
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr %q\nwant it to contain %q", stderr.String(), want)
	}
}

// Paths with characters a shell would split or expand are quoted.
func TestShellQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/usr/bin/corestream", "/usr/bin/corestream"},
		{"/my dir/corestream", "'/my dir/corestream'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"", "''"},
	} {
		if got := shellQuote(c.in); got != c.want {
			t.Errorf("shellQuote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// `make cluster | jq` works: the launcher's JSON document is the only
// thing on make's standard output (make echoed its recipe lines there),
// and the binary it builds reports the checkout's version.
func TestMakeClusterPrintsOnlyJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds two binaries and runs a broker")
	}
	makeTool, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	bin, dir := t.TempDir(), filepath.Join(t.TempDir(), "cluster")
	cmd := exec.Command(makeTool, "--no-print-directory", "cluster", "BIN="+bin, "NODES=1",
		"CLUSTER_FLAGS=-shards 1 -fsync never -dir "+dir)
	cmd.Dir = filepath.Join("..", "..")                   // the module root, where the Makefile is
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's Ctrl-C reaches make and the launcher
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var doc document
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, n := range doc.Nodes {
			syscall.Kill(n.PID, syscall.SIGKILL)
		}
	})
	deadline := time.Now().Add(3 * time.Minute) // two builds on a loaded machine
	for !strings.Contains(stderr.String(), "nodes up") {
		select {
		case err := <-exited:
			t.Fatalf("make cluster exited (%v) before the cluster formed:\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster after 3 min:\nstderr: %s", stderr.String())
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("make cluster still runs 90 s after SIGINT:\n%s", stderr.String())
	}
	dec := json.NewDecoder(strings.NewReader(stdout.String()))
	if err := dec.Decode(&doc); err != nil || len(doc.Nodes) != 1 {
		t.Fatalf("stdout is not the cluster's JSON document (%v):\n%s", err, stdout.String())
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		t.Fatalf("stdout holds more than the JSON document (%v):\n%s", err, stdout.String())
	}
	describe, err := exec.Command("git", "-C", cmd.Dir, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("git describe: %v", err)
	}
	out, err := exec.Command(filepath.Join(bin, "corestream"), "--version").Output()
	if want := "corestream " + strings.TrimSpace(string(describe)) + " "; err != nil || !strings.HasPrefix(string(out), want) {
		t.Fatalf("corestream --version: %q (%v), want it to start with %q", out, err, want)
	}
}

// syncBuffer is an output stream read while a process writes it; mu
// guards b.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLauncher runs the launcher built at tool with args and reads the
// JSON document it prints once its nodes run; every node it names is
// killed at the test's end. exited answers the launcher's exit.
func startLauncher(t *testing.T, tool string, args ...string) (*exec.Cmd, document, <-chan error, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(tool, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var doc document
	decoded := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		r := bufio.NewReader(stdout)
		decoded <- json.NewDecoder(r).Decode(&doc)
		io.Copy(io.Discard, r)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for _, n := range doc.Nodes {
			syscall.Kill(n.PID, syscall.SIGKILL)
		}
	})
	select {
	case err := <-decoded:
		if err != nil {
			t.Fatalf("reading the JSON document: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("no JSON document after 90 s; stderr:\n%s", stderr.String())
	}
	return cmd, doc, exited, stderr
}
