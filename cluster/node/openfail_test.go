package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/vfs"
)

// failingFS refuses, while err is set, every creation and open under
// dir, as a read-only file system or an exhausted descriptor table does,
// and counts the refusals.
type failingFS struct {
	vfs.FS
	dir     string
	err     atomic.Pointer[syscall.Errno]
	refused atomic.Int64
}

func (f *failingFS) check(op, path string) error {
	e := f.err.Load()
	if e == nil || !strings.HasPrefix(path, f.dir) {
		return nil
	}
	f.refused.Add(1)
	return &os.PathError{Op: op, Path: path, Err: *e}
}

func (f *failingFS) Create(name string) (vfs.File, error) {
	if err := f.check("open", name); err != nil {
		return nil, err
	}
	return f.FS.Create(name)
}

func (f *failingFS) OpenReadWrite(name string) (vfs.File, error) {
	if err := f.check("open", name); err != nil {
		return nil, err
	}
	return f.FS.OpenReadWrite(name)
}

func (f *failingFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.check("mkdir", dir); err != nil {
		return err
	}
	return f.FS.MkdirAll(dir, perm)
}

// runNodeFS is runNode on file system fsys.
func runNodeFS(t *testing.T, dir string, fsys vfs.FS) *testNode {
	t.Helper()
	cfg := config.Default()
	cfg.Node.DataDir = dir
	cfg.Node.ClientAddr = "127.0.0.1:0"
	cfg.Node.HTTPAddr = ""
	cfg.Node.KafkaAddr = ""
	cfg.Shard.Count = 2
	lb := &logBuf{}
	n, err := New(cfg, slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	n.fs = fsys
	n.openErrs.window = 300 * time.Millisecond // the summary comes sooner
	tn := &testNode{Node: n, log: lb}
	if err := n.Start(); err != nil {
		n.Stop(context.Background())
		t.Fatalf("start: %v\n%s", err, lb)
	}
	t.Cleanup(func() {
		tn.stop(t)
		if t.Failed() {
			t.Logf("node log:\n%s", lb)
		}
	})
	return tn
}

// Partitions whose files cannot be created (here a read-only file
// system, through the file-system seam) make CreateTopic fail at once,
// naming the cause, instead of "created" after its whole timeout; they
// are retried with a growing back-off, logged once each, answer
// STORAGE_ERROR with the cause, and open by themselves once the cause is
// gone.
func TestPartitionsThatCannotOpen(t *testing.T) {
	dir := t.TempDir()
	fsys := &failingFS{FS: vfs.OS(), dir: filepath.Join(dir, "partitions")}
	n := runNodeFS(t, dir, fsys)
	rc := dialHandshaken(t, n.ClientAddr())
	rofs := syscall.EROFS
	fsys.err.Store(&rofs)

	// More partitions than one reconcile pass opens (reconcileBatch): the
	// storm came from passes that queued the next one at once.
	const parts, timeout = 3 * reconcileBatch / 2, 20 * time.Second
	start := time.Now()
	var resp wire.CreateTopicResponse
	err := rc.call(&wire.CreateTopicRequest{Name: "ro", Partitions: parts, ReplicationFactor: 1, TimeoutMs: uint32(timeout / time.Millisecond)}, &resp)
	took := time.Since(start)
	if err == nil || wire.IsRetriable(err) || !strings.Contains(err.Error(), "read-only file system") ||
		!strings.Contains(err.Error(), fmt.Sprintf("%d of its %d partitions cannot be opened", parts, parts)) {
		t.Fatalf("create on a read-only data directory: %v (%+v), want a final error naming the cause", err, resp)
	}
	if took > timeout/2 {
		t.Fatalf("the create failed only after %v (timeout %v)", took, timeout)
	}
	t.Logf("create failed after %v: %v", took, err)

	// The partitions are retried with a back-off doubling from 100 ms:
	// within the time elapsed each is tried at most 2+log2(elapsed/100ms)
	// times. (Every reconcile pass used to retry them: thousands.)
	waitFor(t, 20*time.Second, "every partition retried", func() bool { return fsys.refused.Load() >= 2*parts })
	elapsed := time.Since(start)
	tries := fsys.refused.Load()
	bound := int64(parts * (2 + math.Ceil(math.Log2(float64(elapsed)/float64(openBackoffMin)+1))))
	if tries > bound {
		t.Fatalf("%d open attempts in %v for %d partitions, want at most %d", tries, elapsed, parts, bound)
	}
	// One ERROR line each, openErrorLogsMax at most per window, and one
	// summary for the rest once the window has passed.
	if lines := n.log.lines("level=ERROR", `msg="opening a partition"`); len(lines) != openErrorLogsMax {
		t.Fatalf("%d ERROR lines for %d partitions that failed %d times, want %d:\n%s", len(lines), parts, tries, openErrorLogsMax, strings.Join(lines, "\n"))
	}
	waitFor(t, 20*time.Second, "the summary of the failures not logged", func() bool {
		return len(n.log.lines("level=ERROR", "more partitions could not be opened", fmt.Sprintf("partitions=%d ", parts-openErrorLogsMax))) == 1
	})
	if got := n.OpenFailures(); len(got) != parts || !strings.Contains(got[0].Cause, "read-only") {
		t.Fatalf("open failures: %+v", got)
	}

	// Requests get the cause, and the metadata says STORAGE_ERROR.
	ref := wire.PartitionRef{Topic: "ro", Partition: 1, Generation: wire.GenerationUnknown}
	if _, err := rc.produce(ref, "x"); !errors.Is(err, wire.ErrStorageError) || !strings.Contains(err.Error(), "read-only file system") {
		t.Fatalf("produce to a partition that cannot open: %v", err)
	}
	var md wire.MetadataResponse
	if err := rc.call(&wire.MetadataRequest{Topics: []string{"ro"}}, &md); err != nil || md.Topics[0].Partitions[1].ErrorCode != wire.ErrStorageError.Code {
		t.Fatalf("metadata: %+v %v", md.Topics, err)
	}

	// The cause goes away: they open at their next retry.
	fsys.err.Store(nil)
	waitFor(t, 60*time.Second, "every partition to open", func() bool { return len(n.OpenFailures()) == 0 })
	waitFor(t, 30*time.Second, "a produce to succeed", func() bool {
		_, err := rc.produce(ref, "y")
		return err == nil
	})
	if len(n.log.lines(`msg="partition opened after failing to"`)) == 0 {
		t.Fatal("no log line says the partitions opened after failing")
	}
}
