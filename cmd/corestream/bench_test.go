package main

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/bench"
)

func TestBenchCommands(t *testing.T) {
	c := newCLI(t, 1)
	path := filepath.Join(t.TempDir(), "report.json")
	out := c.ok("", "bench", "produce", "--messages", "300", "--warmup", "0", "--message-bytes", "100", "--json", path)
	if !strings.Contains(out, "corestream produce: 1 producers") || !strings.Contains(out, "produce total") {
		t.Fatalf("table:\n%s", out)
	}
	rep, err := bench.ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Produce.Messages != 300 || rep.Spec.MessageBytes != 100 || rep.Machine.Cores == 0 {
		t.Fatalf("report %+v", rep)
	}

	// --json - replaces the table with the report; the progress bar goes
	// to standard error.
	code, out, errs := c.run("", "bench", "e2e", "--messages", "200", "--warmup", "0", "--topic", "e2e", "--json", "-")
	if code != exitOK {
		t.Fatalf("e2e: exit %d: %s", code, errs)
	}
	var r bench.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("e2e JSON: %v\n%s", err, out)
	}
	if r.Consume == nil || r.Consume.Messages != 200 || r.Lost != 0 {
		t.Fatalf("e2e report %+v", r.Consume)
	}
}

func TestBenchUsage(t *testing.T) {
	c := newCLI(t, 1)
	for _, args := range [][]string{
		{"bench"},
		{"bench", "produce", "--message-bytes", "3"},
		{"bench", "consume", "--messages", "0", "--duration", "0"},
		{"bench", "e2e", "--acks", "all"},
		{"bench", "produce", "extra"},
	} {
		if code, _, errs := c.run("", args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errs)
		}
	}
}

func TestBenchProbe(t *testing.T) {
	c := newCLI(t, 1)
	dir := t.TempDir()
	out := c.ok("", "bench", "probe", "--dir", dir, "--time", "50ms")
	for _, want := range []string{"loopback TCP blast", "loopback TCP round trip", "loopback round trip, two processes", "disk write+fdatasync", "ideal broker"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}
	// The two-process round trip ran this binary as `bench echo`.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "two processes") && !strings.Contains(line, "p50") {
			t.Errorf("the two-process round trip was not measured: %s", line)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the probe left %d files behind", len(entries))
	}
}

// `bench echo` answers each 1 KiB request with 8 bytes until the
// connection closes, then exits cleanly; it needs --connect.
func TestBenchEcho(t *testing.T) {
	c := newCLI(t, 1)
	if code, _, errs := c.run("", "bench", "echo"); code != exitUsage || !strings.Contains(errs, "--connect") {
		t.Fatalf("without --connect: exit %d, %q", code, errs)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		code int
		errs string
	}
	done := make(chan result, 1)
	go func() {
		code, _, errs := c.run("", "bench", "echo", "--connect", ln.Addr().String())
		done <- result{code, errs}
	}()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	ans := make([]byte, 8)
	for i := range 3 {
		if _, err := conn.Write(make([]byte, 1024)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(conn, ans); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	conn.Close()
	if r := <-done; r.code != exitOK {
		t.Fatalf("exit %d after the connection closed: %s", r.code, r.errs)
	}
}
