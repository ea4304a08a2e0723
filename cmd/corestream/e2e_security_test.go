package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A node with security.auth = scram, driven by the CLI as its users
// drive it: the administrator from the config creates a user and grants
// it a topic over HTTP, the native commands authenticate with --user and
// --password, and the refusals name their reason.
func TestCLIUsersAndPermissions(t *testing.T) {
	addr, httpAddr := startSecuredNode(t)
	run := func(wantCode int, wantOut string, args ...string) string {
		t.Helper()
		code, out, errs := runBin(t, "", append([]string{"--brokers", addr, "--timeout", "20s"}, args...)...)
		if code != wantCode || !strings.Contains(out+errs, wantOut) {
			t.Fatalf("corestream %s: exit %d, want %d with %q\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, wantOut, out, errs)
		}
		return out
	}
	root := []string{"--user", "root", "--password", "rootpw"}
	app := []string{"--user", "app", "--password", "apppw"}
	user := func(who []string, args ...string) []string {
		return append(append(append([]string{}, who...), "user", "--http", httpAddr), args...)
	}
	// The administrator may not be created yet the instant the node
	// serves: wait for the first login to work.
	eventually(t, 20*time.Second, "the administrator created", func() bool {
		code, _, _ := runBin(t, "", user(root, "list")...)
		return code == 0
	})
	run(0, "app (user)", user(root, "create", "app", "--new-password", "apppw")...)
	run(0, "allow write topic orders", user(root, "grant", "app", "write", "--topic", "orders")...)
	run(1, "AUTHORIZATION_FAILED", user(app, "list")...)
	run(1, "AUTHENTICATION_FAILED", "topic", "create", "orders", "--partitions", "1")
	run(1, "AUTHENTICATION_FAILED", "--user", "root", "--password", "wrong", "topic", "list")
	run(0, "orders", append(root, "topic", "create", "orders", "--partitions", "1")...)
	run(0, "", append(root, "topic", "create", "payments", "--partitions", "1")...)
	run(1, "AUTHORIZATION_FAILED", append(app, "topic", "delete", "orders")...)
	// A topic the user may not describe is left out of the metadata it
	// sees, as Kafka does: to that user it does not exist.
	run(1, "UNKNOWN_TOPIC_OR_PARTITION", append(app, "topic", "describe", "payments")...)
	out := run(0, "", user(root, "list", "--json")...)
	if !strings.Contains(out, `"op": "write"`) || strings.Contains(out, "stored_key") {
		t.Fatalf("user list --json: %s", out)
	}
	run(0, "deleted user app", user(root, "delete", "app")...)
	run(1, "AUTHENTICATION_FAILED", user(app, "list")...)
}

// startSecuredNode runs `corestream serve` with security.auth = scram, the
// bootstrap administrator root/rootpw and HTTP on, and returns its client
// and HTTP addresses once it serves both.
func startSecuredNode(t *testing.T) (addr, httpAddr string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "corestream.toml")
	if err := os.WriteFile(cfg, []byte("[security]\nauth = \"scram\"\nadmin_user = \"root\"\nadmin_password = \"rootpw\"\n[http]\njwt_secret = \"j\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(corestreamBin(t), "serve", "--config", cfg, "--data", filepath.Join(dir, "data"),
		"--client-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--shards", "1")
	stdout, stderr := &syncBuf{}, &syncBuf{}
	srv.Stdout, srv.Stderr = stdout, stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGKILL)
		srv.Wait()
		if t.Failed() {
			t.Logf("server stderr:\n%s", tail(stderr.String(), 8<<10))
		}
	})
	httpRE := regexp.MustCompile(`HTTP API on http://(\S+)`)
	eventually(t, e2eStartTimeout, "the node serving", func() bool {
		m, h := servingRE.FindStringSubmatch(stdout.String()), httpRE.FindStringSubmatch(stdout.String())
		if m == nil || h == nil {
			return false
		}
		addr, httpAddr = m[1], h[1]
		return true
	})
	return addr, httpAddr
}
