package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// echoHelperArg makes this test binary the echo of the two-process round
// trip, as `corestream bench echo` is.
const echoHelperArg = "bench-echo-helper"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == echoHelperArg {
		os.Exit(echoHelperMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// echoHelperMain parses the echo's arguments as `bench echo` does and
// serves; with "--hang" it never connects, with "--fail" it exits 3.
func echoHelperMain(args []string) int {
	fs := flag.NewFlagSet(echoHelperArg, flag.ContinueOnError)
	opt := EchoOptions{}
	fs.StringVar(&opt.Addr, "connect", "", "")
	fs.IntVar(&opt.CPU, "cpu", -1, "")
	hang := fs.Bool("hang", false, "")
	fail := fs.Bool("fail", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *hang:
		time.Sleep(time.Minute) // killed by the probe long before
		return 4
	case *fail:
		fmt.Fprintln(os.Stderr, "echo helper: failing on purpose")
		return 3
	}
	if err := ServeEcho(opt); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// echoCmd is the command line that starts this binary as the echo.
func echoCmd(t *testing.T, extra ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe, echoHelperArg}, extra...)
}

// gone reports whether no process pid exists any more (it exited and was
// reaped).
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// The two-process round trip, unpinned and (with two CPUs) pinned: every
// round trip is timed, and the echo is gone when the probe returns.
func TestProbeTwoProcessRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		cpus []int
	}{{"unpinned", nil}, {"pinned", twoCPUs()}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "pinned" && c.cpus == nil {
				t.Skip("fewer than two CPUs")
			}
			pid := 0
			s, err := probeProcRTT(t.Context(), procRTTOptions{Cmd: echoCmd(t), Time: 100 * time.Millisecond, CPUs: c.cpus,
				started: func(p int) { pid = p }})
			if err != nil {
				t.Fatal(err)
			}
			if s == nil || s.Count < 10 || s.P50Ns <= 0 || s.P50Ns > s.P99Ns {
				t.Fatalf("round trips %+v: want at least 10, ordered percentiles", s)
			}
			if pid == 0 || !gone(pid) {
				t.Fatalf("the echo (pid %d) is still running after the probe", pid)
			}
		})
	}
}

// An echo that never connects, or exits at once, fails the probe with
// what it said, within the start bound, and is gone after.
func TestProbeTwoProcessEchoFailures(t *testing.T) {
	for _, c := range []struct {
		flag, want string
	}{{"--fail", "failing on purpose"}, {"--hang", "not within"}} {
		t.Run(c.flag, func(t *testing.T) {
			pid := 0
			start := time.Now()
			bound := 500 * time.Millisecond
			_, err := probeProcRTT(t.Context(), procRTTOptions{Cmd: echoCmd(t, c.flag), Time: time.Second, startTimeout: bound,
				started: func(p int) { pid = p }})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
			// The echo is killed once the bound passed, not after a grace.
			if el := time.Since(start); el > bound+echoExitTimeout {
				t.Fatalf("the probe took %v", el)
			}
			if pid == 0 || !gone(pid) {
				t.Fatalf("the echo (pid %d) is still running after the probe", pid)
			}
		})
	}
}

// The echo answers only a well-formed address.
func TestServeEchoRefusesABadAddress(t *testing.T) {
	for _, addr := range []string{"", "localhost:1", "[::1]:1", "127.0.0.1"} {
		if err := ServeEcho(EchoOptions{Addr: addr, CPU: -1}); err == nil || !strings.Contains(err.Error(), "IPv4 host:port") {
			t.Errorf("%q: %v", addr, err)
		}
	}
}

// Probe puts the two-process round trips in its limits and prints them;
// without an echo command it says they were not measured.
func TestProbeReportsTwoProcessRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every probe")
	}
	opt := ProbeOptions{Dir: t.TempDir(), Time: 200 * time.Millisecond, DiskBytesMax: 8 << 20, EchoCmd: echoCmd(t)}
	lim, err := Probe(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if lim.TCPRoundTrip == nil || lim.TCPRoundTripTwoProcs == nil || lim.TwoProcessNote != "" {
		t.Fatalf("limits: in-process %+v, two processes %+v, note %q", lim.TCPRoundTrip, lim.TCPRoundTripTwoProcs, lim.TwoProcessNote)
	}
	wantPinned := twoCPUs() != nil
	if (lim.TCPRoundTripTwoCPUs != nil) != wantPinned || (len(lim.TwoProcessCPUs) == 2) != wantPinned {
		t.Fatalf("pinned round trip %+v on CPUs %v; want one: %v", lim.TCPRoundTripTwoCPUs, lim.TwoProcessCPUs, wantPinned)
	}
	var buf bytes.Buffer
	lim.WriteTable(&buf)
	want := []string{"loopback TCP round trip", "loopback round trip, two processes  "}
	if wantPinned {
		want = append(want, "loopback round trip, two processes on different CPUs")
	}
	for _, w := range want {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, buf.String())
		}
	}

	var l Limits
	l.probeTwoProcs(context.Background(), nil, time.Millisecond)
	if l.TCPRoundTripTwoProcs != nil || l.TwoProcessNote != "not measured: no echo command" {
		t.Fatalf("without an echo command: %+v", l)
	}
}
