package harness

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resources over a long run: every Options.SampleEvery each node's
// /metrics is read for its resident memory, open descriptors and
// goroutines (a node that is stopped or cut off is skipped for that
// round). CheckGrowth compares what each node held after the warm-up
// with what it held at its end, so that a leak shows as growth that
// faults and load do not explain.

// Bounds of the sampling and of the growth a soak allows.
const (
	sampleTimeout = 2 * time.Second
	// growthFactor and the margins bound a node's later maximum against
	// its maximum at the end of the warm-up: later <= factor*base+margin.
	growthFactor      = 1.25
	growthRSSMargin   = 64 << 20
	growthFDsMargin   = 64
	growthGorosMargin = 256
)

// ResourceSample is one node's figures at one time.
type ResourceSample struct {
	Node                 int
	AtNs                 int64
	RSSBytes, FDs, Goros int64
}

// sampler reads the nodes' figures until stopped. mu guards samples.
type sampler struct {
	mu      sync.Mutex
	samples []ResourceSample
}

// run samples every nodes' /metrics (addrs[i] is node i+1's HTTP
// address) every every until ctx ends.
func (s *sampler) run(ctx context.Context, addrs []string, every time.Duration, clock func() int64) {
	hc := &http.Client{Timeout: sampleTimeout}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, a := range addrs {
			if rs, ok := readResources(ctx, hc, a); ok {
				rs.Node, rs.AtNs = i+1, clock()
				s.mu.Lock()
				s.samples = append(s.samples, rs)
				s.mu.Unlock()
			}
		}
	}
}

func (s *sampler) all() []ResourceSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ResourceSample(nil), s.samples...)
}

// readResources reads the three gauges from one node's /metrics.
func readResources(ctx context.Context, hc *http.Client, addr string) (ResourceSample, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return ResourceSample{}, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return ResourceSample{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ResourceSample{}, false
	}
	var rs ResourceSample
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var p *int64
		switch name {
		case "process_resident_memory_bytes":
			p = &rs.RSSBytes
		case "process_open_fds":
			p = &rs.FDs
		case "go_goroutines":
			p = &rs.Goros
		default:
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		*p = int64(f)
		found++
	}
	return rs, found == 3
}

// Growth is one node's figures at the end of the warm-up (the maximum
// over its second half) and after it (the maximum), and whether they
// stayed within the bound.
type Growth struct {
	Node                      int
	BaseRSS, LaterRSS         int64
	BaseFDs, LaterFDs         int64
	BaseGoros, LaterGoros     int64
	Within                    bool
	BaseSamples, LaterSamples int
}

func (g Growth) String() string {
	return fmt.Sprintf("node %d: RSS %d → %d MiB, descriptors %d → %d, goroutines %d → %d (%d and %d samples)%s",
		g.Node, g.BaseRSS>>20, g.LaterRSS>>20, g.BaseFDs, g.LaterFDs, g.BaseGoros, g.LaterGoros, g.BaseSamples, g.LaterSamples,
		map[bool]string{true: "", false: " — OVER THE BOUND"}[g.Within])
}

// CheckGrowth compares, per node, the samples of warmup's second half
// with those after it. A node without samples in both is left out.
func CheckGrowth(samples []ResourceSample, warmup time.Duration) []Growth {
	byNode := map[int]*Growth{}
	var order []int
	for _, s := range samples {
		g := byNode[s.Node]
		if g == nil {
			g = &Growth{Node: s.Node}
			byNode[s.Node] = g
			order = append(order, s.Node)
		}
		switch {
		case s.AtNs > int64(warmup):
			g.LaterSamples++
			g.LaterRSS, g.LaterFDs, g.LaterGoros = max(g.LaterRSS, s.RSSBytes), max(g.LaterFDs, s.FDs), max(g.LaterGoros, s.Goros)
		case s.AtNs > int64(warmup/2):
			g.BaseSamples++
			g.BaseRSS, g.BaseFDs, g.BaseGoros = max(g.BaseRSS, s.RSSBytes), max(g.BaseFDs, s.FDs), max(g.BaseGoros, s.Goros)
		}
	}
	within := func(base, later, margin int64) bool {
		return float64(later) <= growthFactor*float64(base)+float64(margin)
	}
	var out []Growth
	for _, n := range order {
		g := byNode[n]
		if g.BaseSamples == 0 || g.LaterSamples == 0 {
			continue
		}
		g.Within = within(g.BaseRSS, g.LaterRSS, growthRSSMargin) && within(g.BaseFDs, g.LaterFDs, growthFDsMargin) &&
			within(g.BaseGoros, g.LaterGoros, growthGorosMargin)
		out = append(out, *g)
	}
	return out
}
