package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReassignUsage: the reassign commands refuse what they cannot send,
// with a usage error that says what is wrong, before any request.
func TestReassignUsage(t *testing.T) {
	c := newCLI(t, 1)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notJSON := write("bad.json", "topic orders 0 -> 2,3,4")
	oldVersion := write("v2.json", `{"version": 2, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}`)
	empty := write("empty.json", `{"version": 1, "partitions": []}`)
	valid := write("ok.json", `{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}`)
	unknownField := write("field.json", `{"version": 1, "partitions": [{"topic": "t", "partition": 0, "nodes": [1]}]}`)
	cases := []struct {
		args []string
		text string
	}{
		{[]string{"partition", "reassign", "t", "0"}, "--replicas is required"},
		{[]string{"partition", "reassign", "t", "0", "--replicas", "1,x"}, `"x" is not a node id`},
		{[]string{"partition", "reassign", "t", "0", "--replicas", "0,1"}, `"0" is not a node id`},
		{[]string{"partition", "reassign", "t", "0", "--replicas", "1,2", "--cancel"}, "--cancel takes no --replicas"},
		{[]string{"partition", "reassign", "t"}, "a TOPIC and a partition P"},
		{[]string{"cluster", "reassign", "--dry-run"}, "need a --plan"},
		{[]string{"cluster", "reassign", "--plan", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"cluster", "reassign", "--plan", notJSON}, "not a plan"},
		{[]string{"cluster", "reassign", "--plan", oldVersion}, "version 2"},
		{[]string{"cluster", "reassign", "--plan", empty}, "0 partitions"},
		{[]string{"cluster", "reassign", "--plan", unknownField}, `unknown field "nodes"`},
		{[]string{"partition", "reassign", "t", "0", "--replicas", "1,2", "--throttle", "fast"}, `--throttle "fast"`},
		{[]string{"cluster", "reassign", "--plan", valid, "--throttle", "-5"}, `--throttle "-5"`},
		{[]string{"node", "drain"}, "a node ID"},
		{[]string{"node", "drain", "x"}, `"x" is not a node id`},
		{[]string{"node", "undrain", "0"}, `"0" is not a node id`},
		{[]string{"node", "replace", "3"}, "the OLD node ID and the NEW one"},
	}
	for _, tc := range cases {
		code, _, errs := c.run("", tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.text) {
			t.Errorf("corestream %s: exit %d, stderr %q; want usage (2) with %q", strings.Join(tc.args, " "), code, errs, tc.text)
		}
	}
}

func TestParseRate(t *testing.T) {
	cases := map[string]int64{"0": 0, "1048576": 1 << 20, "512K": 512 << 10, "20M": 20 << 20, "20MiB": 20 << 20, "2G": 2 << 30, "64MB/s": 64 << 20}
	for in, want := range cases {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1T", "9999999999G"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) accepted", bad)
		}
	}
}

// progressLine draws the share of moves done and, once every move under
// way has a rate, their ETA.
func TestProgressLine(t *testing.T) {
	left := []reassignMoveJSON{{BytesBehind: 10 << 20, BytesMoved: 30 << 20, EtaMs: 2000}, {BytesBehind: 10 << 20, EtaMs: 2000}}
	got := progressLine(1500*time.Millisecond, 3, 4, left)
	want := "1.5s [###############.....] 3/4 moves done, 20.0 MiB behind, 30.0 MiB moved, ETA 2s"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	left[1].EtaMs = -1
	if got := progressLine(0, 0, 2, left); !strings.HasSuffix(got, "ETA -") {
		t.Fatalf("an unknown rate: %q", got)
	}
}
