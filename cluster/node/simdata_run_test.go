package node

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/segment"
)

var (
	simDataSeedFlag   = flag.Int64("simdata.seed", -1, "run only this data-path simulation seed, with a trace (replay)")
	simDataSeedsFlag  = flag.Int("simdata.seeds", 120, "number of data-path simulation seeds to run")
	simDataFirstFlag  = flag.Int64("simdata.first-seed", 1, "first data-path simulation seed")
	simDataNodesFlag  = flag.Int("simdata.nodes", 0, "roster size of every data-path simulation (0: drawn, 3 or 5)")
	simDataFaultyFlag = flag.Duration("simdata.faulty", 4*time.Second, "simulated time of the adversarial phase of each data-path seed")
	simDataSeeds32    = flag.Int("simdata.seeds32", 4, "number of 32-node data-path seeds TestSimData32 runs")
	simDataFsyncFlag  = flag.String("simdata.fsync", "always", "the replicas' storage.fsync policy; any but always may lose acknowledged batches on a power loss, which the run then counts instead of failing, and checks only that every replica converges")
	simDataLossySeeds = flag.Int("simdata.lossy-seeds", 60, "number of data-path seeds TestSimDataLossy runs under fsync=never")
)

// simDataFsync is -simdata.fsync's policy.
func simDataFsync(t *testing.T) segment.FsyncPolicy {
	p, err := segment.ParseFsyncPolicy(*simDataFsyncFlag)
	if err != nil {
		t.Fatalf("-simdata.fsync: %v", err)
	}
	return p
}

// simDataReplayCmd is the one command that replays seed exactly.
func simDataReplayCmd(seed int64, nodes int, fsync segment.FsyncPolicy) string {
	extra := ""
	if nodes != 0 {
		extra += fmt.Sprintf(" -simdata.nodes=%d", nodes)
	}
	if *simDataFaultyFlag != 4*time.Second {
		extra += fmt.Sprintf(" -simdata.faulty=%v", *simDataFaultyFlag)
	}
	if fsync != segment.FsyncAlways {
		extra += fmt.Sprintf(" -simdata.fsync=%s", fsync)
	}
	return fmt.Sprintf("go test ./cluster/node -run 'TestSimData$' -simdata.seed=%d%s -v", seed, extra)
}

// runDataSim runs one seed: the adversarial phase (faulty of simulated
// time) with clients producing and reading, then the heal, then the
// checks once the cluster has settled.
func runDataSim(seed int64, nodes int, faulty time.Duration, fsync segment.FsyncPolicy, trace func(string)) (st dsStats, err error) {
	s := newDsSim(seed, nodes, fsync, trace)
	defer s.shutdown()
	defer func() {
		// An assertion of the code under test (raftlite's, the log's)
		// fails the seed, with its replay, not the whole run.
		if r := recover(); r != nil {
			st, err = s.stats, fmt.Errorf("at %v: panic: %v\n%s", s.now(), r, debug.Stack())
		}
	}()
	for _, nd := range s.nodes {
		nd.start()
	}
	for i := 0; i < s.p.clients; i++ {
		c := &dsClient{s: s, id: i, pid: int64(1000 + i), rng: rand.New(rand.NewPCG(uint64(seed), uint64(i)+1)),
			seq: make([]int32, s.p.parts), guess: make([]int32, s.p.parts)}
		for p := range c.guess {
			c.guess[p] = s.randomReplica(c.rng, int32(p))
		}
		s.clients = append(s.clients, c)
		c.at(0, c.next)
	}
	for p := 0; p < s.p.parts; p++ {
		r := &dsReader{s: s, p: int32(p), rng: rand.New(rand.NewPCG(uint64(seed), uint64(p)+1<<20)),
			seen: map[int64]dsSeen{}, next: map[int64]int32{}}
		r.guess = s.randomReplica(r.rng, r.p)
		s.readers = append(s.readers, r)
		r.at(0, r.poll)
	}
	s.at(s.faultGap(), s.chaos)
	end := s.now() + faulty
	s.runUntil(end, nil)
	if s.err != nil {
		return s.stats, s.err
	}
	s.producing = false
	s.heal()
	for _, nd := range s.nodes {
		if !nd.up {
			nd.start()
		}
	}
	s.tracef("healed; settling")
	var why string
	s.runUntil(s.now()+dsSettleMax, func() bool { why = s.settled(); return why == "" })
	if s.err == nil && why != "" {
		s.fail("not settled %v after the heal: %s", dsSettleMax, why)
	}
	for p := int32(0); p < int32(s.p.parts) && why == ""; p++ {
		for _, id := range s.topic.Replicas[p] {
			if r := s.node(int32(id)).replica(p); r != nil {
				s.tracef("settled: partition %d on node %d: high watermark %d, log end %d, primary %v", p, id, r.CommitEnd(), r.Log().LogEndOffset(), r.IsPrimary())
			}
		}
	}
	if s.err == nil && !s.lossy {
		s.checkAcked()
	}
	if s.err == nil {
		for p := int32(0); p < int32(s.p.parts); p++ {
			s.checkReplicas(p, s.primaryOf(p))
		}
	}
	return s.stats, s.err
}

// shutdown releases every live node's shards (their epoll sets).
func (s *dsSim) shutdown() {
	for _, nd := range s.nodes {
		if nd.up {
			nd.group.AbandonStepped()
			nd.up = false
		}
	}
}

func (s *dsSim) faultGap() time.Duration {
	return time.Duration(1+s.rng.IntN(2*s.p.faultGapMs)) * time.Millisecond
}

// chaos injects one fault and schedules the next.
func (s *dsSim) chaos() {
	if !s.producing {
		return
	}
	down := 0
	for _, nd := range s.nodes {
		if !nd.up {
			down++
		}
	}
	switch x := s.rng.Float64(); {
	case x < s.p.crashP:
		nd := s.nodes[s.rng.IntN(len(s.nodes))]
		if nd.up && down < (s.p.n-1)/2 {
			if s.rng.IntN(4) == 0 {
				nd.stop()
			} else {
				nd.crash(s.rng.Float64() < s.p.powerLossP)
			}
			s.at(time.Duration(300+s.rng.IntN(3000))*time.Millisecond, func() {
				if !nd.up && s.producing {
					nd.start()
				}
			})
		}
	case x < s.p.crashP+0.03:
		// Every node at once; all return.
		for _, nd := range s.nodes {
			if nd.up {
				nd.crash(s.rng.Float64() < s.p.powerLossP)
			}
		}
		s.at(time.Duration(100+s.rng.IntN(1000))*time.Millisecond, func() {
			for _, nd := range s.nodes {
				if !nd.up && s.producing {
					nd.start()
				}
			}
		})
	case x < s.p.crashP+s.p.jumpP:
		nd := s.nodes[s.rng.IntN(len(s.nodes))]
		j := time.Duration(s.rng.IntN(4800)-1600) * time.Millisecond
		nd.wallOffsetNs += int64(j)
		s.stats.ClockJumps++
		s.tracef("node %d's wall clock jumps %v", nd.id, j)
	default:
		s.partition()
	}
	s.at(s.faultGap(), s.chaos)
}

// partition cuts the cluster in two sides (both ways, or one way), healed
// after a while.
func (s *dsSim) partition() {
	s.heal()
	side := make([]bool, s.p.n+1)
	for i := 1; i <= s.p.n; i++ {
		side[i] = s.rng.IntN(2) == 0
	}
	oneWay := s.rng.IntN(3) == 0
	for a := 1; a <= s.p.n; a++ {
		for b := 1; b <= s.p.n; b++ {
			if side[a] && !side[b] || !oneWay && !side[a] && side[b] {
				s.cut[a][b] = true
			}
		}
	}
	s.stats.Partitions++
	s.tracef("partition %v (one way %v)", side[1:], oneWay)
	s.at(time.Duration(200+s.rng.IntN(4000))*time.Millisecond, s.heal)
}

func (s *dsSim) heal() {
	for a := range s.cut {
		for b := range s.cut[a] {
			s.cut[a][b] = false
		}
	}
}

// primaryOf is the live node whose replica of p leads, or nil.
func (s *dsSim) primaryOf(p int32) *dsNode {
	for _, nd := range s.nodes {
		if r := nd.replica(p); r != nil && r.IsPrimary() {
			return nd
		}
	}
	return nil
}

// settled returns "" once every client's batch is acknowledged, every
// partition has a primary, every replica holds the primary's log and
// high watermark, and every reader has read to it; else what it waits for.
func (s *dsSim) settled() string {
	for _, c := range s.clients {
		if c.cur != nil {
			return fmt.Sprintf("client %d's batch p%d seq %d is not acknowledged", c.id, c.cur.p, c.cur.seq)
		}
	}
	for p := int32(0); p < int32(s.p.parts); p++ {
		prim := s.primaryOf(p)
		if prim == nil {
			return fmt.Sprintf("partition %d has no primary", p)
		}
		pr := prim.replica(p)
		hw, leo := pr.CommitEnd(), pr.Log().LogEndOffset()
		if hw != leo {
			return fmt.Sprintf("partition %d: primary %d's high watermark %d is below its log end %d", p, prim.id, hw, leo)
		}
		for _, id := range s.topic.Replicas[p] {
			r := s.node(int32(id)).replica(p)
			if r == nil {
				return fmt.Sprintf("partition %d: node %d's replica is not open", p, id)
			}
			if r.CommitEnd() != hw || r.Log().LogEndOffset() != leo {
				return fmt.Sprintf("partition %d: node %d at %d/%d, primary %d at %d/%d", p, id, r.CommitEnd(), r.Log().LogEndOffset(), prim.id, hw, leo)
			}
		}
		if rd := s.readers[p]; rd.pos != pr.HighWatermark() && !s.lossy {
			return fmt.Sprintf("partition %d: the reader is at %d of %d", p, rd.pos, pr.HighWatermark())
		}
	}
	return ""
}

// TestSimData runs the data-path simulator over many seeds (-simdata.seeds
// from -simdata.first-seed): clients produce and read through each node's
// service while the network drops, delays, reorders and partitions, nodes
// crash (power losses tear files) and restart, and wall clocks jump. It
// checks that no acknowledged write is lost or written twice, that each
// partition reads in order without holes and never changes what it read,
// that one node leads each generation, and, once healed, that every
// replica's log equals the primary's below the high watermark. A failure
// prints the command that replays it.
func TestSimData(t *testing.T) {
	if *simDataSeedFlag >= 0 {
		var trace []string
		st, err := runDataSim(*simDataSeedFlag, *simDataNodesFlag, *simDataFaultyFlag, simDataFsync(t), func(l string) { trace = append(trace, l) })
		if testing.Verbose() {
			t.Log("trace:\n" + strings.Join(trace, "\n"))
		}
		t.Logf("seed %d: %+v", *simDataSeedFlag, st)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", *simDataSeedFlag, err, simDataReplayCmd(*simDataSeedFlag, *simDataNodesFlag, simDataFsync(t)))
		}
		return
	}
	runDataSeeds(t, *simDataNodesFlag, *simDataSeedsFlag, simDataFsync(t))
}

// TestSimDataLossy runs seeds under fsync=never, where a power loss takes
// acknowledged batches: every replica must still converge, a follower
// that lost what it acknowledged included (raftlite's leader once took
// its refusals for stale ones and left it behind for good).
func TestSimDataLossy(t *testing.T) {
	if *simDataSeedFlag >= 0 || *simDataLossySeeds == 0 {
		t.Skip("a single seed or none asked")
	}
	runDataSeeds(t, *simDataNodesFlag, *simDataLossySeeds, segment.FsyncNever)
}

// TestSimData32 runs a few seeds of 32 nodes.
func TestSimData32(t *testing.T) {
	if *simDataSeedFlag >= 0 || *simDataSeeds32 == 0 {
		t.Skip("a single seed or none asked")
	}
	runDataSeeds(t, 32, *simDataSeeds32, simDataFsync(t))
}

func runDataSeeds(t *testing.T, nodes, count int, fsync segment.FsyncPolicy) {
	start := time.Now()
	var mu sync.Mutex
	var total dsStats
	var failed []string
	seeds := make(chan int64)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				st, err := runDataSim(seed, nodes, *simDataFaultyFlag, fsync, nil)
				mu.Lock()
				total.add(st)
				if err != nil {
					failed = append(failed, fmt.Sprintf("seed %d: %v\nreplay: %s", seed, err, simDataReplayCmd(seed, nodes, fsync)))
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < count; i++ {
		seeds <- *simDataFirstFlag + int64(i)
	}
	close(seeds)
	wg.Wait()
	el := time.Since(start)
	t.Logf("%d seeds (nodes %d, fsync %s) in %v, %.1f seeds/s: %+v", count, nodes, fsync, el.Round(time.Millisecond), float64(count)/el.Seconds(), total)
	for i, f := range failed {
		if i == 5 {
			t.Errorf("... and %d more", len(failed)-5)
			break
		}
		t.Error(f)
	}
}

func (a *dsStats) add(b dsStats) {
	a.Messages += b.Messages
	a.Dropped += b.Dropped
	a.Partitions += b.Partitions
	a.Crashes += b.Crashes
	a.PowerLosses += b.PowerLosses
	a.Stops += b.Stops
	a.ClockJumps += b.ClockJumps
	a.Produced += b.Produced
	a.Acked += b.Acked
	a.Retries += b.Retries
	a.Fetches += b.Fetches
	a.RecordsChecked += b.RecordsChecked
	a.PrimaryTerms += b.PrimaryTerms
	a.Lost += b.Lost
	a.Fenced += b.Fenced
}

// TestSimDataReplays holds that a seed replays: two runs trace the same
// lines.
func TestSimDataReplays(t *testing.T) {
	for _, seed := range []int64{3, 8} {
		var a, b []string
		_, errA := runDataSim(seed, 0, 2*time.Second, segment.FsyncAlways, func(l string) { a = append(a, l) })
		_, errB := runDataSim(seed, 0, 2*time.Second, segment.FsyncAlways, func(l string) { b = append(b, l) })
		if (errA == nil) != (errB == nil) {
			t.Fatalf("seed %d: %v, then %v", seed, errA, errB)
		}
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					t.Fatalf("seed %d: the runs differ at line %d:\n%s\n%s", seed, i, a[i], b[i])
				}
			}
			t.Fatalf("seed %d: %d lines, then %d", seed, len(a), len(b))
		}
	}
}
