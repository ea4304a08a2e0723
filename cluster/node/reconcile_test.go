package node

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

// removeTree removes a deleted partition's directory through the node's
// FS (it was os.RemoveAll, which an in-memory FS never saw), and a
// missing directory is no error.
func TestRemoveTree(t *testing.T) {
	m := vfs.NewMem()
	dir := "/data/partitions/abc-0.deleted"
	if err := m.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00000000000000000000.log", "00000000000000000000.index", "sub/x"} {
		f, err := m.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := removeTree(m, dir); err != nil {
		t.Fatalf("removeTree: %v", err)
	}
	if _, err := m.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after removeTree, Stat(%s) = %v", dir, err)
	}
	if names, err := m.List("/data/partitions"); err != nil || len(names) != 0 {
		t.Fatalf("the partitions directory holds %v (%v)", names, err)
	}
	if err := removeTree(m, dir); err != nil {
		t.Fatalf("removeTree of a missing directory: %v", err)
	}
}
