package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// startTimeout bounds a system's start-up: processes listening and ready.
const startTimeout = 60 * time.Second

// ErrPending is returned by launchers that cannot run yet on this tree
// (the local cluster launcher before it exists): the scenario is shown as
// pending, not failed.
var ErrPending = errors.New("bench: pending")

// A Deployment is a running system under test: its processes and the
// addresses clients use.
type Deployment struct {
	// System names the system ("corestream", "nats-jetstream").
	System string `json:"system"`
	// Brokers are the client addresses (HOST:PORT for corestream,
	// nats://HOST:PORT for NATS).
	Brokers []string `json:"brokers"`
	// Settings are the server settings that matter to the figures.
	Settings map[string]string `json:"settings"`
	// Pids are the server processes, whose CPU time CPU sums.
	Pids []int `json:"pids"`
	// Logs are the servers' log files.
	Logs []string `json:"logs"`

	procs []*process
	// stopExtra stops what procs does not cover (nodes a cluster
	// launcher started); nil when none.
	stopExtra func() error
}

// Stop stops every process of the deployment, gracefully first.
func (d *Deployment) Stop() error {
	var errs []error
	for _, p := range d.procs {
		errs = append(errs, p.stop(stopGrace))
	}
	if d.stopExtra != nil {
		errs = append(errs, d.stopExtra())
	}
	return errors.Join(errs...)
}

// CPU returns the CPU time every server process has used so far.
func (d *Deployment) CPU() (time.Duration, error) {
	var sum time.Duration
	for _, pid := range d.Pids {
		t, err := cpuTime(pid)
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// NodeOptions describe a single corestream node to launch.
type NodeOptions struct {
	// Bin is the corestream binary.
	Bin string
	// Dir holds the node's configuration, data and log.
	Dir string
	// Shards is shard.count (0: one per CPU).
	Shards int
	// Fsync is storage.fsync: always, interval, messages or never.
	Fsync string
	// CPUProfile, when set, runs the node under `bench node` writing a CPU
	// profile to this file.
	CPUProfile string
	// KafkaAddr, when set, is node.kafka_addr: the node serves the Kafka
	// protocol there too (none by default).
	KafkaAddr string
}

// nodeConfig returns the TOML configuration of a single bench node.
func nodeConfig(dataDir string, shards int, fsync string) string {
	return fmt.Sprintf(`# written by corestream bench
[node]
id = 1
data_dir = %q
client_addr = "127.0.0.1:0"
replication_addr = ""
http_addr = ""
kafka_addr = ""

[shard]
count = %d

[storage]
fsync = %q
# About two segments per partition, as the ideal broker keeps two files
# and deletes the rest: a run that keeps every byte fills tens of GB in a
# minute of the disk's never-written blocks (one producer, 60 s on the
# test VM: 821k msg/s steady with this; ~850k falling to 440-710k after
# 30 s and 22 GB without).
retention_bytes = 2147483648
retention_check_interval_ms = 1000

[log]
level = "warn"
`, dataDir, shards, fsync)
}

// LaunchNode starts one corestream node on a free loopback port and
// returns once it serves clients.
func LaunchNode(ctx context.Context, opt NodeOptions) (*Deployment, error) {
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(opt.Dir, "node.toml")
	cfg := nodeConfig(filepath.Join(opt.Dir, "data"), opt.Shards, opt.Fsync)
	if opt.KafkaAddr != "" {
		cfg = strings.Replace(cfg, `kafka_addr = ""`, fmt.Sprintf("kafka_addr = %q", opt.KafkaAddr), 1)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	args := []string{"serve", "--config", cfgPath}
	if opt.CPUProfile != "" {
		args = []string{"bench", "node", "--config", cfgPath, "--cpuprofile", opt.CPUProfile}
	}
	logPath := filepath.Join(opt.Dir, "node.log")
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p, err := startProcess(opt.Bin, args, logPath, pw)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	addr, err := readServingAddr(ctx, pr, p, startTimeout)
	if err != nil {
		p.stop(stopGrace)
		return nil, fmt.Errorf("bench: starting corestream node (log %s): %w", logPath, err)
	}
	return &Deployment{System: "corestream", Brokers: []string{addr}, Pids: []int{p.pid()}, Logs: []string{logPath},
		Settings: map[string]string{"nodes": "1", "storage.fsync": opt.Fsync, "shard.count": shardsSetting(opt.Shards)},
		procs:    []*process{p}}, nil
}

// shardsSetting renders shard.count for reports.
func shardsSetting(n int) string {
	if n == 0 {
		return "one per CPU"
	}
	return strconv.Itoa(n)
}

// servingMarker is in serve's start-up line on standard output:
// "corestream VERSION node ID serving clients on ADDR (data in DIR)".
const servingMarker = " serving clients on "

// readServingAddr reads the node's standard output until its start-up
// line and returns the client address in it. The rest of the output is
// copied to the process's log in the background.
func readServingAddr(ctx context.Context, r *os.File, p *process, timeout time.Duration) (string, error) {
	type res struct {
		addr string
		err  error
	}
	got := make(chan res, 1)
	go func() {
		defer r.Close()
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if _, rest, ok := strings.Cut(line, servingMarker); ok {
				addr, _, _ := strings.Cut(rest, " ")
				got <- res{addr: addr}
				io.Copy(io.Discard, br)
				return
			}
			if err != nil {
				got <- res{err: fmt.Errorf("exited before serving: %w", err)}
				return
			}
		}
	}()
	select {
	case g := <-got:
		return g.addr, g.err
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(timeout):
		return "", fmt.Errorf("not serving after %v", timeout)
	}
}
