// Command localcluster runs a corestream cluster of N nodes on loopback
// for development and demonstrations:
//
//	go run ./tools/localcluster -n 3        (or: make cluster)
//
// It picks free ports, gives each node a data directory under -dir with
// its TOML configuration in it (corestream.toml) and its output
// (corestream.log), starts `corestream serve --config` for every node
// (building the binary unless -bin names one), waits until every node
// answers on its client port and sees a metadata primary and every node
// alive, and prints one JSON document on stdout:
//
//	{"dir": ..., "brokers": "127.0.0.1:p1,...", "nodes": [
//	  {"id": 1, "pid": 4242, "client_addr": ..., "replication_addr": ...,
//	   "http_addr": ..., "kafka_addr": ..., "data_dir": ..., "config": ..., "log": ...}, ...]}
//
// SIGINT or SIGTERM is forwarded to every node and the launcher waits for
// them to stop (a second signal kills them). A node that exits on its own
// (say, after `kill -9 PID` to try a failover) is reported on stderr with
// the command that restarts it; the launcher keeps running until every
// node is gone or it is told to stop. docs/operations.md, "Running a
// cluster", has the walk-through.
//
// Exit codes: 0 every node stopped cleanly, 1 a failure (start-up, a node
// that did not stop cleanly), 2 bad flags.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// Bounds of the launcher.
const (
	// stopGrace bounds a node's graceful stop after the forwarded signal
	// (the broker's own bound is 30 s).
	stopGrace = 40 * time.Second
)

func main() {
	// Start forks from this goroutine: keep it on one thread so the nodes'
	// parent-death signal fires only when the launcher itself dies.
	runtime.LockOSThread()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs))
}

// flags are the command line.
type flags struct {
	opts       launch.Options
	bin        string
	formedWait time.Duration
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("localcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.opts.Nodes, "n", 3, "nodes in the roster (1..32)")
	fs.StringVar(&f.opts.Dir, "dir", "", "cluster directory; node i keeps its data in DIR/node-i (default: a new temporary directory)")
	fs.StringVar(&f.opts.ReplicationFactor, "rf", "all", `cluster.default_replication_factor: "all" or 1..n`)
	fs.IntVar(&f.opts.K, "k", 1, "cluster.coordinator.replica_connections_per_peer (1..64; 0: the shard count, so that every partition replicates shard to shard)")
	fs.IntVar(&f.opts.Shards, "shards", 0, "shard.count per node (0: one per CPU)")
	fs.StringVar(&f.opts.Fsync, "fsync", "always", "storage.fsync: always, interval, messages or never")
	fs.IntVar(&f.opts.HeartbeatIntervalMs, "heartbeat-ms", 100, "cluster.heartbeat_interval_ms")
	fs.IntVar(&f.opts.ElectionTimeoutMs, "election-ms", 1000, "cluster.election_timeout_ms")
	fs.StringVar(&f.opts.LogLevel, "log-level", "info", "log.level of every node")
	fs.BoolVar(&f.opts.TLS, "tls", false, "serve TLS on every listener with a test CA generated into DIR/tls/ca.pem (the JSON's ca_file; corestream --tls-ca)")
	racks := fs.String("racks", "", "comma-separated racks dealt to the nodes in turn (node i gets rack (i-1) mod count; e.g. a,b,c)")
	fs.StringVar(&f.bin, "bin", "", "the corestream binary (default: build ./cmd/corestream into DIR/bin)")
	fs.DurationVar(&f.formedWait, "timeout", time.Minute, "how long to wait for the cluster to form")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: localcluster [flags]\n\nStarts a corestream cluster on loopback, prints its nodes as JSON, stops it on SIGINT/SIGTERM.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *racks != "" {
		f.opts.Racks = strings.Split(*racks, ",")
	}
	if f.opts.Nodes < 1 || f.opts.Nodes > 32 {
		return f, fmt.Errorf("-n %d is outside 1..32", f.opts.Nodes)
	}
	if f.opts.K == 0 {
		// Every node runs on this machine: one shard count for all.
		f.opts.K = f.opts.Shards
		if f.opts.K == 0 {
			f.opts.K = runtime.NumCPU()
		}
	}
	return f, nil
}

// nodeDoc is one node in the printed document.
type nodeDoc struct {
	ID              int    `json:"id"`
	PID             int    `json:"pid"`
	ClientAddr      string `json:"client_addr"`
	ReplicationAddr string `json:"replication_addr"`
	HTTPAddr        string `json:"http_addr"`
	KafkaAddr       string `json:"kafka_addr"`
	Rack            string `json:"rack,omitempty"`
	DataDir         string `json:"data_dir"`
	Config          string `json:"config"`
	Log             string `json:"log"`
}

// document is what the launcher prints once the cluster has formed.
type document struct {
	Dir     string `json:"dir"`
	Brokers string `json:"brokers"`
	// CAFile is the test CA of -tls, which clients trust.
	CAFile string    `json:"ca_file,omitempty"`
	Nodes  []nodeDoc `json:"nodes"`
}

// run is main without the process: it returns the exit code. A signal on
// sigs stops the cluster.
func run(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
		return 2
	}
	if f.opts.Dir == "" {
		if f.opts.Dir, err = os.MkdirTemp("", "corestream-cluster-"); err != nil {
			fmt.Fprintf(stderr, "localcluster: %v\n", err)
			return 1
		}
	}
	plan, err := launch.New(f.opts)
	if err == nil {
		err = plan.Write()
	}
	if err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
		if errors.Is(err, launch.ErrOptions) || errors.Is(err, config.ErrInvalid) {
			return 2
		}
		return 1
	}
	if f.bin == "" {
		if f.bin, err = build(plan.Options.Dir, stderr); err != nil {
			fmt.Fprintf(stderr, "localcluster: %v\n", err)
			return 1
		}
	}
	// The restart hints must work from any directory.
	if abs, err := filepath.Abs(f.bin); err == nil && strings.ContainsRune(f.bin, filepath.Separator) {
		f.bin = abs
	}
	procs, err := startAll(plan, f.bin)
	if err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
		stopAll(procs, syscall.SIGTERM, sigs, stderr)
		return 1
	}
	if err := waitFormed(plan, procs, f.formedWait, sigs); err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
		stopAll(procs, syscall.SIGTERM, sigs, stderr)
		return 1
	}
	doc := document{Dir: plan.Options.Dir, Brokers: plan.Brokers(), CAFile: plan.CAFile}
	for _, p := range procs {
		n := p.Node
		doc.Nodes = append(doc.Nodes, nodeDoc{n.ID, p.Pid(), n.ClientAddr, n.ReplicationAddr, n.HTTPAddr, n.KafkaAddr, n.Rack, n.DataDir, n.Config, n.Log})
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
	}
	try := "--brokers " + plan.Brokers()
	if plan.CAFile != "" {
		try += " --tls-ca " + plan.CAFile
	}
	fmt.Fprintf(stderr, "localcluster: %d nodes up; try: corestream %s cluster status\n", len(procs), try)
	fmt.Fprintln(stderr, "localcluster: Ctrl-C (SIGINT) or SIGTERM stops every node")
	code := supervise(procs, f.bin, sigs, stderr)
	fmt.Fprintf(stderr, "localcluster: data and logs kept in %s\n", plan.Options.Dir)
	return code
}

// build compiles cmd/corestream into dir/bin and returns the binary.
func build(dir string, stderr io.Writer) (string, error) {
	bin := filepath.Join(dir, "bin", "corestream")
	fmt.Fprintf(stderr, "localcluster: building %s\n", bin)
	cmd := exec.Command("go", "build", "-o", bin, "github.com/corestream/corestream/cmd/corestream")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building corestream (or pass -bin): %w", err)
	}
	return bin, nil
}
