package rafttest

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	seedFlag  = flag.Int64("seed", -1, "run only this simulation seed, with a trace (replay)")
	seedsFlag = flag.Int("seeds", 2000, "number of simulation seeds to run")
	firstFlag = flag.Int64("first-seed", 1, "first simulation seed")
	longFlag  = flag.Bool("long", false, "long simulation schedules (make sim)")
)

// Schedule lengths in ticks: short ones keep the default run quick, long
// ones (make sim) reach deeper states.
const (
	shortTicks = 250
	longTicks  = 1500
)

// replayCmd is the one command that replays seed exactly.
func replayCmd(seed int64) string {
	long := ""
	if *longFlag {
		long = " -long"
	}
	return fmt.Sprintf("go test ./raftlite/rafttest -run 'TestSim$' -seed=%d%s -v", seed, long)
}

// TestSim runs the deterministic simulator over many seeds (-seeds, from
// -first-seed) and checks safety at every step and liveness after healing.
// A failure prints its seed and the command that replays it.
func TestSim(t *testing.T) {
	ticks := shortTicks
	if *longFlag {
		ticks = longTicks
	}
	if *seedFlag >= 0 {
		var trace []string
		res, err := RunSim(SimOptions{Seed: *seedFlag, Ticks: ticks, Trace: func(l string) { trace = append(trace, l) }})
		if testing.Verbose() {
			t.Log("trace:\n" + strings.Join(trace, "\n"))
		}
		t.Logf("seed %d: %+v", *seedFlag, res)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", *seedFlag, err, replayCmd(*seedFlag))
		}
		return
	}
	type failure struct {
		seed int64
		err  error
	}
	var (
		mu        sync.Mutex
		failures  []failure
		total     SimResult
		lin       int
		unchecked []int64 // porcupine timed out: not a failure, but say so
	)
	seeds := make(chan int64)
	var wg sync.WaitGroup
	// Two workers at most: the simulator must not need more than 2 cores.
	for w := 0; w < min(2, runtime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				res, err := RunSim(SimOptions{Seed: seed, Ticks: ticks})
				mu.Lock()
				if err != nil {
					failures = append(failures, failure{seed, err})
				}
				total.Proposed += res.Proposed
				total.Acked += res.Acked
				total.Committed += res.Committed
				total.Terms += res.Terms
				total.Crashes += res.Crashes
				total.Partitions += res.Partitions
				total.Resets += res.Resets
				total.Transfers += res.Transfers
				total.ConfChanges += res.ConfChanges
				total.ConfApplied += res.ConfApplied
				if res.Linearized {
					lin++
				} else if err == nil {
					unchecked = append(unchecked, seed)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < *seedsFlag; i++ {
		seeds <- *firstFlag + int64(i)
	}
	close(seeds)
	wg.Wait()
	t.Logf("%d seeds x %d ticks: proposed %d, acked %d, committed entries %d, led terms %d, crashes %d, partitions %d, resets %d, transfers %d, membership changes accepted %d and committed %d, histories linearizable %d",
		*seedsFlag, ticks, total.Proposed, total.Acked, total.Committed, total.Terms, total.Crashes,
		total.Partitions, total.Resets, total.Transfers, total.ConfChanges, total.ConfApplied, lin)
	if len(unchecked) > 0 {
		t.Logf("linearizability check timed out (history not checked) for seeds %v", unchecked)
	}
	if len(failures) > 5 {
		seeds := make([]int64, len(failures))
		for i, f := range failures {
			seeds[i] = f.seed
		}
		t.Logf("failing seeds: %v", seeds)
	}
	for i, f := range failures {
		if i == 5 {
			t.Errorf("... and %d more failing seeds", len(failures)-5)
			break
		}
		t.Errorf("seed %d: %v\nreplay: %s", f.seed, f.err, replayCmd(f.seed))
	}
}
