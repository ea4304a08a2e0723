package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	}
	for _, tc := range cases {
		code, _, errs := c.run("", tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.text) {
			t.Errorf("corestream %s: exit %d, stderr %q; want usage (2) with %q", strings.Join(tc.args, " "), code, errs, tc.text)
		}
	}
}
