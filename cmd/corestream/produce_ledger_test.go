package main

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// The ledger's account of a run, step by step: "a L P" acknowledges line
// L on partition P (offset 10*L), "f L P E" fails it with error E (too
// large, earlier, timeout, closed), "n N" accepts N more lines.
func TestLineLedgerReport(t *testing.T) {
	errs := map[string]error{
		"large":   &wire.ErrorResponse{Err: wire.ErrMessageTooLarge, Message: "too large"},
		"earlier": fmt.Errorf("%w (t/1: too large)", client.ErrEarlierRecordFailed),
		"timeout": fmt.Errorf("%w: t/0 after 3 failed attempts (the batch may have been written)", client.ErrDeliveryTimeout),
		"closed":  client.ErrClosed,
		"unsent":  fmt.Errorf("%w (%w)", client.ErrClosed, client.ErrNeverSent),
	}
	cases := []struct {
		name  string
		steps string
		abort bool // set an abort cause before the steps
		want  produceReport
		// summary holds substrings of the human report ("" for none).
		summary []string
	}{
		{name: "all acknowledged out of order", steps: "n 3; a 2 0; a 3 1; a 1 0",
			want: produceReport{Sent: 3, Acknowledged: 3, AcknowledgedThrough: 3,
				Partitions: []partitionReport{{0, 2, 2, 20, 0}, {1, 1, 3, 30, 0}}}},
		{name: "refused line stops its partition; another acknowledges later lines",
			steps: "n 6; a 1 0; a 2 1; f 3 1 large; a 4 0; f 5 1 earlier; a 6 0",
			want: produceReport{Sent: 6, Acknowledged: 4, Failed: 2, AcknowledgedThrough: 2, FirstFailedLine: 3, Error: "MESSAGE_TOO_LARGE: too large",
				AckedAfterFailure: []lineRange{{4, 4}, {6, 6}}, NotWritten: []lineRange{{3, 3}, {5, 5}},
				Partitions: []partitionReport{{0, 3, 6, 60, 0}, {1, 1, 2, 20, 3}}},
			summary: []string{"acknowledged lines 1-2; line 3 failed: MESSAGE_TOO_LARGE: too large",
				"acknowledged after line 3 as well (other partitions): lines 4, 6", "not written: lines 3, 5",
				"partition 1: 1 lines acknowledged (the last is line 2, offset 20); first failed line 3"}},
		{name: "a later line failing first in time is not the first failed line",
			steps: "n 4; f 4 0 timeout; a 1 0; f 2 0 large; f 3 0 earlier",
			want: produceReport{Sent: 4, Acknowledged: 1, Failed: 3, AcknowledgedThrough: 1, FirstFailedLine: 2, Error: "MESSAGE_TOO_LARGE: too large",
				NotWritten: []lineRange{{2, 3}}, OutcomeUnknown: []lineRange{{4, 4}}, Partitions: []partitionReport{{0, 1, 1, 10, 2}}},
			summary: []string{"may have been written (no answer came): line 4", "first check with consume"}},
		{name: "given up: closed lines carry the abort cause, unsent ones are not written", abort: true,
			steps: "n 5; a 1 0; f 2 0 closed; f 3 0 closed; f 4 0 unsent; f 5 0 unsent",
			want: produceReport{Sent: 5, Acknowledged: 1, Failed: 4, AcknowledgedThrough: 1, FirstFailedLine: 2, Error: "no answer within --timeout (1s)",
				OutcomeUnknown: []lineRange{{2, 3}}, NotWritten: []lineRange{{4, 5}}, Partitions: []partitionReport{{0, 1, 1, 10, 2}}},
			summary: []string{"acknowledged line 1; line 2 failed: no answer within --timeout (1s)"}},
		{name: "given up before the producer failed the lines still in flight", abort: true,
			steps: "n 3; a 1 0; a 3 1",
			want: produceReport{Sent: 3, Acknowledged: 2, Failed: 1, AcknowledgedThrough: 1, FirstFailedLine: 2, Error: "no answer within --timeout (1s)",
				OutcomeUnknown: []lineRange{{2, 2}}, AckedAfterFailure: []lineRange{{3, 3}}, Partitions: []partitionReport{{0, 1, 1, 10, 0}, {1, 1, 3, 30, 0}}},
			summary: []string{"acknowledged line 1; line 2 failed: no answer within --timeout (1s)"}},
		{name: "nothing sent", steps: "",
			want: produceReport{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLineLedger()
			if c.abort {
				l.abortCause = fmt.Errorf("%w (1s)", errNoAnswer)
			}
			now := time.Unix(1000, 0)
			for _, step := range strings.Split(c.steps, ";") {
				var op, e string
				var line int
				var part int32
				f := strings.Fields(step)
				if len(f) == 0 {
					continue
				}
				op = f[0]
				fmt.Sscan(f[1], &line)
				if len(f) > 2 {
					fmt.Sscan(f[2], &part)
				}
				if len(f) > 3 {
					e = f[3]
				}
				switch op {
				case "n":
					for i := 0; i < line; i++ {
						l.accept(l.sent+1, now)
					}
				case "a":
					l.ack(line, part, int64(10*line))
				case "f":
					l.fail(line, part, errs[e])
				}
			}
			got := l.report()
			want := c.want
			for _, rs := range []*[]lineRange{&want.AckedAfterFailure, &want.OutcomeUnknown, &want.NotWritten} {
				if *rs == nil {
					*rs = []lineRange{}
				}
			}
			if want.Partitions == nil {
				want.Partitions = []partitionReport{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("report\n got %+v\nwant %+v", got, want)
			}
			sum := got.summary()
			if len(c.summary) == 0 && want.FirstFailedLine == 0 && sum != "" {
				t.Fatalf("summary of a complete run: %q", sum)
			}
			for _, s := range c.summary {
				if !strings.Contains(sum, s) {
					t.Errorf("summary %q\nlacks %q", sum, s)
				}
			}
		})
	}
}

// The oldest line in flight is what produce's --timeout watches: it moves
// on as lines get outcomes in any order, and a taken-back line is gone.
func TestLineLedgerWaitingSince(t *testing.T) {
	l := newLineLedger()
	t0 := time.Unix(1000, 0)
	if _, ok := l.waitingSince(); ok {
		t.Fatal("an empty ledger is waiting")
	}
	for i := 1; i <= 4; i++ {
		l.accept(i, t0.Add(time.Duration(i)*time.Second))
	}
	check := func(want int) {
		t.Helper()
		since, ok := l.waitingSince()
		if want == 0 {
			if ok {
				t.Fatalf("waiting since %v, want nothing in flight", since)
			}
			return
		}
		if !ok || !since.Equal(t0.Add(time.Duration(want)*time.Second)) {
			t.Fatalf("waiting since %v (%v), want line %d's time", since, ok, want)
		}
	}
	check(1)
	l.ack(2, 0, 0)
	check(1)
	l.fail(1, 0, errors.New("x"))
	check(3)
	l.unaccept(4)
	l.ack(3, 0, 0)
	check(0)
	if l.sent != 3 {
		t.Fatalf("sent %d after taking line 4 back", l.sent)
	}
}

func TestCertainlyNotWritten(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w (t/0: x)", client.ErrEarlierRecordFailed), true},
		{&wire.ErrorResponse{Err: wire.ErrMessageTooLarge}, true},
		{fmt.Errorf("%w: x", errNotAccepted), true},
		{&wire.ErrorResponse{Err: wire.ErrRequestTimedOut}, false},
		{&wire.ErrorResponse{Err: wire.ErrNotEnoughReplicas}, false},
		{fmt.Errorf("%w: (the batch may have been written): %w", client.ErrDeliveryTimeout, &wire.ErrorResponse{Err: wire.ErrMessageTooLarge}), false},
		{client.ErrClosed, false},
		{fmt.Errorf("%w: t/1 after 10 failed attempts (%w): %w", client.ErrRetriesExhausted, client.ErrNeverSent,
			&wire.ErrorResponse{Err: wire.ErrNotEnoughReplicas}), true},
		{errors.New("something else"), false},
	} {
		if got := certainlyNotWritten(c.err); got != c.want {
			t.Errorf("certainlyNotWritten(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A large input costs the ledger O(1) per line: two million lines
// acknowledged one by one, in order, each advancing the prefix by one
// (copying the window on each advance made a 5M-line produce crawl).
func TestLineLedgerLargeInput(t *testing.T) {
	const lines = 2_000_000
	l := newLineLedger()
	now := time.Unix(1000, 0)
	for i := 1; i <= lines; i++ {
		l.accept(i, now)
	}
	for i := 1; i <= lines; i++ {
		l.ack(i, int32(i%3), int64(i/3))
	}
	if r := l.report(); r.AcknowledgedThrough != lines || r.FirstFailedLine != 0 || len(l.window) != 0 {
		t.Fatalf("report %+v, window %d", r, len(l.window))
	}
}
