package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// The ledger of `produce`: the outcome of every input line, kept so that
// the command can say exactly which lines were acknowledged when it stops
// early. It is the pure core of produce (no I/O, time passed in); produce
// calls it under one mutex from the reading goroutine and the producer's
// delivery goroutine.

// Outcomes of a line the ledger holds.
const (
	// lineInFlight: handed to the producer, no outcome yet.
	lineInFlight = iota
	// lineAcked: acknowledged by the cluster.
	lineAcked
	// lineNotWritten: failed, and certainly not written (refused by the
	// broker, never sent, or not a record at all).
	lineNotWritten
	// lineUnknown: failed, but it may have been written (sent, and no
	// answer came back).
	lineUnknown
)

// lineState is one line of the ledger's window: 8 bytes, as the window
// can hold every line read while one partition lags.
type lineState struct {
	outcome uint8
	// acceptedMs is when the producer took the line, in milliseconds
	// since the ledger's epoch (49 days fit).
	acceptedMs uint32
}

// partitionTally is what the ledger knows of one partition.
type partitionTally struct {
	acked           int
	lastAckedLine   int
	lastOffset      int64
	firstFailedLine int
}

// lineLedger records which input lines were acknowledged.
//
// Invariant: every line in 1..prefix is acknowledged; window[i] is line
// prefix+1+i; prefix+len(window) == sent.
type lineLedger struct {
	prefix int
	window []lineState
	sent   int
	acked  int
	// firstErr is the error of the lowest-numbered failed line.
	firstErr        error
	firstFailedLine int
	// oldest indexes the window's first line still in flight (or
	// len(window)); it only moves forward between prefix advances.
	oldest int
	parts  map[int32]*partitionTally
	// epoch is when the first line was accepted.
	epoch time.Time
	// abortCause, once set, replaces client.ErrClosed for the lines the
	// producer fails when produce gives up waiting.
	abortCause error
}

func newLineLedger() *lineLedger {
	return &lineLedger{parts: map[int32]*partitionTally{}}
}

// accept records that line (the next one: sent+1) was handed to the
// producer at now.
func (l *lineLedger) accept(line int, now time.Time) {
	if line != l.sent+1 {
		panic(fmt.Sprintf("produce ledger: line %d accepted after line %d", line, l.sent))
	}
	if l.sent == 0 {
		l.epoch = now
	}
	l.sent = line
	l.window = append(l.window, lineState{outcome: lineInFlight, acceptedMs: uint32(now.Sub(l.epoch).Milliseconds())})
}

// unaccept takes back line, the last accepted, which the producer did not
// take after all (produce stopped while it waited for buffer space).
func (l *lineLedger) unaccept(line int) {
	if line != l.sent || l.state(line).outcome != lineInFlight {
		panic(fmt.Sprintf("produce ledger: line %d taken back (sent %d)", line, l.sent))
	}
	l.sent--
	l.window = l.window[:len(l.window)-1]
	l.oldest = min(l.oldest, len(l.window))
}

// state returns the window entry of line. REQUIRES: prefix < line <= sent.
func (l *lineLedger) state(line int) *lineState {
	return &l.window[line-l.prefix-1]
}

// ack records line's acknowledgement at offset of partition.
func (l *lineLedger) ack(line int, partition int32, offset int64) {
	st := l.state(line)
	if st.outcome != lineInFlight {
		panic(fmt.Sprintf("produce ledger: line %d acknowledged after an outcome", line))
	}
	st.outcome = lineAcked
	l.acked++
	pt := l.part(partition)
	pt.acked++
	pt.lastAckedLine = max(pt.lastAckedLine, line)
	pt.lastOffset = max(pt.lastOffset, offset)
	l.advance()
}

// fail records line's failure with err; partition is -1 when the line
// never reached one.
func (l *lineLedger) fail(line int, partition int32, err error) {
	st := l.state(line)
	if st.outcome != lineInFlight {
		panic(fmt.Sprintf("produce ledger: line %d failed after an outcome", line))
	}
	switch {
	case l.abortCause == nil || !errors.Is(err, client.ErrClosed):
	case errors.Is(err, client.ErrNeverSent):
		err = fmt.Errorf("%w: produce gave up on the cluster before sending it", client.ErrNeverSent)
	default:
		err = l.abortCause
	}
	st.outcome = lineUnknown
	if certainlyNotWritten(err) {
		st.outcome = lineNotWritten
	}
	if l.firstFailedLine == 0 || line < l.firstFailedLine {
		l.firstFailedLine, l.firstErr = line, err
	}
	if partition >= 0 {
		if pt := l.part(partition); pt.firstFailedLine == 0 || line < pt.firstFailedLine {
			pt.firstFailedLine = line
		}
	}
	l.advance()
}

func (l *lineLedger) part(p int32) *partitionTally {
	pt := l.parts[p]
	if pt == nil {
		pt = &partitionTally{lastOffset: -1}
		l.parts[p] = pt
	}
	return pt
}

// advance drops the acknowledged lines at the window's head into prefix
// (a failed line stops it: the window keeps every line after it for the
// report) and moves oldest past finished lines.
func (l *lineLedger) advance() {
	n := 0
	for n < len(l.window) && l.window[n].outcome == lineAcked {
		n++
	}
	if n > 0 {
		l.prefix += n
		// Reslicing is O(1); append moves the live lines to a new array
		// when the old one's tail is used up (amortised O(1) per line).
		l.window = l.window[n:]
		l.oldest = max(0, l.oldest-n)
	}
	for l.oldest < len(l.window) && l.window[l.oldest].outcome != lineInFlight {
		l.oldest++
	}
}

// inFlight reports whether some line has no outcome yet.
func (l *lineLedger) inFlight() bool { return l.oldest < len(l.window) }

// waitingSince returns when the oldest line still in flight was accepted;
// ok is false when none is.
func (l *lineLedger) waitingSince() (t time.Time, ok bool) {
	if !l.inFlight() {
		return time.Time{}, false
	}
	return l.epoch.Add(time.Duration(l.window[l.oldest].acceptedMs) * time.Millisecond), true
}

// failedAny reports whether some line has failed.
func (l *lineLedger) failedAny() bool { return l.firstFailedLine != 0 }

// certainlyNotWritten reports whether a line that failed with err was
// certainly not written: the producer never sent it, or the broker refused
// it with a final answer. Every other failure (a delivery timeout, a lost
// connection, retries exhausted, an abort) may have been written.
func certainlyNotWritten(err error) bool {
	switch {
	case errors.Is(err, client.ErrEarlierRecordFailed), errors.Is(err, client.ErrRecordTooLarge), errors.Is(err, client.ErrNeverSent),
		errors.Is(err, errNoKeySeparator), errors.Is(err, errNotAccepted):
		return true
	case errors.Is(err, client.ErrDeliveryTimeout), errors.Is(err, client.ErrRetriesExhausted),
		errors.Is(err, client.ErrConnectionLost), errors.Is(err, client.ErrClosed):
		return false
	}
	var we *wire.Error
	return errors.As(err, &we) && !we.Retriable && we != wire.ErrRequestTimedOut
}

// Errors a line can fail with before it reaches the producer.
var (
	// errNoKeySeparator: a --key-separator line without the separator.
	errNoKeySeparator = errors.New("no key separator")
	// errNotAccepted wraps the error of a record the producer refused to
	// take (it was never sent).
	errNotAccepted = errors.New("not accepted by the producer")
	// errNoOutcome: produce stopped waiting before the line's answer came.
	errNoOutcome = errors.New("no answer came before produce stopped waiting")
)

// lineRange is the lines from..to, both included.
type lineRange [2]int

// produceReport is produce's account of its input, printed with --json.
type produceReport struct {
	// Sent counts the lines handed to the producer; Acknowledged those
	// acknowledged; Failed the others.
	Sent         int `json:"sent"`
	Acknowledged int `json:"acknowledged"`
	Failed       int `json:"failed"`
	// AcknowledgedThrough: every line up to it was acknowledged.
	AcknowledgedThrough int `json:"acknowledged_through_line"`
	// FirstFailedLine is AcknowledgedThrough+1 when a line failed.
	FirstFailedLine int    `json:"first_failed_line,omitempty"`
	Error           string `json:"error,omitempty"`
	// After the first failed line: the lines acknowledged anyway (on other
	// partitions), those that may have been written, and those that
	// certainly were not.
	AckedAfterFailure []lineRange       `json:"acknowledged_after_failure"`
	OutcomeUnknown    []lineRange       `json:"outcome_unknown"`
	NotWritten        []lineRange       `json:"not_written"`
	Partitions        []partitionReport `json:"partitions"`
	// UnreadInput says produce stopped before the end of its input: the
	// lines after Sent were not read.
	UnreadInput bool `json:"unread_input"`
}

// partitionReport is one partition's part of the input.
type partitionReport struct {
	Partition            int32 `json:"partition"`
	Acknowledged         int   `json:"acknowledged"`
	LastAcknowledgedLine int   `json:"last_acknowledged_line,omitempty"`
	LastOffset           int64 `json:"last_offset"`
	FirstFailedLine      int   `json:"first_failed_line,omitempty"`
}

// report summarises the ledger. Lines still in flight (the producer did
// not fail them in time when produce gave up) count as of unknown outcome.
func (l *lineLedger) report() produceReport {
	r := produceReport{Sent: l.sent, Acknowledged: l.acked, Failed: l.sent - l.acked, AcknowledgedThrough: l.prefix,
		AckedAfterFailure: []lineRange{}, OutcomeUnknown: []lineRange{}, NotWritten: []lineRange{}, Partitions: []partitionReport{}}
	if len(l.window) > 0 {
		// The window starts at prefix+1, which is not acknowledged: it
		// failed, or its answer never came before produce stopped waiting.
		r.FirstFailedLine = l.prefix + 1
		switch {
		case l.firstFailedLine == r.FirstFailedLine:
			r.Error = l.firstErr.Error()
		case l.abortCause != nil:
			r.Error = l.abortCause.Error()
		default:
			r.Error = errNoOutcome.Error()
		}
	}
	for i := 0; i < len(l.window); {
		j := i
		for j+1 < len(l.window) && l.window[j+1].outcome == l.window[i].outcome {
			j++
		}
		rg := lineRange{l.prefix + 1 + i, l.prefix + 1 + j}
		switch l.window[i].outcome {
		case lineAcked:
			r.AckedAfterFailure = append(r.AckedAfterFailure, rg)
		case lineUnknown, lineInFlight:
			r.OutcomeUnknown = append(r.OutcomeUnknown, rg)
		case lineNotWritten:
			r.NotWritten = append(r.NotWritten, rg)
		}
		i = j + 1
	}
	for p, pt := range l.parts {
		r.Partitions = append(r.Partitions, partitionReport{Partition: p, Acknowledged: pt.acked,
			LastAcknowledgedLine: pt.lastAckedLine, LastOffset: pt.lastOffset, FirstFailedLine: pt.firstFailedLine})
	}
	sort.Slice(r.Partitions, func(i, j int) bool { return r.Partitions[i].Partition < r.Partitions[j].Partition })
	return r
}

// rangesShownMax bounds the ranges one line of the human report lists.
const rangesShownMax = 8

// formatRanges renders ranges as "lines 1-5, 9, 12-20" ("line 9" alone),
// at most rangesShownMax of them.
func formatRanges(rs []lineRange) string {
	var b strings.Builder
	if len(rs) == 1 && rs[0][0] == rs[0][1] {
		b.WriteString("line ")
	} else {
		b.WriteString("lines ")
	}
	for i, rg := range rs {
		if i == rangesShownMax {
			fmt.Fprintf(&b, " and %d more ranges (--json lists them all)", len(rs)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if rg[0] == rg[1] {
			fmt.Fprint(&b, rg[0])
		} else {
			fmt.Fprintf(&b, "%d-%d", rg[0], rg[1])
		}
	}
	return b.String()
}

// summary renders the report for an operator: which lines were
// acknowledged, the first that failed and why, what happened to the lines
// after it, and how to resume. Empty when every line was acknowledged.
func (r *produceReport) summary() string {
	if r.FirstFailedLine == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(acknowledgedPrefix(r.AcknowledgedThrough))
	fmt.Fprintf(&b, "; line %d failed: %s", r.FirstFailedLine, r.Error)
	fmt.Fprintf(&b, "\n  %d of %d lines sent were not acknowledged", r.Failed, r.Sent)
	if len(r.AckedAfterFailure) > 0 {
		fmt.Fprintf(&b, "\n  acknowledged after line %d as well (other partitions): %s", r.FirstFailedLine, formatRanges(r.AckedAfterFailure))
	}
	if len(r.OutcomeUnknown) > 0 {
		fmt.Fprintf(&b, "\n  not acknowledged, but may have been written (no answer came): %s", formatRanges(r.OutcomeUnknown))
	}
	if len(r.NotWritten) > 0 {
		fmt.Fprintf(&b, "\n  not written: %s", formatRanges(r.NotWritten))
	}
	if len(r.Partitions) > 1 {
		for _, p := range r.Partitions {
			fmt.Fprintf(&b, "\n  partition %d: %d lines acknowledged", p.Partition, p.Acknowledged)
			if p.Acknowledged > 0 {
				fmt.Fprintf(&b, " (the last is line %d, offset %d)", p.LastAcknowledgedLine, p.LastOffset)
			}
			if p.FirstFailedLine > 0 {
				fmt.Fprintf(&b, "; first failed line %d", p.FirstFailedLine)
			}
		}
	}
	if r.Acknowledged < r.Sent {
		b.WriteString("\n  to resume: send the lines not acknowledged again, in order")
		if len(r.OutcomeUnknown) > 0 {
			b.WriteString(" (first check with consume whether those that may have been written were)")
		}
		if r.UnreadInput {
			fmt.Fprintf(&b, ", then any input after line %d (produce stopped reading there)", r.Sent)
		}
	}
	return b.String()
}

// acknowledgedPrefix renders "acknowledged lines 1-N".
func acknowledgedPrefix(n int) string {
	switch n {
	case 0:
		return "no line acknowledged"
	case 1:
		return "acknowledged line 1"
	}
	return fmt.Sprintf("acknowledged lines 1-%d", n)
}
