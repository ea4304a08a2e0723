package main

import (
	"fmt"
	"strings"
	"testing"
)

// Keyless lines are spread over every partition: a short input's first
// lines one to each, a longer one in runs that still give each partition
// a fair share; keyed lines stay where their key's hash puts them.
func TestProduceKeylessSpreads(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t", "--partitions", "6")
	count := func() []int {
		out := make([]int, 6)
		for p := range int32(6) {
			out[p] = len(c.values("t", p))
		}
		return out
	}
	c.ok("a\nb\nc\nd\ne\nf\n", "produce", "t")
	if got := count(); fmt.Sprint(got) != "[1 1 1 1 1 1]" {
		t.Fatalf("6 keyless lines on 6 partitions: %v, want one each", got)
	}
	var lines strings.Builder
	for i := range 300 {
		fmt.Fprintf(&lines, "line-%d\n", i)
	}
	before := count()
	c.ok(lines.String(), "produce", "t")
	after := count()
	for p := range after {
		if d := after[p] - before[p]; d < 300/6/3 {
			t.Errorf("partition %d got %d of 300 keyless lines, want at least %d (all: %v then %v)", p, d, 300/6/3, before, after)
		}
	}
	// Keyed lines: by the key's hash.
	input, parts := keyedLines(60, 6)
	before = count()
	c.ok(input, "produce", "t", "--key-separator", ":")
	after = count()
	want := make([]int, 6)
	for _, p := range parts {
		want[p]++
	}
	for p := range after {
		if after[p]-before[p] != want[p] {
			t.Errorf("partition %d got %d keyed lines, want %d", p, after[p]-before[p], want[p])
		}
	}
}

// -H adds its headers, in order and repeatable, to every record; consume
// -f prints them with %h; a header without "=" or without a key is a
// usage error.
func TestProduceHeaders(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t", "--partitions", "1")
	c.ok("one\ntwo\n", "produce", "t", "-H", "trace=abc", "--header", "empty=", "-H", "trace=x=y")
	recs, err := c.fc.Records("t", 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("records %v %v", recs, err)
	}
	for _, r := range recs {
		var got []string
		for _, h := range r.Headers {
			got = append(got, string(h.Key)+"="+string(h.Value))
		}
		if strings.Join(got, ",") != "trace=abc,empty=,trace=x=y" {
			t.Errorf("record %q has headers %q", r.Value, got)
		}
	}
	out := c.ok("", "consume", "t", "--count", "2", "-f", `%h|%s\n`)
	if out != "trace=abc,empty=,trace=x=y|one\ntrace=abc,empty=,trace=x=y|two\n" {
		t.Errorf("consume -f '%%h|%%s\\n' printed %q", out)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if code, _, errs := c.run("x\n", "produce", "t", "-H", bad); code != exitUsage || !strings.Contains(errs, bad) {
			t.Errorf("-H %q: exit %d (%s), want a usage error naming it", bad, code, errs)
		}
	}
}
