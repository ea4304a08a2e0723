package raftlite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHouseRules keeps the package pure: no goroutines, clocks, global
// randomness or I/O in its (non-test) source, and files that stay readable.
func TestHouseRules(t *testing.T) {
	forbidden := []struct {
		re   *regexp.Regexp
		why  string
		only string // "" for all files, else a file-name suffix
	}{
		{regexp.MustCompile(`(?m)(^|[{;])\s*go\s+[\w(]`), "starts a goroutine", ""},
		{regexp.MustCompile(`time\.(Now|Sleep|Since|After|Tick|NewTimer|NewTicker)\b`), "reads a clock", ""},
		{regexp.MustCompile(`"math/rand(/v2)?"`), "uses math/rand (a seeded generator comes in through Config)", ""},
		{regexp.MustCompile(`"(os|net|io/ioutil|syscall|sync|sync/atomic|time)"`), "imports an I/O, clock or locking package", ""},
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range forbidden {
			if loc := r.re.FindIndex(src); loc != nil {
				line := 1 + strings.Count(string(src[:loc[0]]), "\n")
				t.Errorf("%s:%d %s: %q", f, line, r.why, src[loc[0]:loc[1]])
			}
		}
	}
	all, _ := filepath.Glob("*.go")
	sub, _ := filepath.Glob("rafttest/*.go")
	for _, f := range append(all, sub...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > 800 {
			t.Errorf("%s has %d lines; split it (house style: under ~800)", f, n)
		}
	}
}
