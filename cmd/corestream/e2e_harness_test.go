package main

// The end-to-end tests (e2e_*_test.go) build this command once per test
// process and run it as a real broker on free loopback ports, each in its
// own temporary data directory. Every process a test starts is killed and
// waited for in its cleanup; every wait is a condition with a deadline.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
)

// Bounds of the harness.
const (
	// e2eStartTimeout bounds a server's start-up (recovery included).
	e2eStartTimeout = 60 * time.Second
	// e2eStopTimeout bounds a graceful stop after a signal.
	e2eStopTimeout = 30 * time.Second
	// e2eCLITimeout bounds one CLI command.
	e2eCLITimeout = 60 * time.Second
)

var e2eBuild struct {
	once sync.Once
	path string
	err  error
}

// corestreamBin builds this package's binary once per test process (with
// -race when the tests run with it), into
// a per-user directory under the system temp dir (one file per test
// process; files of processes that are gone are removed), and returns it.
func corestreamBin(t testing.TB) string {
	t.Helper()
	e2eBuild.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("corestream-e2e-%d", os.Getuid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			e2eBuild.err = err
			return
		}
		removeStaleBinaries(dir)
		path := filepath.Join(dir, fmt.Sprintf("corestream.%d", os.Getpid()))
		args := []string{"build", "-o", path}
		if e2eRace {
			args = append(args, "-race") // the broker under test runs under the race detector too
		}
		cmd := exec.Command(goTool, append(args, ".")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			e2eBuild.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		e2eBuild.path = path
	})
	if e2eBuild.err != nil {
		t.Fatal(e2eBuild.err)
	}
	return e2eBuild.path
}

// removeStaleBinaries deletes binaries built by test processes that have
// exited.
func removeStaleBinaries(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "corestream."))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// syncBuf is an output stream a test reads while the process writes it.
// mu guards b.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines returns the lines containing every substring.
func (s *syncBuf) lines(subs ...string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		ok := true
		for _, sub := range subs {
			ok = ok && strings.Contains(sc.Text(), sub)
		}
		if ok {
			out = append(out, sc.Text())
		}
	}
	return out
}

// serverOpts configures a server started by startServer.
type serverOpts struct {
	// dir is the data directory (a new temp dir when empty).
	dir string
	// config is TOML written to a file and passed with --config.
	config string
	// addr is --client-addr (127.0.0.1:0 when empty).
	addr string
	// shards is --shards (2 when 0).
	shards int
	// kafkaAddr is --kafka-addr (empty: no Kafka listener).
	kafkaAddr string
	// httpAddr is --http-addr ("": the HTTP API is off).
	httpAddr string
}

// server is one running `corestream serve`.
type server struct {
	t       testing.TB
	opts    serverOpts
	cmd     *exec.Cmd
	stdout  *syncBuf
	stderr  *syncBuf
	addr    string
	started time.Time
	// ready is how long start-up took, until "serving clients on".
	ready time.Duration
	// exited is closed when the process has been waited for; waitErr is
	// its exit status then.
	exited  chan struct{}
	waitErr error
}

var servingRE = regexp.MustCompile(`serving clients on (\S+)`)

// startServer runs `corestream serve` and waits until it serves clients.
func startServer(t testing.TB, opts serverOpts) *server {
	t.Helper()
	s := spawnServer(t, opts)
	if err := s.waitServing(); err != nil {
		t.Fatal(err)
	}
	return s
}

// spawnServer starts the process without waiting for it to serve.
func spawnServer(t testing.TB, opts serverOpts) *server {
	t.Helper()
	if opts.dir == "" {
		opts.dir = filepath.Join(t.TempDir(), "data")
	}
	if opts.addr == "" {
		opts.addr = "127.0.0.1:0"
	}
	if opts.shards == 0 {
		opts.shards = 2
	}
	args := []string{"serve", "--data", opts.dir, "--client-addr", opts.addr, "--http-addr", opts.httpAddr, "--kafka-addr", opts.kafkaAddr, "--shards", strconv.Itoa(opts.shards)}
	if opts.config != "" {
		path := filepath.Join(t.TempDir(), "corestream.toml")
		if err := os.WriteFile(path, []byte(opts.config), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	s := &server{t: t, opts: opts, stdout: &syncBuf{}, stderr: &syncBuf{}, exited: make(chan struct{})}
	s.cmd = exec.Command(corestreamBin(t), args...)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.kill()
		if strings.Contains(s.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector reported a race in the broker")
		}
		if t.Failed() {
			t.Logf("server %s stderr (last 8 KiB):\n%s", opts.dir, tail(s.stderr.String(), 8<<10))
		}
	})
	return s
}

// waitServing waits for the "serving clients on ADDR" line.
func (s *server) waitServing() error {
	deadline := time.After(e2eStartTimeout)
	for {
		if m := servingRE.FindStringSubmatch(s.stdout.String()); m != nil {
			s.addr, s.ready = m[1], time.Since(s.started)
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("server exited before serving (%v):\n%s", s.waitErr, s.stderr)
		case <-deadline:
			return fmt.Errorf("server not serving after %v:\n%s", e2eStartTimeout, s.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL (when still running) and waits for the process.
func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop sends sig and waits for the exit; it returns the exit code.
func (s *server) stop(sig os.Signal) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case <-s.exited:
	case <-time.After(e2eStopTimeout):
		s.t.Fatalf("server still running %v after %v", e2eStopTimeout, sig)
	}
	var ee *exec.ExitError
	if errors.As(s.waitErr, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// restart starts a new server with the same options and, unless the first
// one asked for a fixed port, on the port the first one got (so that
// clients of the first reconnect to it).
func (s *server) restart() *server {
	s.t.Helper()
	opts := s.opts
	opts.addr = s.addr
	return startServer(s.t, opts)
}

// rssBytes is the server's resident set size now.
func (s *server) rssBytes() int64 {
	s.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		s.t.Fatalf("server status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	s.t.Fatal("no VmRSS in the server's status")
	return 0
}

// cli runs the binary's client commands against s; it returns the exit
// code, stdout and stderr.
func (s *server) cli(stdin string, args ...string) (int, string, string) {
	s.t.Helper()
	return runBin(s.t, stdin, append([]string{"--brokers", s.addr, "--timeout", "20s"}, args...)...)
}

// runBin runs the binary to completion with args and stdin; it returns
// the exit code, stdout and stderr.
func runBin(t testing.TB, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, corestreamBin(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatalf("corestream %s: %v", strings.Join(args, " "), err)
	}
	return 0, out.String(), errb.String()
}

// cliOK runs a client command that must succeed and returns its stdout.
func (s *server) cliOK(stdin string, args ...string) string {
	s.t.Helper()
	code, out, errs := s.cli(stdin, args...)
	if code != 0 {
		s.t.Fatalf("corestream %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, tail(out, 4096), errs)
	}
	return out
}

// dial returns an SDK client of s, closed at the end of the test.
func (s *server) dial(cfg client.Config) *client.Client {
	s.t.Helper()
	cfg.Brokers = []string{s.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialConfig(ctx, cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// eventually polls cond until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
