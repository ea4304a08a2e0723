package bench

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLatencySummary(t *testing.T) {
	l := newLatencies()
	if l.summary() != nil {
		t.Fatal("an empty histogram has no summary")
	}
	for i := int64(1); i <= 10000; i++ {
		l.record(i * 1000) // 1 µs .. 10 ms
	}
	s := l.summary()
	near := func(got, want int64) bool { return got >= want*999/1000 && got <= want*1001/1000+1 }
	if s.Count != 10000 || !near(s.P50Ns, 5_000_000) || !near(s.P90Ns, 9_000_000) || !near(s.P99Ns, 9_900_000) ||
		!near(s.P999Ns, 9_990_000) || !near(s.MaxNs, 10_000_000) || !near(s.MinNs, 1000) {
		t.Fatalf("summary %+v", s)
	}
	o := newLatencies()
	o.record(2 * latencyNsMax)
	o.record(-5)
	l.merge(o)
	s = l.summary()
	if s.Count != 10002 || s.Saturated != 1 || !near(s.MaxNs, latencyNsMax) || s.MinNs > latencyNsMin {
		t.Fatalf("after merge %+v", s)
	}
}

func TestFormatNs(t *testing.T) {
	for ns, want := range map[int64]string{
		999: "999ns", 1000: "1.00µs", 87_123: "87.1µs", 123_456: "123µs", 1_500_000: "1.50ms", 2_000_000_000: "2.00s",
	} {
		if got := FormatNs(ns); got != want {
			t.Errorf("FormatNs(%d) = %q, want %q", ns, got, want)
		}
	}
}

func sampleReport() *Report {
	a := ActorReport{Name: "producer-0", Messages: 1000, Bytes: 1 << 20, ElapsedNs: int64(time.Second),
		Latency: &Summary{Count: 1000, P50Ns: 80_000, P90Ns: 90_000, P99Ns: 120_000, P999Ns: 2_000_000, P9999Ns: 3_000_000, MaxNs: 4_000_000}}
	a.rates()
	tot := a
	tot.Name = "produce total"
	s := DefaultSpec(ModeProduce)
	s.Brokers = []string{"x"}
	return &Report{Version: ReportVersion, System: "corestream", Spec: s, Machine: ThisMachine(),
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Producers: []ActorReport{a, a}, Produce: &tot,
		Errors: 2, FirstError: "producer-0: boom"}
}

func TestReportJSONRoundTripAndTable(t *testing.T) {
	r := sampleReport()
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteJSON(path, nil); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
	}
	var buf bytes.Buffer
	r.WriteTable(&buf)
	out := buf.String()
	for _, want := range []string{"corestream produce: 1 producers", "batches of 64 KiB", "producer-0", "produce total",
		"1,000", "1.0", "80.0µs", "120µs", "2.00ms", "4.00ms", "ERRORS: 2; first: producer-0: boom"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestMachineParsers(t *testing.T) {
	cpu := []byte("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\nprocessor\t: 1\nmodel name\t: AMD EPYC 9B14\n")
	if got := cpuModel(cpu); got != "AMD EPYC 9B14" {
		t.Fatalf("cpuModel = %q", got)
	}
	if got := memTotal([]byte("MemTotal:       24684132 kB\nMemFree: 1 kB\n")); got != 24684132<<10 {
		t.Fatalf("memTotal = %d", got)
	}
	if m := ThisMachine(); m.Cores < 1 || m.GoVersion == "" {
		t.Fatalf("ThisMachine = %+v", m)
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a parenthesis must not shift fields.
	line := "1234 (we(ird) name) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil || got != 3*time.Second {
		t.Fatalf("parseStatCPU = %v, %v; want 3s (300 ticks)", got, err)
	}
	if _, err := parseStatCPU([]byte("1234 (x) S 1 2")); err == nil {
		t.Fatal("a short line must fail")
	}
}

func TestSteadiness(t *testing.T) {
	tl := []Sample{{0, 0, 0}, {100, 50, 0}, {200, 150, 0}, {300, 160, 0}, {400, 300, 0}, {500, 400, 0}}
	got := steadiness(tl, 100, 500, func(s Sample) int64 { return s.Produced })
	want := &Steadiness{IntervalMs: 100, SlowestPerSec: 100, SlowestAtMs: 200, FastestPerSec: 1400}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("steadiness = %+v, want %+v", got, want)
	}
	if s := steadiness(tl[:2], 0, 100, func(s Sample) int64 { return s.Produced }); s == nil || s.SlowestPerSec != 500 {
		t.Fatalf("one interval: %+v", s)
	}
	if s := steadiness(tl, 1000, 2000, func(s Sample) int64 { return s.Produced }); s != nil {
		t.Fatalf("no interval in range: %+v", s)
	}
}
