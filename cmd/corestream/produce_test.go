package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

// endless returns a reader of input followed by lines that never end
// ("key-i:i" numbered on from input's), as a pipe that never closes would.
func endless(input string) io.Reader {
	n := strings.Count(input, "\n")
	return io.MultiReader(strings.NewReader(input), &lineSource{next: n + 1})
}

// lineSource produces "key-i:i\n" for i from next on, without end.
type lineSource struct {
	next int
	buf  []byte
}

func (s *lineSource) Read(p []byte) (int, error) {
	for len(s.buf) < len(p) {
		s.buf = fmt.Appendf(s.buf, "key-%d:%d\n", s.next, s.next)
		s.next++
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// keyedLines returns n lines "key-i:i" (i from 1) and the partition of
// each line's key among partitions (index i-1).
func keyedLines(n int, partitions int32) (string, []int32) {
	var b strings.Builder
	parts := make([]int32, n)
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("key-%d", i)
		fmt.Fprintf(&b, "%s:%d\n", key, i)
		parts[i-1] = client.KeyHashPartitioner().Partition(client.Record{Key: []byte(key)}, partitions)
	}
	return b.String(), parts
}

// inRanges reports whether line is in one of rs (sorted, disjoint).
func inRanges(line int, rs []lineRange) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i][1] >= line })
	return i < len(rs) && rs[i][0] <= line
}

// checkReportMatchesLog checks a produce report against what the
// partitions hold (values are line numbers): every acknowledged line is
// stored once, in input order per partition; a line not acknowledged is
// stored only if the report says it may have been; nothing after the
// last line sent is stored.
func checkReportMatchesLog(t *testing.T, rep produceReport, stored map[int32][]string) {
	t.Helper()
	seen := map[int]int32{}
	for p, vals := range stored {
		last := 0
		for _, v := range vals {
			var line int
			if _, err := fmt.Sscan(v, &line); err != nil {
				t.Fatalf("partition %d holds %q", p, v)
			}
			if _, dup := seen[line]; dup {
				t.Errorf("line %d stored twice", line)
			}
			if line <= last {
				t.Errorf("partition %d: line %d stored after line %d", p, line, last)
			}
			seen[line], last = p, line
		}
	}
	for line := 1; line <= rep.Sent; line++ {
		acked := line <= rep.AcknowledgedThrough || inRanges(line, rep.AckedAfterFailure)
		_, stored := seen[line]
		switch {
		case acked && !stored:
			t.Errorf("line %d acknowledged but not stored", line)
		case !acked && stored && !inRanges(line, rep.OutcomeUnknown):
			t.Errorf("line %d stored, but reported neither acknowledged nor of unknown outcome", line)
		}
	}
	for line := range seen {
		if line > rep.Sent {
			t.Errorf("line %d stored, but only %d lines were sent", line, rep.Sent)
		}
	}
}

// One partition refuses every batch: produce stops reading at once, the
// lines of that partition are not written, and the report says exactly
// which lines the other partitions acknowledged, before and after it.
func TestProduceStopsAtFirstFailedPartition(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t", "--partitions", "3")
	input, parts := keyedLines(2000, 3)
	c.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Partitions: []int32{1},
		Err: &wire.ErrorResponse{Err: wire.ErrMessageTooLarge, Message: "batch of 99 bytes exceeds the maximum 10"}})
	code, out, errs := c.runReader(endless(input), "--json", "produce", "t", "--key-separator", ":")
	var rep produceReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitError || err != nil {
		t.Fatalf("exit %d (%v)\nstdout %s\nstderr %s", code, err, tail(out, 2000), errs)
	}
	first := 0
	for i, p := range parts {
		if p == 1 {
			first = i + 1
			break
		}
	}
	if rep.FirstFailedLine != first || rep.AcknowledgedThrough != first-1 || !strings.Contains(errs, "MESSAGE_TOO_LARGE") {
		t.Fatalf("first failed line %d (acknowledged through %d), want %d; stderr %s", rep.FirstFailedLine, rep.AcknowledgedThrough, first, errs)
	}
	if !rep.UnreadInput {
		t.Fatalf("produce read all of an endless input")
	}
	stored := map[int32][]string{}
	for p := int32(0); p < 3; p++ {
		stored[p] = c.values("t", p)
	}
	if len(stored[1]) != 0 {
		t.Fatalf("the refusing partition holds %d lines", len(stored[1]))
	}
	checkReportMatchesLog(t, rep, stored)
}

// A broker that stops answering (it holds every produce response) stops
// produce within --timeout of the oldest unanswered line: exit 1, the
// lines it holds reported as possibly written (they were: the fake
// appends before holding the answer).
func TestProduceGivesUpWithinTimeout(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t")
	c.ok("x\ny\n", "produce", "t") // the partition has a leader that answered

	hold := make(chan struct{})
	defer close(hold)
	c.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIProduce}, Hold: hold})
	var lines strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintln(&lines, i)
	}
	start := time.Now()
	code, out, errs := c.runTimeout("1s", lines.String(), "--json", "produce", "t")
	took := time.Since(start)
	var rep produceReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitError || err != nil {
		t.Fatalf("exit %d (%v)\nstdout %s\nstderr %s", code, err, tail(out, 2000), errs)
	}
	// 1 s for the oldest line, then at most closeWaitMax to fail the rest;
	// generous for a loaded machine, far below the minutes it used to hang.
	if took > 1*time.Second+closeWaitMax+5*time.Second {
		t.Fatalf("produce took %v with --timeout 1s", took)
	}
	// The producer's own delivery timeout (a tenth sooner) fails the
	// lines first; produce's watchdog is the backstop if it does not.
	gaveUp := strings.Contains(errs, "delivery timeout") || strings.Contains(errs, "no answer within --timeout (1s)")
	if rep.FirstFailedLine != 1 || !gaveUp || !strings.Contains(errs, "may have been written") {
		t.Fatalf("report %+v\nstderr %s", rep, errs)
	}
	checkReportMatchesLog(t, rep, map[int32][]string{0: c.values("t", 0)[2:]})
}

// runTimeout is run with --timeout d instead of the default.
func (c *cli) runTimeout(d, stdin string, args ...string) (int, string, string) {
	c.t.Helper()
	return c.run(stdin, append([]string{"--timeout", d}, args...)...)
}

// A large keyed input is written whole, each line once, in order per
// partition, and the report says so.
func TestProduceLargeInput(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t", "--partitions", "3")
	input, _ := keyedLines(200_000, 3)
	var rep produceReport
	c.okJSON(&rep, input, "produce", "t", "--key-separator", ":")
	if rep.Sent != 200_000 || rep.AcknowledgedThrough != 200_000 || rep.FirstFailedLine != 0 || rep.UnreadInput {
		t.Fatalf("report %+v", rep)
	}
	stored := map[int32][]string{}
	total := 0
	for p := int32(0); p < 3; p++ {
		stored[p] = c.values("t", p)
		total += len(stored[p])
	}
	if total != 200_000 {
		t.Fatalf("%d lines stored, want 200000", total)
	}
	checkReportMatchesLog(t, rep, stored)
}

// A line whose partition's primary cannot be reached never leaves the
// client: the report says it was not written, not that it may have been.
func TestProduceNeverSentIsNotWritten(t *testing.T) {
	c := newCLI(t, 2)
	c.ok("", "topic", "create", "t", "--partitions", "2")
	var desc struct {
		Routes []routeJSON `json:"routes"`
	}
	c.okJSON(&desc, "", "topic", "describe", "t")
	if desc.Routes[1].Primary != 2 {
		t.Fatalf("partition 1's primary is node %d; the test stops node 2", desc.Routes[1].Primary)
	}
	c.fc.StopNode(2)
	code, out, errs := c.runTimeout("20s", "x\n", "--json", "produce", "t", "--partition", "1")
	var rep produceReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitError || err != nil {
		t.Fatalf("exit %d (%v)\nstdout %s\nstderr %s", code, err, out, errs)
	}
	if len(rep.NotWritten) != 1 || len(rep.OutcomeUnknown) != 0 || !strings.Contains(errs, "never sent") {
		t.Fatalf("report %+v\nstderr %s", rep, errs)
	}
}

// An interrupt (Ctrl-C) stops reading; every line taken is answered and
// the report is exact: the lines acknowledged are a prefix of the input,
// all of them stored.
func TestProduceInterrupted(t *testing.T) {
	c := newCLI(t, 1)
	c.ok("", "topic", "create", "t")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == envBrokers {
			return c.fc.Addrs()[0]
		}
		return ""
	}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--timeout", "5s", "--json", "produce", "t", "--key-separator", ":"}, endless(""), &out, &errb, env)
	}()
	waitFor(t, "lines to be stored", func() bool { hw, _ := c.fc.HighWatermark("t", 0); return hw >= 1000 })
	cancel()
	var code int
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("produce still runs 30 s after the interrupt")
	}
	var rep produceReport
	if err := json.Unmarshal(out.Bytes(), &rep); code != exitError || err != nil {
		t.Fatalf("exit %d (%v)\nstdout %s\nstderr %s", code, err, tail(out.String(), 2000), errb.String())
	}
	if rep.FirstFailedLine != 0 || rep.AcknowledgedThrough != rep.Sent || !rep.UnreadInput ||
		!strings.Contains(errb.String(), fmt.Sprintf("interrupted: acknowledged lines 1-%d;", rep.Sent)) {
		t.Fatalf("report %+v\nstderr %s", rep, errb.String())
	}
	checkReportMatchesLog(t, rep, map[int32][]string{0: c.values("t", 0)})
}
