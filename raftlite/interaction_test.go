package raftlite_test

import (
	"path/filepath"
	"testing"

	"github.com/corestream/corestream/raftlite/rafttest"
)

// TestInteraction runs the golden scripts in testdata: each command's output
// must match the text under it. Regenerate with
// go test ./raftlite -run TestInteraction -rewrite (and review the diff).
func TestInteraction(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			env := rafttest.NewInteractionEnv()
			rafttest.RunScript(t, f, env.Handle)
		})
	}
}
