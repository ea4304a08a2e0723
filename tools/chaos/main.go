// Command chaos is the fault harness: it starts a corestream cluster of
// real processes on loopback, writes sequence-numbered records to topics
// of replication factors 1, 2 and 3 through idempotent producers while
// consumers tail them (through the Go SDK, or with -client kafka through
// franz-go on the Kafka port, where a consumer group reads them too and
// its history is checked for Jepsen's queue anomalies), and injects a
// seeded schedule of faults — kill -9 and restart, SIGSTOP/SIGCONT, a
// node cut from its peers, the clients cut from a node — each healed
// after a few seconds. Then it checks that
// every acknowledged write is present exactly once, at its offset and in
// order, that the replicas are byte-equal below the high watermark, and
// reports how long writes took to resume after each fault and heal:
//
//	go run ./tools/chaos -duration 5m -seed 7     (or: make chaos SEED=7)
//
// Network faults use iptables rules on the nodes' loopback ports in a
// chain of the run's own (CHAOS-<pid>), removed at exit, on SIGINT or
// SIGTERM, and by the next run when a run was killed; they need root and
// iptables, and are skipped with a message otherwise.
//
// Exit codes: 0 every check held (and, with -strict, every resumption
// met the 2 s target); 1 a check failed or the run could not be carried
// out; 2 bad flags; 3 -strict and the target was missed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corestream/corestream/tools/chaos/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o harness.Options
	var kinds, factors, jsonOut string
	var strict, keep bool
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Bin, "bin", "", "the corestream binary (default: build ./cmd/corestream into the run directory)")
	fs.StringVar(&o.Dir, "dir", "", "run directory: nodes' data and logs (default: a new temporary directory, removed after a run that passed unless -keep)")
	fs.IntVar(&o.Nodes, "n", 3, "nodes")
	fs.IntVar(&o.Shards, "shards", 1, "shards per node")
	fs.StringVar(&o.Fsync, "fsync", "always", "storage.fsync of every node")
	fs.IntVar(&o.Partitions, "partitions", 3, "partitions per topic")
	fs.StringVar(&factors, "factors", "1,2,3", "replication factors, one topic each")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the fault schedule (0: from the clock; printed)")
	fs.DurationVar(&o.Duration, "duration", 5*time.Minute, "length of the fault phase (no fault starts after it)")
	fs.IntVar(&o.FaultsMax, "faults", 1000, "at most this many faults")
	fs.StringVar(&kinds, "kinds", "all", "fault kinds: kill,stop,isolate,client-cut or all")
	fs.DurationVar(&o.HoldMin, "hold-min", 3*time.Second, "shortest fault")
	fs.DurationVar(&o.HoldMax, "hold-max", 8*time.Second, "longest fault")
	fs.DurationVar(&o.GapMax, "gap-max", 2*time.Second, "longest quiet after a fault has settled")
	fs.DurationVar(&o.SettleMax, "settle-max", 30*time.Second, "longest wait after a heal for every partition to write again")
	fs.Int64Var(&o.WritesMax, "writes", 5_000_000, "at most this many writes")
	fs.DurationVar(&o.DeliveryTimeout, "delivery-timeout", 10*time.Second, "the producer's delivery timeout")
	fs.IntVar(&o.InFlight, "inflight", 1, "unacknowledged records per partition (1: one synchronous write at a time)")
	fs.StringVar(&o.Client, "client", "sdk", "the clients: sdk (the Go SDK, native port) or kafka (franz-go on the Kafka port, with a consumer group)")
	fs.DurationVar(&o.KafkaMetadataMinAge, "kafka-metadata-min-age", 0, "franz-go's MetadataMinAge for the kafka clients (0: its default, 5s)")
	fs.IntVar(&o.GroupMembers, "group-members", 0, "members of the consumer group of a kafka run (0: 2; -1: no group)")
	fs.DurationVar(&o.SampleEvery, "sample-every", 10*time.Second, "how often each node's memory, descriptors and goroutines are sampled")
	fs.BoolVar(&o.Soak, "soak", false, "fail when a node's resources after the warm-up grow past 1.25x the warm-up's plus a margin")
	fs.DurationVar(&o.Warmup, "warmup", 10*time.Minute, "the soak's warm-up")
	fs.BoolVar(&o.NoNetwork, "no-network", false, "skip the network faults")
	fs.StringVar(&o.LogLevel, "log-level", "info", "the nodes' log.level (debug: the lines an election's timeline is read from)")
	fs.BoolVar(&strict, "strict", false, "exit 3 when a resumption missed the 2 s target")
	fs.BoolVar(&keep, "keep", false, "keep the run directory of a run that passed")
	fs.StringVar(&jsonOut, "json", "", "also write the report as JSON to this file")
	quiet := fs.Bool("q", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var err error
	if o.Kinds, err = harness.ParseKinds(kinds); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	for _, f := range strings.Split(factors, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintf(stderr, "chaos: -factors: %q is not a number\n", f)
			return 2
		}
		o.Factors = append(o.Factors, n)
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if !*quiet {
		o.Log = stderr
	}
	temp := o.Dir == ""
	if temp {
		if o.Dir, err = os.MkdirTemp("", "corestream-chaos-"); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if o.Bin == "" {
		o.Bin = filepath.Join(o.Dir, "bin", "corestream")
		fmt.Fprintf(stderr, "chaos: building %s\n", o.Bin)
		cmd := exec.Command("go", "build", "-o", o.Bin, "github.com/corestream/corestream/cmd/corestream")
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(stderr, "chaos: building corestream (or pass -bin): %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "chaos: seed %d (replay the schedule with -seed %d)\n", o.Seed, o.Seed)
	rep, err := harness.Run(ctx, o)
	if rep != nil {
		rep.Write(stdout)
		if jsonOut != "" {
			if b, jerr := json.MarshalIndent(rep, "", "  "); jerr == nil {
				jerr = os.WriteFile(jsonOut, b, 0o644)
				if jerr != nil {
					fmt.Fprintln(stderr, jerr)
				}
			}
		}
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "chaos: %v\nchaos: data and logs kept in %s\n", err, o.Dir)
		return 1
	case !rep.OK():
		fmt.Fprintf(stderr, "chaos: data and logs kept in %s\n", o.Dir)
		return 1
	}
	if temp && !keep {
		os.RemoveAll(o.Dir)
	} else {
		fmt.Fprintf(stderr, "chaos: data and logs kept in %s\n", o.Dir)
	}
	if strict && rep.TargetMissed() > 0 {
		return 3
	}
	return 0
}
