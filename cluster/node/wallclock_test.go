package node

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// wallClockAllowed are the node's source files that may still read the
// wall clock or sleep on it, each with why. Every other part reads time
// through the node's clock (cluster/clock) and arms timers on a shard,
// so that the whole-node simulator runs it on simulated time and a seed
// replays.
var wallClockAllowed = map[string]string{
	"controller.go": "a single node's start polls for its metadata replay (on the node's clock) with a sleep between looks; the simulator runs clusters",
}

// TestNoWallClock fails when a file of the node reads the wall clock
// (time.Now, Since, Until) or waits on it (Sleep, After, AfterFunc,
// timers, tickers) instead of taking the node's clock.
func TestNoWallClock(t *testing.T) {
	re := regexp.MustCompile(`\btime\.(Now|Since|Until|Sleep|After|AfterFunc|Tick|NewTimer|NewTicker)\(`)
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no source files: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || wallClockAllowed[f] != "" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, loc := range re.FindAllIndex(src, -1) {
			line := 1 + strings.Count(string(src[:loc[0]]), "\n")
			t.Errorf("%s:%d reads the wall clock (%s): take the node's clock (cluster/clock), or arm a timer on a shard", f, line, src[loc[0]:loc[1]-1])
		}
	}
	for f := range wallClockAllowed {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s is allowed the wall clock but is gone: drop it from the list", f)
		}
	}
}
