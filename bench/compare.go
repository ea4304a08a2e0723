package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// EnvCPUProfileDir, when set, makes `bench compare` run every corestream
// node under `bench node` with a CPU profile written into that directory
// (one file per scenario): `go tool pprof bin/corestream FILE`.
const EnvCPUProfileDir = "CORESTREAM_BENCH_CPUPROFILE_DIR"

// CompareOptions configure Compare.
type CompareOptions struct {
	// CorestreamBin serves corestream and runs its load generator
	// (`serve`, `bench produce|consume|e2e`).
	CorestreamBin string
	// PeerBench is the peer's load generator (bench/peer); empty: the
	// peer columns stay empty.
	PeerBench string
	// NATSServer is the nats-server binary.
	NATSServer string
	// ClusterCmd starts a local corestream cluster (ClusterOptions.Cmd);
	// empty: the corestream 3-node rows are pending.
	ClusterCmd []string
	// Dir holds every deployment's files; empty: a new temporary
	// directory, removed at the end.
	Dir string
	// Duration and Warmup are each throughput run's measured time and
	// warm-up.
	Duration, Warmup time.Duration
	// Only keeps the scenarios whose name contains it.
	Only string
	// ProfileDir, when set, gets a CPU profile of every corestream node.
	ProfileDir string
	// Probe configures the limit probes (Dir is set to the data
	// directory).
	Probe ProbeOptions
	// Log receives one line per run as the comparison goes; nil: none.
	Log io.Writer
}

// DefaultCompareOptions returns the defaults of make bench-compare.
func DefaultCompareOptions() CompareOptions {
	return CompareOptions{PeerBench: "bench/.bin/peerbench", NATSServer: "bench/.bin/nats-server",
		Duration: 5 * time.Second, Warmup: time.Second, Probe: DefaultProbeOptions()}
}

// RunResult is one scenario run against one system.
type RunResult struct {
	Scenario string `json:"scenario"`
	System   string `json:"system"`
	// Deployment is what ran (addresses, settings, logs).
	Deployment *Deployment `json:"deployment,omitempty"`
	// Report is the load generator's report.
	Report *Report `json:"report,omitempty"`
	// ServerCPUNs is the servers' CPU time during the load.
	ServerCPUNs int64 `json:"server_cpu_ns"`
	// LoadCPUNs is the load generator process's own CPU time (user +
	// system, from its rusage at exit): its whole life, the same span as
	// ServerCPUNs. Client and servers share the machine's cores, so the
	// two together say whether the cores are the limit.
	LoadCPUNs int64 `json:"load_cpu_ns"`
	// LoadNs is the load generator's wall time (start to exit).
	LoadNs int64 `json:"load_ns"`
	// StopNs is how long the deployment took to stop gracefully.
	StopNs int64 `json:"stop_ns"`
	// IdleNs and IdleCPUPercent are an idle measurement's length and
	// the servers' CPU over it (100 = one core).
	IdleNs         int64   `json:"idle_ns,omitempty"`
	IdleCPUPercent float64 `json:"idle_cpu_percent,omitempty"`
	// Pending says why the run could not happen yet; Err why it failed.
	Pending string `json:"pending,omitempty"`
	Err     string `json:"error,omitempty"`
}

// total returns the report's total of kind ("produce" or "consume").
func (r *RunResult) total(kind string) *ActorReport {
	if r == nil || r.Report == nil {
		return nil
	}
	if kind == "consume" {
		return r.Report.Consume
	}
	return r.Report.Produce
}

// cpuPerMessage returns the servers' CPU time per message of kind
// ("produce" or "consume") completed during the whole load, warm-up and
// drain included: on a shared machine a steadier figure than throughput.
func (r *RunResult) cpuPerMessage(kind string) (float64, bool) {
	if r == nil {
		return 0, false
	}
	return r.perMessage(kind, r.ServerCPUNs)
}

// loadCPUPerMessage is cpuPerMessage for the load generator's CPU time.
func (r *RunResult) loadCPUPerMessage(kind string) (float64, bool) {
	if r == nil {
		return 0, false
	}
	return r.perMessage(kind, r.LoadCPUNs)
}

// perMessage divides cpuNs by the messages of kind completed during the
// whole load (the timeline's last sample).
func (r *RunResult) perMessage(kind string, cpuNs int64) (float64, bool) {
	if r.Report == nil || len(r.Report.Timeline) == 0 || cpuNs <= 0 {
		return 0, false
	}
	last := r.Report.Timeline[len(r.Report.Timeline)-1]
	n := last.Produced
	if kind == "consume" {
		n = last.Consumed
	}
	if n == 0 {
		return 0, false
	}
	return float64(cpuNs) / float64(n), true
}

// Comparison is the whole result of Compare.
type Comparison struct {
	Version  int           `json:"version"`
	Started  time.Time     `json:"started"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Machine  Machine       `json:"machine"`
	Limits   *Limits       `json:"limits"`
	Duration time.Duration `json:"duration_ns"`
	Warmup   time.Duration `json:"warmup_ns"`
	Rows     []Row         `json:"rows"`
	Runs     []*RunResult  `json:"runs"`
}

// Compare measures the machine's limits, then runs every scenario against
// corestream and (where it applies and PeerBench is set) NATS JetStream,
// one after the other, and returns the rows of the comparison. A failed
// run is recorded in its rows; the error returned says how many failed.
func Compare(ctx context.Context, opt CompareOptions) (*Comparison, error) {
	def := DefaultCompareOptions()
	if opt.Duration <= 0 {
		opt.Duration = def.Duration
	}
	if opt.Warmup < 0 {
		opt.Warmup = def.Warmup
	}
	if opt.Dir == "" {
		dir, err := os.MkdirTemp("", "corestream-bench-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		opt.Dir = dir
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, err
	}
	if opt.ProfileDir != "" {
		if err := os.MkdirAll(opt.ProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	cmp := &Comparison{Version: ReportVersion, Started: time.Now().UTC(), Machine: ThisMachine(),
		Duration: opt.Duration, Warmup: opt.Warmup}
	logf := func(format string, args ...any) {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, format+"\n", args...)
		}
	}
	logf("probing the machine's limits (%s)", opt.Dir)
	probe := opt.Probe
	probe.Dir = opt.Dir
	if probe.IdealTime <= 0 { // as long as each run, warm-up included
		probe.IdealTime = opt.Warmup + opt.Duration
	}
	if len(probe.EchoCmd) == 0 && opt.CorestreamBin != "" {
		probe.EchoCmd = EchoCommand(opt.CorestreamBin)
	}
	lim, err := Probe(ctx, probe)
	if err != nil {
		return nil, err
	}
	cmp.Limits = lim
	var failed int
	scenarios := Scenarios(opt.Duration, opt.Warmup)
	for _, sc := range scenarios {
		if opt.Only != "" && !strings.Contains(sc.Name, opt.Only) {
			continue
		}
		systems := []string{"corestream"}
		if sc.Peer && opt.PeerBench != "" {
			systems = append(systems, "nats-jetstream")
		}
		for _, sys := range systems {
			if ctx.Err() != nil {
				break
			}
			start := time.Now()
			r := runScenario(ctx, opt, sc, sys)
			cmp.Runs = append(cmp.Runs, r)
			switch {
			case r.Err != "":
				failed++
				logf("%-24s %-15s FAILED after %v: %s", sc.Name, sys, time.Since(start).Round(time.Millisecond), r.Err)
			case r.Pending != "":
				logf("%-24s %-15s %s", sc.Name, sys, r.Pending)
			default:
				logf("%-24s %-15s done in %v", sc.Name, sys, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	cmp.Rows = buildRows(scenarios, cmp.Runs, lim)
	cmp.Elapsed = time.Since(cmp.Started)
	if err := ctx.Err(); err != nil {
		return cmp, fmt.Errorf("bench: comparison interrupted: %w", err)
	}
	if failed > 0 {
		return cmp, fmt.Errorf("%w: %d runs failed", ErrRunFailed, failed)
	}
	return cmp, nil
}

// runScenario deploys sys, runs the scenario's load generator against it
// and stops it.
func runScenario(ctx context.Context, opt CompareOptions, sc Scenario, sys string) *RunResult {
	r := &RunResult{Scenario: sc.Name, System: sys}
	dir := filepath.Join(opt.Dir, sc.Name, sys)
	if err := os.RemoveAll(dir); err != nil { // a previous comparison's
		r.Err = err.Error()
		return r
	}
	// Every run writes gigabytes that the kernel writes back for seconds
	// after: flushed now, they do not slow the next system's run (which
	// measured 391k and 740k msg/s for the same row in two comparisons).
	unix.Sync()
	d, err := deploy(ctx, opt, sc, sys, dir)
	if err != nil {
		if errors.Is(err, ErrPending) {
			r.Pending = pendingCluster
		} else {
			r.Err = err.Error()
		}
		return r
	}
	r.Deployment = d
	defer func() {
		t := time.Now()
		if err := d.Stop(); err != nil && r.Err == "" {
			r.Err = err.Error()
		}
		r.StopNs = int64(time.Since(t))
		removeSubdirs(dir)
	}()
	bin := opt.CorestreamBin
	// --timeout bounds the topic's creation, among others: thousands of
	// partitions take a while.
	args := []string{"--timeout", prepareTimeoutDefault.String(), "bench"}
	if sys != "corestream" {
		bin, args = opt.PeerBench, nil
	}
	spec := sc.Spec
	args = append(args, string(spec.Mode), "--brokers", strings.Join(d.Brokers, ","),
		"--json", filepath.Join(dir, "report.json"), "--progress=false")
	args = append(args, spec.Args()...)
	cpu0, _ := d.CPU()
	start := time.Now()
	loadCPU, loadErr := runLoad(ctx, bin, args, filepath.Join(dir, "load.log"), loadTimeout(spec))
	r.LoadNs, r.LoadCPUNs = int64(time.Since(start)), int64(loadCPU)
	cpu1, _ := d.CPU()
	r.ServerCPUNs = int64(cpu1 - cpu0)
	rep, err := ReadReport(filepath.Join(dir, "report.json"))
	if err != nil {
		r.Err = errors.Join(loadErr, err).Error()
		return r
	}
	for k, v := range d.Settings {
		if rep.Settings == nil {
			rep.Settings = map[string]string{}
		}
		rep.Settings["server."+k] = v
	}
	r.Report = rep
	if loadErr != nil {
		r.Err = loadErr.Error()
		return r
	}
	if sc.IdleFor > 0 {
		r.IdleNs, r.IdleCPUPercent, err = measureIdle(ctx, d, sc.IdleFor)
		if err != nil {
			r.Err = err.Error()
		}
	}
	return r
}

// removeSubdirs deletes the directories under dir (the systems' data:
// gigabytes after a throughput run) and keeps its files (configurations,
// logs, the report).
func removeSubdirs(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// idleSettle is how long an idle measurement waits after the load before
// it starts counting: a new topic's last elections and flushes.
const idleSettle = 2 * time.Second

// measureIdle returns the deployment's CPU use over d after a settling
// pause, as a percentage of one core.
func measureIdle(ctx context.Context, d *Deployment, dur time.Duration) (int64, float64, error) {
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	c0, err := d.CPU()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	select {
	case <-time.After(dur):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	c1, err := d.CPU()
	if err != nil {
		return 0, 0, err
	}
	el := time.Since(start)
	return int64(el), 100 * float64(c1-c0) / float64(el), nil
}

// deploy starts the scenario's deployment of sys in dir.
func deploy(ctx context.Context, opt CompareOptions, sc Scenario, sys, dir string) (*Deployment, error) {
	if sys == "nats-jetstream" {
		return LaunchNATS(ctx, NATSOptions{Bin: opt.NATSServer, Dir: dir, Nodes: sc.Nodes, SyncAlways: sc.Fsync == "always"})
	}
	if sc.Nodes > 1 {
		return LaunchCluster(ctx, ClusterOptions{Cmd: opt.ClusterCmd, Nodes: sc.Nodes, Dir: dir, Fsync: sc.Fsync, Shards: sc.Shards})
	}
	no := NodeOptions{Bin: opt.CorestreamBin, Dir: dir, Shards: sc.Shards, Fsync: sc.Fsync}
	if opt.ProfileDir != "" {
		no.CPUProfile = filepath.Join(opt.ProfileDir, sc.Name+".pprof")
	}
	return LaunchNode(ctx, no)
}

// loadTimeout bounds one load-generator process: its warm-up and
// measured time, topic creation, draining, and a margin.
func loadTimeout(s Spec) time.Duration {
	return s.Warmup + s.Duration + s.DrainTimeout + prepareTimeoutDefault + time.Minute
}

// runLoad runs one load-generator process, its output appended to
// logPath, and waits for it (killing it after timeout). It returns the
// process's CPU time (user + system, from its rusage at exit; 0 when it
// did not start).
func runLoad(ctx context.Context, bin string, args []string, logPath string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var cpu time.Duration
	if ps := cmd.ProcessState; ps != nil {
		cpu = ps.UserTime() + ps.SystemTime()
	}
	if err != nil {
		tail, _ := os.ReadFile(logPath)
		if len(tail) > 400 {
			tail = tail[len(tail)-400:]
		}
		return cpu, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, strings.TrimSpace(string(tail)))
	}
	return cpu, nil
}
