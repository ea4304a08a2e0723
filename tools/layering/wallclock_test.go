package layering

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// simulatedTime are the folders (each with every package under it) whose
// code reads time only through a clock it is given (cluster/clock) and
// arms timers on a shard, so that the simulators run it on simulated
// time and a seed replays.
var simulatedTime = []string{"cluster/node", "cluster/controller", "cluster/transport"}

// wallClockAllowed are the files among them that may still read the wall
// clock or sleep on it, each with why.
var wallClockAllowed = map[string]string{
	"cluster/node/controller.go": "a single node's start polls for its metadata replay (on the node's clock) with a sleep between looks; the simulator runs clusters",
}

// TestNoWallClock fails when a non-test file under simulatedTime reads
// the wall clock (time.Now, Since, Until) or waits on it (Sleep, After,
// AfterFunc, timers, tickers).
func TestNoWallClock(t *testing.T) {
	root := moduleRoot(t)
	re := regexp.MustCompile(`\btime\.(Now|Since|Until|Sleep|After|AfterFunc|Tick|NewTimer|NewTicker)\(`)
	for _, dir := range simulatedTime {
		seen := 0
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			seen++
			if wallClockAllowed[rel] != "" {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, loc := range re.FindAllIndex(src, -1) {
				line := 1 + strings.Count(string(src[:loc[0]]), "\n")
				t.Errorf("%s:%d reads the wall clock (%s): take the clock the part is given (cluster/clock), or arm a timer on a shard",
					rel, line, src[loc[0]:loc[1]-1])
			}
			return nil
		})
		if err != nil || seen == 0 {
			t.Fatalf("%s: no source files read (%v)", dir, err)
		}
	}
	for f := range wallClockAllowed {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s is allowed the wall clock but is gone: drop it from the list", f)
		}
	}
}
