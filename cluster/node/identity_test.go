package node

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

// A node started on another node's stopped data directory is refused
// before it touches it, naming whose directory it is; the owner starts on
// it again afterwards.
func TestDataDirOfAnotherNodeIsRefused(t *testing.T) {
	tc := startCluster(t, 3, nil)
	tc.waitLoaded()
	tc.stopNode(1)
	tc.stopNode(2)

	cfg := tc.cfgs[1]
	cfg.Node.DataDir = tc.cfgs[2].Node.DataDir
	n, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = n.Start()
	n.Stop(context.Background())
	if !errors.Is(err, ErrWrongDataDir) || !strings.Contains(err.Error(), "belongs to node 3") || !strings.Contains(err.Error(), "this is node 2") {
		t.Fatalf("node 2 on node 3's directory: %v, want ErrWrongDataDir naming both", err)
	}
	if id, err := readIdentity(vfs.OS(), tc.cfgs[2].Node.DataDir); err != nil || id != 3 {
		t.Fatalf("the directory now records node %d (%v), want 3", id, err)
	}
	tc.startNode(2)
	tc.startNode(1)
	tc.waitLoaded()
}

// The record is refused when it is damaged or of an unknown version, and
// a directory without one (new, or written before identities) takes the
// node's id.
func TestIdentityRecord(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkIdentity(fs, "/d", 2); err != nil {
		t.Fatalf("a directory without a record: %v", err)
	}
	if err := recordIdentity(fs, "/d", 2); err != nil {
		t.Fatal(err)
	}
	if err := recordIdentity(fs, "/d", 2); err != nil {
		t.Fatalf("recording the same id again: %v", err)
	}
	if err := recordIdentity(fs, "/d", 5); !errors.Is(err, ErrWrongDataDir) {
		t.Fatalf("recording over another node's id: %v", err)
	}
	if id, _ := readIdentity(fs, "/d"); id != 2 {
		t.Fatalf("the record was overwritten: %d", id)
	}
}
