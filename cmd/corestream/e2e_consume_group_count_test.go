package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// `consume --group G --count N` prints N records, commits what it
// printed and no more, and leaves: the group's lag is the records it
// did not print, and a second run prints the next ones.
func TestE2EConsumeGroupCount(t *testing.T) {
	s := startServer(t, serverOpts{})
	s.cliOK("", "topic", "create", "counted", "--partitions", "1")
	var in strings.Builder
	for i := range 100 {
		fmt.Fprintf(&in, "v%d\n", i)
	}
	s.cliOK(in.String(), "produce", "counted")
	out := s.cliOK("", "consume", "counted", "--group", "counters", "--count", "30", "-f", `%o\n`)
	if got := strings.Count(out, "\n"); got != 30 {
		t.Fatalf("consume --count 30 printed %d lines:\n%s", got, out)
	}
	var desc groupDescJSON
	if err := json.Unmarshal([]byte(s.cliOK("", "--json", "group", "describe", "counters")), &desc); err != nil {
		t.Fatal(err)
	}
	if len(desc.Partitions) != 1 || desc.Partitions[0].Committed != 30 || desc.TotalLag != 70 || len(desc.Members) != 0 {
		t.Fatalf("after 30 of 100 records: %+v; want committed 30, lag 70, no member", desc)
	}
	out = s.cliOK("", "consume", "counted", "--group", "counters", "--count", "5", "-f", `%o\n`)
	if out != "30\n31\n32\n33\n34\n" {
		t.Fatalf("the second run printed %q, want offsets 30 to 34", out)
	}
}
