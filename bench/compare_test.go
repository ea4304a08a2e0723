package bench

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
)

// producedRun is a finished run whose produce total has rate msg/s of
// 1 KiB and the given ack p99.
func producedRun(scenario, system string, rate float64, p99 int64) *RunResult {
	a := &ActorReport{Name: "produce total", Messages: int64(rate), Bytes: int64(rate) * 1024, ElapsedNs: int64(time.Second),
		Latency: &Summary{Count: int64(rate), P50Ns: p99 / 2, P99Ns: p99, MaxNs: p99 * 2}}
	a.rates()
	return &RunResult{Scenario: scenario, System: system, Report: &Report{Produce: a}}
}

func rowOf(t *testing.T, rows []Row, scenario, figure string) Row {
	t.Helper()
	for _, r := range rows {
		if r.Scenario == scenario && r.Figure == figure {
			return r
		}
	}
	t.Fatalf("no row %s / %s", scenario, figure)
	return Row{}
}

func TestBuildRows(t *testing.T) {
	runs := []*RunResult{
		producedRun("1n-never-async", "corestream", 600_000, 2e6),
		producedRun("1n-never-async", "nats-jetstream", 100_000, 4e6),
		producedRun("1n-never-sync", "corestream", 5000, 300e3),
		producedRun("1n-never-sync", "nats-jetstream", 5000, 400e3),
		producedRun("1n-never-sync-primary", "corestream", 9000, 400e3),
		{Scenario: "3n-never-async", System: "corestream", Pending: pendingCluster},
		producedRun("3n-never-async", "nats-jetstream", 50_000, 9e6),
		{Scenario: "1n-always-async", System: "corestream", Err: "boom\nmore"},
		{Scenario: "1n-never-consume", System: "nats-jetstream", Report: &Report{Consume: &ActorReport{},
			Timeline: []Sample{{AtMs: 100}, {AtMs: 12300, Consumed: 300}}}},
		producedRun("partitions-1", "corestream", 100_000, 1e6),
		producedRun("partitions-16", "corestream", 150_000, 1e6),
	}
	lim := &Limits{TCPBytesPerSec: 1e9, DiskWriteBytesPerSec: 5e8, TCPRoundTrip: &Summary{P50Ns: 50e3, P99Ns: 100e3},
		TCPRoundTripTwoProcs: &Summary{P50Ns: 100e3, P99Ns: 150e3},
		Ideal:                &IdealResult{Messages: 800_000, Bytes: 800_000 << 10, Elapsed: time.Second, ServerCPUNs: 800_000 * 500}}
	rows := buildRows(Scenarios(time.Second, 0), runs, lim)
	for _, c := range []struct {
		scenario, figure string
		want             float64 // 0: no ideal figure
	}{
		{"1n-never-async", "produce msg/s", 0.75},
		{"1n-never-async", "produce MB/s", 0.75},
		{"1n-never-async", "ack p99", 0},
		{"partitions-16", "produce msg/s", 150_000.0 / 800_000},
	} {
		r := rowOf(t, rows, c.scenario, c.figure)
		switch {
		case c.want == 0 && r.OfIdeal != nil:
			t.Errorf("%s / %s: %v of the ideal, want none", c.scenario, c.figure, *r.OfIdeal)
		case c.want != 0 && (r.OfIdeal == nil || *r.OfIdeal != c.want):
			t.Errorf("%s / %s: %v of the ideal, want %v", c.scenario, c.figure, r.OfIdeal, c.want)
		}
	}
	cpu := Figure{Name: cpuFigureName, Unit: "ns"}
	if of := ofIdeal(Scenario{}, cpu, ptr(1000), lim); of == nil || *of != 2 {
		t.Errorf("1 µs of server CPU per message against the ideal's 0.5 µs: %v, want 2", of)
	}

	r := rowOf(t, rows, "1n-never-async", "produce msg/s")
	if *r.Ratio != 6 || r.Verdict != "met" || r.Target != "≥ 5× NATS" {
		t.Errorf("async msg/s row %+v", r)
	}
	r = rowOf(t, rows, "1n-never-async", "produce MB/s")
	if of := *r.OfLimit; of < 0.61 || of > 0.62 || r.Verdict != "MISSED" || r.Target != "≥ 90% ideal" || *r.PeerOfLimit > 0.11 || *r.OfDisk < 1.2 || *r.OfDisk > 1.3 {
		t.Errorf("async MB/s row %+v", r)
	}
	r = rowOf(t, rows, "1n-never-sync", "ack p50")
	if *r.OfLimit != 3 || r.Verdict != "met" || r.Target != "≤ 3× RTT" {
		t.Errorf("sync p50 row %+v (3× the round trip meets ≤ 3×)", r)
	}
	r = rowOf(t, rows, "1n-never-sync", "ack p99")
	if *r.Ratio != 0.75 || r.Verdict != "MISSED" {
		t.Errorf("sync p99 row %+v (0.75 of NATS misses ≤ ½)", r)
	}
	if *r.OfLimit != 3 || *r.PeerOfLimit != 4 {
		t.Errorf("sync p99 against the round trip: %v and %v, want 3 and 4", *r.OfLimit, *r.PeerOfLimit)
	}
	if r.OfTwoProcRTT == nil || *r.OfTwoProcRTT != 2 || r.PeerOfTwoProcRTT == nil || *r.PeerOfTwoProcRTT != 400.0/150 {
		t.Errorf("sync p99 against the two-process round trip: %v and %v, want 2 and 2.67", r.OfTwoProcRTT, r.PeerOfTwoProcRTT)
	}
	if r := rowOf(t, rows, "1n-never-async", "ack p99"); r.OfLimit != nil || r.OfTwoProcRTT != nil {
		t.Errorf("a saturating run's latency is queueing, not read against a round trip: %+v", r)
	}
	r = rowOf(t, rows, "1n-never-sync-primary", "ack p50")
	if *r.Corestream != 200e3 || r.Verdict != "MISSED" || r.Peer != nil {
		t.Errorf("primary p50 row %+v (200µs misses < 100µs)", r)
	}
	r = rowOf(t, rows, "3n-never-async", "produce msg/s")
	if r.Corestream != nil || *r.Peer != 50_000 || r.Note != pendingCluster || r.Verdict != "pending" {
		t.Errorf("pending row %+v", r)
	}
	r = rowOf(t, rows, "1n-always-async", "produce msg/s")
	if r.Corestream != nil || r.Note != "failed: boom" || r.Verdict != "" {
		t.Errorf("failed row %+v", r)
	}
	r = rowOf(t, rows, "1n-always-async", "ack p50")
	if r.Peer != nil || !strings.HasPrefix(r.Note, "failed") {
		t.Errorf("always row %+v", r)
	}
	r = rowOf(t, rows, "partitions-16", "produce msg/s")
	if *r.Ratio != 1.5 {
		t.Errorf("scaling row %+v: ratio against partitions-1 should be 1.5", r)
	}
	if r := rowOf(t, rows, "partitions-1", "produce msg/s"); r.Ratio != nil {
		t.Errorf("the first row of a scaling group is its baseline: %+v", r)
	}

	r = rowOf(t, rows, "1n-never-consume", "consume msg/s")
	if r.Peer != nil || r.Note != "NATS: nothing completed in the window; 300 by 12.3s" {
		t.Errorf("consume row without corestream %+v", r)
	}
	if _, note := figure(msgsPerSec("consume"), find(runs, "1n-never-consume", "nats-jetstream")); note != "nothing completed in the window; 300 by 12.3s" {
		t.Errorf("note %q", note)
	}

	var buf bytes.Buffer
	(&Comparison{Machine: ThisMachine(), Limits: lim, Rows: rows}).WriteTable(&buf)
	out := buf.String()
	for _, want := range []string{"== corestream vs NATS JetStream ==", "== partition scaling (corestream) ==",
		"6.00×", "600,000", "pending: cluster", "61% TCP", "3.0× RTT, 1.5× 2-proc", "75% ideal", "targets: 3 met, 3 missed, 1 pending"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// The node configuration the harness writes must be one the broker
// accepts.
func TestNodeConfigIsValid(t *testing.T) {
	cfg, err := config.Parse(nodeConfig("/tmp/x/data", 2, "always"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Storage.Fsync != "always" || cfg.Shard.Count != 2 || cfg.Node.DataDir != "/tmp/x/data" ||
		cfg.Node.HTTPAddr != "" || cfg.Node.ClientAddr != "127.0.0.1:0" {
		t.Fatalf("parsed %+v", cfg)
	}
}

func TestNATSConfig(t *testing.T) {
	one := natsNodeConfig("/d", 0, []int{4222}, []int{8222}, nil, false)
	for _, want := range []string{`server_name: "n1"`, `listen: "127.0.0.1:4222"`, `http: "127.0.0.1:8222"`, `store_dir: "/d/n1"`} {
		if !strings.Contains(one, want) {
			t.Errorf("single server config lacks %q:\n%s", want, one)
		}
	}
	if strings.Contains(one, "sync_interval") || strings.Contains(one, "cluster") {
		t.Errorf("single server with default sync:\n%s", one)
	}
	three := natsNodeConfig("/d", 1, []int{1, 2, 3}, []int{4, 5, 6}, []int{7, 8, 9}, true)
	for _, want := range []string{"sync_interval: always", `listen: "127.0.0.1:8"`,
		`routes: ["nats-route://127.0.0.1:7", "nats-route://127.0.0.1:9"]`, `store_dir: "/d/n2"`} {
		if !strings.Contains(three, want) {
			t.Errorf("cluster member config lacks %q:\n%s", want, three)
		}
	}
}

func TestParseClusterDoc(t *testing.T) {
	tests := []struct {
		doc   string
		nodes int
		err   string
	}{
		{`{"nodes":[{"id":1,"pid":10,"client_addr":"127.0.0.1:1","data_dir":"/a"},{"id":2,"pid":11,"clientAddr":"127.0.0.1:2"}]}`, 2, ""},
		{`[{"id":1,"pid":10,"client":"127.0.0.1:1"}]`, 1, ""},
		{`{"nodes":[]}`, 0, "neither"},
		{`[]`, 0, "names no node"},
		{`[{"id":1,"client_addr":"127.0.0.1:1"}]`, 0, "no pid"},
		{`"x"`, 0, "neither"},
	}
	for _, tc := range tests {
		nodes, err := parseClusterDoc([]byte(tc.doc))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err %v, want %q", tc.doc, err, tc.err)
		case tc.err == "" && (err != nil || len(nodes) != tc.nodes):
			t.Errorf("%s: %v, %v; want %d nodes", tc.doc, nodes, err, tc.nodes)
		}
	}
}

func TestLaunchClusterWithoutLauncherIsPending(t *testing.T) {
	for _, cmd := range [][]string{nil, {"/nonexistent/localcluster", "--nodes", "{nodes}"}} {
		_, err := LaunchCluster(t.Context(), ClusterOptions{Cmd: cmd, Nodes: 3, Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "pending") {
			t.Errorf("cmd %v: err %v, want ErrPending", cmd, err)
		}
	}
}

func find(runs []*RunResult, sc, sys string) *RunResult {
	for _, r := range runs {
		if r.Scenario == sc && r.System == sys {
			return r
		}
	}
	return nil
}

func TestCPUPerMessage(t *testing.T) {
	r := &RunResult{ServerCPUNs: 2e9, Report: &Report{Timeline: []Sample{{AtMs: 100, Produced: 10}, {AtMs: 200, Produced: 1e6, Consumed: 4e5}}}}
	if v, ok := r.cpuPerMessage("produce"); !ok || v != 2000 {
		t.Fatalf("produce: %v, %v; want 2000 ns", v, ok)
	}
	if v, ok := r.cpuPerMessage("consume"); !ok || v != 5000 {
		t.Fatalf("consume: %v, %v; want 5000 ns", v, ok)
	}
	if _, ok := (&RunResult{ServerCPUNs: 1, Report: &Report{}}).cpuPerMessage("produce"); ok {
		t.Fatal("no timeline, no figure")
	}
	r.LoadCPUNs = 5e8
	if v, ok := r.loadCPUPerMessage("produce"); !ok || v != 500 {
		t.Fatalf("load generator, produce: %v, %v; want 500 ns", v, ok)
	}
	if v, ok := totalCPUFigure("produce").Get(r); !ok || v != 2500 {
		t.Fatalf("client+server, produce: %v, %v; want 2500 ns", v, ok)
	}
	r.LoadCPUNs = 0
	if _, ok := totalCPUFigure("produce").Get(r); ok {
		t.Fatal("client+server without the client's CPU: no figure")
	}
}

// The client CPU rows of a throughput scenario read the load
// generator's CPU for both systems and stand against the ideal broker's
// client, and client+server, CPU per message.
func TestClientCPURows(t *testing.T) {
	withCPU := func(sys string, serverNs, loadNs int64) *RunResult {
		r := producedRun("1n-never-async", sys, 1e6, 1e6)
		r.ServerCPUNs, r.LoadCPUNs = serverNs, loadNs
		r.Report.Timeline = []Sample{{AtMs: 100, Produced: 1000}, {AtMs: 2000, Produced: 1e6}}
		return r
	}
	runs := []*RunResult{withCPU("corestream", 1e9, 4e8), withCPU("nats-jetstream", 3e9, 9e8)}
	runs[0].LoadNs = 1e9
	lim := &Limits{Ideal: &IdealResult{Messages: 1e6, Bytes: 1e6 << 10, Elapsed: time.Second, ServerCPUNs: 5e8, ClientCPUNs: 2e8}}
	rows := buildRows(Scenarios(time.Second, 0), runs, lim)
	for _, c := range []struct {
		figure          string
		cs, peer, ideal float64
	}{
		{cpuFigureName, 1000, 3000, 2},
		{clientCPUFigureName, 400, 900, 2},
		{totalCPUFigureName, 1400, 3900, 2},
	} {
		r := rowOf(t, rows, "1n-never-async", c.figure)
		if r.Corestream == nil || *r.Corestream != c.cs || r.Peer == nil || *r.Peer != c.peer || r.OfIdeal == nil || *r.OfIdeal != c.ideal {
			t.Errorf("%s row: corestream %v, NATS %v, vs ideal %v; want %v, %v, %v", c.figure, r.Corestream, r.Peer, r.OfIdeal, c.cs, c.peer, c.ideal)
		}
	}
	if r := rowOf(t, rows, "1n-never-async", "client+server CPU busy"); r.Corestream == nil || *r.Corestream != 140 || r.Peer != nil {
		t.Errorf("busy row: corestream %v, NATS %v; want 140%% of a core, and none without the load's time", r.Corestream, r.Peer)
	}
	var buf bytes.Buffer
	(&Comparison{Machine: ThisMachine(), Rows: rows}).WriteTable(&buf)
	for _, want := range []string{"client CPU/msg", "400ns", "client+server CPU/msg", "1.40µs", "2.0× ideal", "140.0% of a core"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

// runLoad reports the load generator's own CPU time, from its rusage.
func TestRunLoadReportsItsCPU(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	log := filepath.Join(t.TempDir(), "load.log")
	start := time.Now()
	cpu, err := runLoad(t.Context(), sh, []string{"-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"}, log, time.Minute)
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// A busy loop is all CPU: at least some ticks of it, never more than
	// the wall time it ran (one process, one thread) plus a tick.
	if cpu < 20*time.Millisecond || cpu > wall+10*time.Millisecond {
		t.Fatalf("a busy loop of %v reported %v of CPU", wall, cpu)
	}
	cpu, err = runLoad(t.Context(), sh, []string{"-c", "exit 3"}, log, time.Minute)
	if err == nil || cpu > 10*time.Millisecond {
		t.Fatalf("a failed load: %v of CPU, err %v", cpu, err)
	}
}
