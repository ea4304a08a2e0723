package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
)

// The idle measurement's size: the default is a quick check that runs
// with the suite; the figure for 10,000 replicas per node comes from
//
//	go test ./cmd/corestream -run TestE2EClusterIdleCPU -v -idle-replicas=10000 -idle-window=30s -timeout=30m
var (
	idleReplicasFlag = flag.Int("idle-replicas", 300, "TestE2EClusterIdleCPU: partition replicas per node")
	idleWindowFlag   = flag.Duration("idle-window", 5*time.Second, "TestE2EClusterIdleCPU: how long the idle CPU is measured")
)

// idleCPUBound is the idle CPU per node (fraction of one core) past which
// TestE2EClusterIdleCPU fails: idle groups quiesce, so an idle node
// should cost next to nothing whatever its partition count.
const idleCPUBound = 0.25

// TestE2EClusterIdleCPU measures what an idle node costs: three nodes
// (default timeouts) host topics of factor 3, 2 and 1 sized so that every
// node holds about -idle-replicas partition replicas (70% of them of
// factor-3 partitions, 20% factor 2, 10% factor 1); once every partition
// has a primary and the cluster is quiet, it reads each node's CPU time
// from /proc over -idle-window and its resident memory and open files.
func TestE2EClusterIdleCPU(t *testing.T) {
	n := *idleReplicasFlag
	p3, p2, p1 := n*7/10, n*3/10, n*3/10
	c := startCluster(t, clusterOpts{nodes: 3, heartbeatMs: 100, electionMs: 1000, fsync: "never"})
	cl := c.dial(client.Config{RequestTimeout: 10 * time.Minute})
	created := time.Now()
	for _, tp := range []struct {
		prefix     string
		partitions int
		factor     int16
	}{{"idle3", p3, 3}, {"idle2", p2, 2}, {"idle1", p1, 1}} {
		for i := 0; tp.partitions > 0; i++ {
			// Topics of at most 500 partitions: a create answers once its
			// partitions have primaries, so the elections come in waves
			// the machine can absorb.
			parts := min(tp.partitions, 500)
			tp.partitions -= parts
			createTopic(t, cl, client.TopicSpec{Name: fmt.Sprintf("%s-%d", tp.prefix, i), Partitions: int32(parts), ReplicationFactor: tp.factor})
		}
	}
	waitUntil(t, 20*time.Minute, "every partition with a primary", func() (bool, string) {
		st, err := c.status(1)
		if err != nil {
			return false, err.Error()
		}
		return st.Partitions == int32(p1+p2+p3) && st.Offline == 0, fmt.Sprintf("%d partitions, %d offline", st.Partitions, st.Offline)
	})
	st, err := c.status(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d partitions (%d factor 3, %d factor 2, %d factor 1) created and led in %v", st.Partitions, p3, p2, p1, time.Since(created).Round(time.Millisecond))
	// Let the groups settle (no-ops committed, followers caught up,
	// groups quiesced), then measure.
	led := time.Now()
	settle := 10 * time.Second
	eventually(t, settle+time.Minute, "settling", func() bool { return time.Since(led) > settle })
	// One window, and a second one for a node over the bound: the test
	// shares two cores with the rest of the suite, and a node finishing
	// work of the creation (a late primary move, a snapshot) in the first
	// window is not idle cost. A node over the bound in both fails.
	measure := func(window int) []float64 {
		var before []procTimes
		for _, s := range c.nodes {
			before = append(before, readProcTimes(t, s.cmd.Process.Pid))
		}
		start := time.Now()
		eventually(t, *idleWindowFlag+time.Minute, "the idle window", func() bool { return time.Since(start) >= *idleWindowFlag })
		wall := time.Since(start)
		out := make([]float64, len(c.nodes))
		for i, s := range c.nodes {
			pid := s.cmd.Process.Pid
			after := readProcTimes(t, pid)
			out[i] = float64(after.cpuTicks-before[i].cpuTicks) / clockTicksPerSecond / wall.Seconds()
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
			replicas := int32(0)
			for _, nd := range st.Nodes {
				if nd.ID == int32(i+1) {
					replicas = nd.Replicas
				}
			}
			t.Logf("window %d: node %d: %d replicas; idle CPU %.1f%% of one core over %v; RSS %.1f MiB; %d threads; %d open files (provisional, shared 2-core machine)",
				window, i+1, replicas, 100*out[i], wall.Round(time.Millisecond), float64(s.rssBytes())/(1<<20), after.threads, len(fds))
		}
		return out
	}
	first := measure(1)
	if slices.IndexFunc(first, func(cpu float64) bool { return cpu > idleCPUBound }) < 0 {
		return
	}
	second := measure(2)
	for i := range first {
		if first[i] > idleCPUBound && second[i] > idleCPUBound {
			t.Errorf("node %d uses %.1f%% and %.1f%% of a core while idle in two windows (bound %.0f%%)", i+1, 100*first[i], 100*second[i], 100*idleCPUBound)
		}
	}
}

// clockTicksPerSecond is USER_HZ, the unit of /proc/PID/stat times (100
// on every Linux architecture Go supports).
const clockTicksPerSecond = 100

// procTimes is a process's CPU time (user+system, in clock ticks) and
// thread count, from /proc/PID/stat.
type procTimes struct {
	cpuTicks int64
	threads  int
}

func readProcTimes(t *testing.T, pid int) procTimes {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14, stime 15, num_threads 20.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	threads, _ := strconv.Atoi(f[17])
	return procTimes{cpuTicks: utime + stime, threads: threads}
}
