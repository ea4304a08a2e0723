package netio

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLogLimit(t *testing.T) {
	const s = int64(time.Second)
	type step struct {
		atNs      int64
		flush     bool // flush instead of admit
		ok        bool
		before    int // suppressed lines reported (admit or flush)
		first     bool
		windowEnd int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"under the limit", []step{
			{atNs: 0, ok: true}, {atNs: 1 * s, ok: true}, {atNs: 2 * s, ok: true},
		}},
		{"past the limit, summary with the next line", []step{
			{atNs: 0, ok: true}, {atNs: 0, ok: true}, {atNs: 0, ok: true},
			{atNs: 1 * s, first: true, windowEnd: 10 * s}, {atNs: 2 * s}, {atNs: 9 * s},
			{atNs: 10 * s, ok: true, before: 3},
		}},
		{"summary from the timer, then a fresh window", []step{
			{atNs: 5 * s, ok: true}, {atNs: 5 * s, ok: true}, {atNs: 5 * s, ok: true},
			{atNs: 6 * s, first: true, windowEnd: 15 * s}, {atNs: 7 * s},
			{atNs: 14 * s, flush: true}, // not over yet
			{atNs: 15 * s, flush: true, before: 2},
			{atNs: 15 * s, flush: true}, // nothing twice
			{atNs: 16 * s, ok: true}, {atNs: 16 * s, ok: true}, {atNs: 16 * s, ok: true},
			{atNs: 17 * s, first: true, windowEnd: 26 * s},
		}},
		{"the window counts from its first line", []step{
			{atNs: 3 * s, ok: true}, {atNs: 12 * s, ok: true}, {atNs: 12 * s, ok: true},
			{atNs: 12 * s, first: true, windowEnd: 13 * s},
			{atNs: 13 * s, ok: true, before: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogLimit(3, 10*time.Second)
			for i, st := range tc.steps {
				if st.flush {
					if got := l.flush(st.atNs); got != st.before {
						t.Fatalf("step %d: flush %d, want %d", i, got, st.before)
					}
					continue
				}
				ok, before, first, end := l.admit(st.atNs)
				if ok != st.ok || before != st.before || first != st.first || (first && end != st.windowEnd) {
					t.Fatalf("step %d at %ds: admit = %v, %d, %v, %d; want %v, %d, %v, %d", i, st.atNs/s,
						ok, before, first, end, st.ok, st.before, st.first, st.windowEnd)
				}
			}
		})
	}
}

// logLines collects what a server logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// badConnection opens a connection that breaks the test protocol in one
// of four ways and returns its local address (the server's peer).
func badConnection(t *testing.T, addr, kind string) string {
	t.Helper()
	c := dialT(t, addr)
	var err error
	switch kind {
	case "oversize":
		_, err = c.Write([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	case "truncated":
		if _, err = c.Write(request(1, opEcho, make([]byte, 100))[:50]); err == nil {
			err = c.Conn.(*net.TCPConn).CloseWrite()
		}
	case "malformed": // a frame too short for the test protocol: the handler aborts
		_, err = c.Write([]byte{0, 0, 0, 3, 1, 2, 3})
	case "half-sent":
		_, err = c.Write([]byte{0, 0, 1})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.LocalAddr().String()
}

// Each connection closed for a fault is logged once, with the peer's
// address and the reason. Before, only an oversize frame was logged by
// netio (and the broker's handler logged it again).
func TestBadConnectionLogsOneLineEach(t *testing.T) {
	h := newTestHandler()
	var log logLines
	ts := startServer(t, 2, Config{FrameTimeout: 50 * time.Millisecond, Logf: log.logf}, h)
	kinds := []string{"oversize", "truncated", "malformed", "half-sent"}
	want := map[string]string{} // peer -> reason
	reasons := map[string]string{
		"oversize":  "frame too large: the peer announced a frame of 4294967295 bytes",
		"truncated": "connection closed mid-frame: 50 bytes of a frame arrived before the peer shut its side",
		"malformed": "short request: 3 bytes",
		"half-sent": "frame not completed within the frame timeout: 3 bytes of a frame arrived, then nothing for 50ms",
	}
	for _, k := range kinds {
		want[badConnection(t, ts.addr(), k)] = reasons[k]
	}
	for range kinds {
		recvWithin(t, h.closeCh)
	}
	lines := log.get()
	if len(lines) != len(kinds) {
		t.Fatalf("%d lines for %d bad connections:\n%s", len(lines), len(kinds), strings.Join(lines, "\n"))
	}
	for peer, reason := range want {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, " from "+peer+": ") && strings.Contains(l, reason) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d lines name %s with %q:\n%s", n, peer, reason, strings.Join(lines, "\n"))
		}
	}
}

// Many bad connections: LogLinesMax lines per LogInterval, then one
// summary line when the interval ends; the next interval logs again.
func TestBadConnectionLogsAreRateLimited(t *testing.T) {
	clk := &manualClock{}
	clk.ns.Store(int64(time.Hour))
	h := newTestHandler()
	var log logLines
	ts := startServerClock(t, clk, Config{Logf: log.logf, LogLinesMax: 5, LogInterval: 10 * time.Second}, h)
	const bad = 50
	for i := 0; i < bad; i++ {
		badConnection(t, ts.addr(), "oversize")
	}
	for i := 0; i < bad; i++ {
		recvWithin(t, h.closeCh)
	}
	if lines := log.get(); len(lines) != 5 {
		t.Fatalf("%d lines for %d bad connections, want 5:\n%s", len(lines), bad, strings.Join(lines, "\n"))
	}
	advance(t, ts, clk, 10*time.Second)
	lines := log.get()
	if len(lines) != 6 || lines[5] != "netio: suppressed 45 similar messages (limit: 5 lines per 10s)" {
		t.Fatalf("after the interval:\n%s", strings.Join(lines, "\n"))
	}
	badConnection(t, ts.addr(), "malformed")
	recvWithin(t, h.closeCh)
	if lines := log.get(); len(lines) != 7 || !strings.Contains(lines[6], "short request") {
		t.Fatalf("the next interval:\n%s", strings.Join(lines, "\n"))
	}
}
