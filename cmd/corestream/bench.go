package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/bench"
	"github.com/corestream/corestream/bench/profnode"
)

func init() { commands = append(commands, newBenchCmd) }

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "load generators (produce, consume, e2e), the machine's limits, and the comparison with a peer broker",
		Long: "bench runs a workload against the cluster named by --brokers and prints messages/s, MB/s and\n" +
			"latency percentiles (HDR histogram) per actor and in total; --json FILE writes the whole report.\n" +
			"BENCHMARKS.md explains every figure and holds the measured tables.",
		Args: argsRange(0, 0, "a subcommand"),
		RunE: groupRun,
	}
	for _, m := range []bench.Mode{bench.ModeProduce, bench.ModeConsume, bench.ModeE2E} {
		cmd.AddCommand(newBenchRunCmd(m))
	}
	cmd.AddCommand(newBenchProbeCmd(), newBenchCompareCmd(), newBenchNodeCmd(), newBenchEchoCmd())
	return cmd
}

var benchShort = map[bench.Mode]string{
	bench.ModeProduce: "produce messages and measure produce call → acknowledgement",
	bench.ModeConsume: "read messages (preloaded first by default) and measure read throughput",
	bench.ModeE2E:     "produce and consume at once and measure produce call → consumer receipt",
}

// newBenchRunCmd builds `bench produce|consume|e2e`.
func newBenchRunCmd(mode bench.Mode) *cobra.Command {
	spec := bench.DefaultSpec(mode)
	var jsonPath, cpuProfile string
	var progress bool
	cmd := &cobra.Command{
		Use:   string(mode) + " [flags]",
		Short: benchShort[mode],
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := appFrom(cmd)
			spec.Brokers = bench.BrokerList(a.brokers)
			if err := spec.Validate(); err != nil {
				return usageErrorf("%s", err)
			}
			opt := bench.Options{PrepareTimeout: a.timeout}
			if progress {
				opt.Progress = a.stderr
			}
			if cpuProfile != "" {
				stop, err := bench.StartCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			sys := bench.NewCorestream()
			defer sys.Close()
			rep, err := bench.Run(cmd.Context(), sys, spec, opt)
			if rep == nil {
				return err
			}
			return errors.Join(emitReport(a, rep, jsonPath), err)
		},
	}
	spec.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the whole report as JSON to FILE ('-': standard output, instead of the table)")
	cmd.Flags().BoolVar(&progress, "progress", true, "draw a progress bar on standard error")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the load generator to FILE")
	return cmd
}

// emitReport prints the table, unless the JSON goes to standard output,
// and writes the JSON report when asked.
func emitReport(a *app, rep *bench.Report, jsonPath string) error {
	if jsonPath != "-" {
		rep.WriteTable(a.stdout)
	}
	if jsonPath == "" {
		return nil
	}
	return rep.WriteJSON(jsonPath, a.stdout)
}

// newBenchProbeCmd builds `bench probe`: the machine's limits alone.
func newBenchProbeCmd() *cobra.Command {
	var dir, jsonPath, echoBin string
	var opt bench.ProbeOptions
	cmd := &cobra.Command{
		Use:   "probe [--dir DIR]",
		Short: "measure the machine's limits: a plain TCP blast over loopback, and sequential write + fdatasync in DIR",
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := appFrom(cmd)
			opt.Dir = dir
			if echoBin == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				echoBin = exe
			}
			if echoBin != "-" {
				opt.EchoCmd = bench.EchoCommand(echoBin)
			}
			lim, err := bench.Probe(cmd.Context(), opt)
			if err != nil {
				return err
			}
			if jsonPath != "-" {
				lim.WriteTable(a.stdout)
			}
			if jsonPath != "" {
				return writeJSONFile(jsonPath, a.stdout, lim)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", os.TempDir(), "directory whose file system the disk probe measures")
	cmd.Flags().DurationVar(&opt.Time, "time", bench.DefaultProbeOptions().Time, "time each probe runs at most")
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the limits as JSON to FILE ('-': standard output)")
	cmd.Flags().StringVar(&echoBin, "echo-bin", "", "corestream binary whose `bench echo` answers the two-process round trip\n(default: this one; '-': skip the two-process round trips)")
	return cmd
}

// newBenchCompareCmd builds `bench compare`: make bench-compare.
func newBenchCompareCmd() *cobra.Command {
	opt := bench.DefaultCompareOptions()
	var jsonPath, only, clusterCmd string
	cmd := &cobra.Command{
		Use:   "compare --peer-bench BIN --nats-server BIN",
		Short: "run every scenario against corestream and NATS JetStream on loopback and print one table of ratios",
		Long: "compare launches each system on loopback with free ports and temporary directories, runs each\n" +
			"scenario's workload as a separate load-generator process (this binary for corestream,\n" +
			"--peer-bench for NATS JetStream), stops everything, and prints one table: each figure,\n" +
			"the ratio corestream / peer, and each figure as a fraction of the machine's limits\n" +
			"measured in the same run. `make bench-compare` installs the peer and runs it.",
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := appFrom(cmd)
			if opt.CorestreamBin == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				opt.CorestreamBin = exe
			}
			for _, p := range []*string{&opt.CorestreamBin, &opt.PeerBench, &opt.NATSServer, &opt.Dir} {
				if *p != "" {
					abs, err := filepath.Abs(*p)
					if err != nil {
						return err
					}
					*p = abs
				}
			}
			opt.Only = only
			opt.ClusterCmd = strings.Fields(clusterCmd)
			opt.Log = a.stderr
			cmp, err := bench.Compare(cmd.Context(), opt)
			if cmp == nil {
				return err
			}
			if jsonPath != "-" {
				cmp.WriteTable(a.stdout)
			}
			if jsonPath != "" {
				err = errors.Join(err, writeJSONFile(jsonPath, a.stdout, cmp))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.CorestreamBin, "corestream-bin", "", "corestream binary to serve and to load (default: this one)")
	f.StringVar(&opt.PeerBench, "peer-bench", opt.PeerBench, "the peer's load generator (built by make bench-peer); empty: corestream only")
	f.StringVar(&opt.NATSServer, "nats-server", opt.NATSServer, "nats-server binary (installed by make bench-peer)")
	f.StringVar(&opt.Dir, "dir", opt.Dir, "where data directories go (default: a new temporary directory, removed after)")
	f.StringVar(&clusterCmd, "cluster-cmd", "", "command line that starts a local corestream cluster and prints its nodes as JSON;\n"+
		"{nodes} {dir} {fsync} {shards} are replaced (empty: the corestream 3-node rows are pending)")
	f.DurationVar(&opt.Duration, "duration", opt.Duration, "measured time of each throughput run")
	f.DurationVar(&opt.Warmup, "warmup", opt.Warmup, "warm-up of each run")
	f.StringVar(&only, "only", "", "run only the scenarios whose name contains this")
	f.StringVar(&opt.ProfileDir, "cpuprofile-dir", os.Getenv(bench.EnvCPUProfileDir), "write a CPU profile of every corestream node into this directory (also $"+bench.EnvCPUProfileDir+")")
	f.StringVar(&jsonPath, "json", "", "write the whole comparison as JSON to FILE ('-': standard output)")
	return cmd
}

// newBenchNodeCmd builds the hidden `bench node`: serve with a CPU
// profile, for profiling the broker under a bench workload.
func newBenchNodeCmd() *cobra.Command {
	var path, profile, memProfile string
	cmd := &cobra.Command{
		Use:    "node --config FILE [--cpuprofile FILE] [--memprofile FILE]",
		Short:  "serve one node from FILE, writing a CPU profile until it stops (bench harness only)",
		Hidden: true,
		Args:   argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := appFrom(cmd)
			return profnode.ServeNode(cmd.Context(), path, profile, memProfile, a.stdout, a.stderr, 30*time.Second)
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "TOML configuration file")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile to FILE")
	cmd.Flags().StringVar(&memProfile, "memprofile", "", "write the allocations made until the stop signal to FILE")
	return cmd
}

// newBenchEchoCmd builds the hidden `bench echo`: the answering side of
// the probe's two-process round trip, started by the probe itself.
func newBenchEchoCmd() *cobra.Command {
	opt := bench.EchoOptions{CPU: -1}
	cmd := &cobra.Command{
		Use:    "echo --connect ADDR [--cpu N]",
		Short:  "answer the probe's round trip on ADDR with blocking system calls (bench probe only)",
		Hidden: true,
		Args:   argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opt.Addr == "" {
				return usageErrorf("--connect is required")
			}
			return bench.ServeEcho(opt)
		},
	}
	cmd.Flags().StringVar(&opt.Addr, "connect", "", "the probe's address (127.0.0.1:PORT)")
	cmd.Flags().IntVar(&opt.CPU, "cpu", -1, "pin the answering thread to this CPU (-1: not pinned)")
	return cmd
}

// writeJSONFile writes v as indented JSON to path ("-": w).
func writeJSONFile(path string, w io.Writer, v any) error {
	b, err := bench.MarshalIndent(v)
	if err != nil {
		return err
	}
	if path == "-" {
		_, err = w.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
