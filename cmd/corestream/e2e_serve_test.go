package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// An unknown key or a bad value stops `corestream serve` before it listens,
// with exit code 1 and a message naming the key.
func TestE2EServeRefusesBadConfig(t *testing.T) {
	cases := []struct {
		name, config string
		args         []string
		want         string
	}{
		{"unknown key", "[storage]\nfsyncc = \"always\"\n", nil, "storage.fsyncc"},
		{"unknown section", "[stroage]\nfsync = \"always\"\n", nil, "stroage"},
		{"bad enum", "[storage]\nfsync = \"sometimes\"\n", nil, "storage.fsync"},
		{"wrong type", "[network]\nmax_inflight_per_conn = \"many\"\n", nil, "network.max_inflight_per_conn"},
		{"out of bounds", "[network]\nmax_inflight_per_conn = 0\n", nil, "network.max_inflight_per_conn"},
		{"frame below the batch", "[network]\nmax_frame_bytes = 65536\n[storage]\nmax_batch_bytes = 1048576\n", nil, "max_frame_bytes"},
		{"not TOML", "[storage\nfsync = always\n", nil, "line 2"},
		{"bad flag value", "", []string{"--shards", "-1"}, "shard.count"},
		{"missing file", "", []string{"--config", "/nonexistent/corestream.toml"}, "/nonexistent/corestream.toml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"serve", "--data", filepath.Join(t.TempDir(), "data"), "--client-addr", "127.0.0.1:0", "--http-addr", "", "--kafka-addr", ""}
			if c.config != "" {
				path := filepath.Join(t.TempDir(), "corestream.toml")
				if err := os.WriteFile(path, []byte(c.config), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			code, out, errs := runBin(t, "", append(args, c.args...)...)
			if code == 0 || strings.Contains(out, "serving") {
				t.Fatalf("started anyway: exit %d\n%s%s", code, out, errs)
			}
			if !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, message does not name %q:\n%s", code, c.want, errs)
			}
			t.Logf("exit %d: %s", code, strings.TrimSpace(errs))
		})
	}
}

// SIGTERM and SIGINT stop the broker gracefully: exit code 0, every
// partition closed cleanly, so the next start opens every log without a
// recovery scan; the data is all there.
func TestE2EGracefulShutdown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			s := startServer(t, serverOpts{})
			s.cliOK("", "topic", "create", "orders", "--partitions", "3")
			var lines strings.Builder
			for i := 0; i < 300; i++ {
				fmt.Fprintf(&lines, "k%d:v%d\n", i, i)
			}
			s.cliOK(lines.String(), "produce", "orders", "--key-separator", ":")
			if code := s.stop(sig); code != 0 {
				t.Fatalf("exit code %d after %v:\n%s", code, sig, s.stderr)
			}
			if len(s.stderr.lines("msg=stopped")) != 1 {
				t.Fatalf("no \"stopped\" line after %v:\n%s", sig, s.stderr)
			}

			s = s.restart()
			eventually(t, 30*time.Second, "four partitions opened", func() bool {
				return len(s.stderr.lines(`msg="partition opened"`)) >= 4 // __meta and orders/0..2
			})
			for _, line := range s.stderr.lines(`msg="partition opened"`) {
				if !strings.Contains(line, "clean=true") || strings.Contains(line, "scanned") {
					t.Errorf("recovery after a graceful stop: %s", line)
				}
			}
			// Without --count, consume stops at the end of each partition,
			// whose last batch is now the restarted primary's no-op.
			start := time.Now()
			out := s.cliOK("", "consume", "orders")
			if got := strings.Count(out, "\n"); got != 300 || time.Since(start) > 10*time.Second {
				t.Fatalf("%d messages after the restart in %v, want 300", got, time.Since(start))
			}
		})
	}
}

// Offsets committed by `consume --consumer` survive a restart: the next
// `consume --from committed` goes on where the first stopped.
func TestE2ECommittedOffsetsSurviveRestart(t *testing.T) {
	s := startServer(t, serverOpts{})
	s.cliOK("", "topic", "create", "jobs")
	var in strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&in, "job-%d\n", i)
	}
	s.cliOK(in.String(), "produce", "jobs")
	if out := s.cliOK("", "consume", "jobs", "--consumer", "worker", "--count", "4"); out != "job-0\njob-1\njob-2\njob-3\n" {
		t.Fatalf("first consume: %q", out)
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	s = s.restart()
	out := s.cliOK("", "consume", "jobs", "--consumer", "worker", "--from", "committed")
	if out != "job-4\njob-5\njob-6\njob-7\njob-8\njob-9\n" {
		t.Fatalf("consume from committed after the restart: %q", out)
	}
}

// `topic create` with a replication factor above the roster size is
// refused on a single node; nothing is created.
func TestE2EReplicationFactorRefused(t *testing.T) {
	s := startServer(t, serverOpts{})
	code, _, errs := s.cli("", "topic", "create", "rf", "--replication-factor", "2")
	if code != 1 || !strings.Contains(errs, "INVALID_REPLICATION_FACTOR") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if out := s.cliOK("", "topic", "list"); strings.Contains(out, "rf") {
		t.Fatalf("a refused topic is listed:\n%s", out)
	}
	s.cliOK("", "topic", "create", "rf", "--replication-factor", "all")
}

// A second broker on the same data directory refuses to start.
func TestE2EDataDirInUse(t *testing.T) {
	s := startServer(t, serverOpts{})
	second := spawnServer(t, serverOpts{dir: s.opts.dir})
	if err := second.waitServing(); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second broker on %s: %v", s.opts.dir, err)
	}
	s.cliOK("", "cluster", "status")
}

// A busy HTTP port stops `corestream serve` before it writes anything or
// opens its client port: exit 1, a message naming the key and the port,
// no data directory.
func TestE2EServeRefusesBusyPortBeforeAnything(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clientAddr := free.Addr().String()
	free.Close()
	data := filepath.Join(t.TempDir(), "data")
	code, out, errs := runBin(t, "", "serve", "--data", data, "--client-addr", clientAddr, "--http-addr", busy.Addr().String(), "--kafka-addr", "")
	if code == 0 || strings.Contains(out, "serving") {
		t.Fatalf("started anyway: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, "node.http_addr "+busy.Addr().String()+" is already in use") {
		t.Fatalf("exit %d, the message does not name the busy port:\n%s", code, errs)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data directory was created before the port check: %v", err)
	}
	if strings.Contains(errs, "shards started") || strings.Contains(errs, "listening") {
		t.Fatalf("the node started before the port check:\n%s", errs)
	}
	t.Logf("exit %d: %s", code, strings.TrimSpace(errs))
}

// Past the open-file limit `topic create` fails, naming the limit, with a
// non-zero exit, instead of saying "created" with partitions offline; the
// node logs each failure once (not thousands of lines a second), and the
// partitions open by themselves once the limit is raised.
func TestE2EServeOpenFileLimit(t *testing.T) {
	s := startServer(t, serverOpts{})
	pid := s.cmd.Process.Pid
	var orig unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &orig); err != nil {
		t.Skipf("prlimit: %v", err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("open files of the server: %v", err)
	}
	// Room for the CLI's connection and a few partitions, not for 40.
	limit := uint64(len(fds) + 16)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: orig.Max}, nil); err != nil {
		t.Skipf("prlimit: %v", err)
	}
	code, out, errs := s.cli("", "topic", "create", "many", "--partitions", "40")
	if code == 0 || strings.Contains(out, "created") {
		t.Fatalf("create past the open-file limit: exit %d\n%s%s", code, out, errs)
	}
	if want := fmt.Sprintf("too many open files (ulimit -n %d)", limit); !strings.Contains(errs, want) {
		t.Fatalf("exit %d, the error does not name the limit (%q):\n%s", code, want, errs)
	}
	t.Logf("exit %d: %s", code, strings.TrimSpace(errs))
	if lines := s.stderr.lines("level=ERROR", `msg="opening a partition"`); len(lines) > 10 {
		t.Fatalf("%d ERROR lines about opening partitions, want at most 10 (then a summary)", len(lines))
	}

	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &orig, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "every partition to open once the limit is raised", func() bool {
		code, out, _ := s.cli("", "topic", "describe", "many", "--json")
		return code == 0 && !strings.Contains(out, `"error"`) && strings.Count(out, `"primary": 1`)+strings.Count(out, `"primary":1`) == 40
	})
}

// The start-up banner: one "WHAT on ADDRESS" line a listener, each with
// an address a client can use as it is (the HTTP ones answer).
func TestE2EServeBanner(t *testing.T) {
	addrs, err := launch.FreeAddrs("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOpts{kafkaAddr: addrs[0], httpAddr: addrs[1]})
	want := []string{
		"serving clients on " + s.addr,
		"Kafka protocol on " + addrs[0],
		"HTTP API on http://" + addrs[1],
		"console on http://" + addrs[1] + "/",
		"metrics on http://" + addrs[1] + "/metrics",
	}
	eventually(t, 10*time.Second, "the banner", func() bool { return strings.Contains(s.stdout.String(), want[len(want)-1]) })
	out := s.stdout.String()
	for _, w := range want {
		if !strings.Contains(out, w+"\n") && !strings.Contains(out, w+" ") {
			t.Fatalf("banner lacks %q:\n%s", w, out)
		}
	}
	for _, u := range []string{"http://" + addrs[1] + "/", "http://" + addrs[1] + "/metrics"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", u, resp.Status)
		}
	}
}
