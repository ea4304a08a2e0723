package node

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	simSeedFlag   = flag.Int64("sim.seed", -1, "run only this control-plane simulation seed, with a trace (replay)")
	simSeedsFlag  = flag.Int("sim.seeds", 300, "number of control-plane simulation seeds to run")
	simFirstFlag  = flag.Int64("sim.first-seed", 1, "first control-plane simulation seed")
	simNodesFlag  = flag.Int("sim.nodes", 0, "roster size of every simulated cluster (0: drawn from the seed, 3 or 5)")
	simFaultyFlag = flag.Duration("sim.faulty", 20*time.Second, "simulated time of the adversarial phase of each seed")
	simSeeds32    = flag.Int("sim.seeds32", 4, "number of 32-node control-plane simulation seeds TestSimCluster32 runs")
)

// simReplayCmd is the one command that replays seed exactly.
func simReplayCmd(seed int64, nodes int) string {
	extra := ""
	if nodes != 0 {
		extra += fmt.Sprintf(" -sim.nodes=%d", nodes)
	}
	if *simFaultyFlag != 20*time.Second {
		extra += fmt.Sprintf(" -sim.faulty=%v", *simFaultyFlag)
	}
	return fmt.Sprintf("go test ./cluster/node -run 'TestSimCluster$' -sim.seed=%d%s -v", seed, extra)
}

// TestSimCluster runs the control-plane simulator over many seeds
// (-sim.seeds from -sim.first-seed): N nodes' metadata controller core,
// routes, liveness, failover rule and balancer driver over a simulated
// network that drops, delays, reorders and partitions, then heals. It
// checks one primary per term for every group, one committed metadata
// log that every node applies a prefix of, routes that name only a
// generation's real primary and never go back, and, after the heal, that
// every node answers the committed metadata (acknowledged topics
// included), names every partition's current primary, and that the
// balancer brought the primaries within bounds. A failure prints the
// seed and the command that replays it.
func TestSimCluster(t *testing.T) {
	if *simSeedFlag >= 0 {
		o := simClusterOptions{Seed: *simSeedFlag, Nodes: *simNodesFlag, Faulty: *simFaultyFlag}
		var trace []string
		o.Trace = func(l string) { trace = append(trace, l) }
		res, err := runSimCluster(o)
		if testing.Verbose() {
			t.Log("trace:\n" + strings.Join(trace, "\n"))
		}
		t.Logf("seed %d: %+v", *simSeedFlag, res)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", *simSeedFlag, err, simReplayCmd(*simSeedFlag, *simNodesFlag))
		}
		return
	}
	runSimSeeds(t, *simNodesFlag, *simSeedsFlag)
}

// TestSimCluster32 runs a few seeds at the roster limit, 32 nodes (make
// sim-cluster SIM_NODES=32 runs many); a failure replays with
// -sim.nodes=32 -sim.seed=N.
func TestSimCluster32(t *testing.T) {
	if *simSeedFlag >= 0 || *simNodesFlag != 0 {
		t.Skip("-sim.seed or -sim.nodes given: TestSimCluster runs it")
	}
	runSimSeeds(t, 32, *simSeeds32)
}

// runSimSeeds runs count seeds from -sim.first-seed on clusters of nodes
// nodes (0: drawn), two at a time, and reports the figures and failures.
func runSimSeeds(t *testing.T, nodes, count int) {
	opts := func(seed int64) simClusterOptions {
		return simClusterOptions{Seed: seed, Nodes: nodes, Faulty: *simFaultyFlag}
	}
	type failure struct {
		seed int64
		err  error
	}
	var (
		mu       sync.Mutex
		failures []failure
		total    simClusterResult
		settle   time.Duration
		sizes    = map[int]int{}
	)
	began := time.Now()
	seeds := make(chan int64)
	var wg sync.WaitGroup
	// Two workers at most: the simulator must not need more than 2 cores.
	for w := 0; w < min(2, runtime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				res, err := runSimCluster(opts(seed))
				mu.Lock()
				if err != nil {
					failures = append(failures, failure{seed, err})
				}
				sizes[res.Nodes]++
				total.Messages += res.Messages
				total.Dropped += res.Dropped
				total.Partitions += res.Partitions
				total.MetaTerms += res.MetaTerms
				total.PartTerms += res.PartTerms
				total.TopicsAcked += res.TopicsAcked
				total.MovesDone += res.MovesDone
				total.PeerDown += res.PeerDown
				total.Crashes += res.Crashes
				total.ClockJumps += res.ClockJumps
				total.Snapshots += res.Snapshots
				total.Installs += res.Installs
				total.Unbalanced += res.Unbalanced
				settle = max(settle, res.SettledAfter)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < count; i++ {
		seeds <- *simFirstFlag + int64(i)
	}
	close(seeds)
	wg.Wait()
	took := time.Since(began)
	t.Logf("%d seeds (clusters of %v nodes) x %v faulty in %v (%.1f seeds/s): %d messages, %d dropped, %d partitions, %d crashes, %d clock jumps, %d peer-down events, metadata terms %d, partition terms %d, topics acknowledged %d, primary moves %d, metadata snapshots %d and installs %d, settled outside the balance bounds with no move left %d; slowest settle %v after the heal",
		count, sizes, *simFaultyFlag, took.Round(time.Millisecond), float64(count)/took.Seconds(),
		total.Messages, total.Dropped, total.Partitions, total.Crashes, total.ClockJumps, total.PeerDown, total.MetaTerms, total.PartTerms,
		total.TopicsAcked, total.MovesDone, total.Snapshots, total.Installs, total.Unbalanced, settle)
	for i, f := range failures {
		if i == 5 && !testing.Verbose() {
			t.Errorf("... and %d more failing seeds", len(failures)-5)
			break
		}
		t.Errorf("seed %d: %v\nreplay: %s", f.seed, f.err, simReplayCmd(f.seed, nodes))
	}
}

// A seed replays exactly: two runs of one seed give the same trace, line
// for line (no map order, wall clock or global randomness leaks in).
func TestSimClusterReplays(t *testing.T) {
	for _, seed := range []int64{3, 98, 397} {
		var traces [2][]string
		for i := range traces {
			o := simClusterOptions{Seed: seed, Faulty: 10 * time.Second}
			o.Trace = func(l string) { traces[i] = append(traces[i], l) }
			if _, err := runSimCluster(o); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if len(traces[0]) < 5 {
			t.Fatalf("seed %d traced only %d lines", seed, len(traces[0]))
		}
		if strings.Join(traces[0], "\n") != strings.Join(traces[1], "\n") {
			for i := range traces[0] {
				if i >= len(traces[1]) || traces[0][i] != traces[1][i] {
					t.Fatalf("seed %d: runs differ at trace line %d", seed, i)
				}
			}
			t.Fatalf("seed %d: the second run traced more lines", seed)
		}
	}
}
