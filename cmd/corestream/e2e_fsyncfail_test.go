package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// faultyFS is a FUSE file system served by the test process that passes
// everything through to a directory, except that every fsync and
// fdatasync fails with EIO while failSync is set: a disk whose flushes
// fail, as the kernel reports them, under a real node process.
type faultyFS struct {
	dir      string
	failSync atomic.Bool
	syncs    atomic.Int64 // fsyncs refused
}

// faultyNode is the loopback node with the failing fsync.
type faultyNode struct {
	fs.LoopbackNode
	ffs *faultyFS
}

func (n *faultyNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if n.ffs.failSync.Load() {
		n.ffs.syncs.Add(1)
		return syscall.EIO
	}
	if s, ok := f.(fs.FileFsyncer); ok {
		return s.Fsync(ctx, flags)
	}
	return 0
}

// mountFaultyFS mounts a faultyFS at a new directory, unmounted when the
// test ends (after its servers are killed). It needs root and /dev/fuse.
func mountFaultyFS(t *testing.T) *faultyFS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a FUSE file system needs root (the CI runs as root)")
	}
	base := t.TempDir()
	under, mnt := filepath.Join(base, "under"), filepath.Join(base, "mnt")
	for _, d := range []string{under, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ffs := &faultyFS{dir: mnt}
	root, err := fs.NewLoopbackRoot(under)
	if err != nil {
		t.Fatal(err)
	}
	lr := root.(*fs.LoopbackNode)
	lr.RootData.NewNode = func(rd *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &faultyNode{LoopbackNode: fs.LoopbackNode{RootData: rd}, ffs: ffs}
	}
	srv, err := fs.Mount(mnt, lr, &fs.Options{MountOptions: fuse.MountOptions{DirectMount: true, FsName: "corestream-faulty"}})
	if err != nil {
		t.Skipf("mounting a FUSE file system: %v (needs /dev/fuse)", err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
		}
	})
	return ffs
}

// A node whose disk starts failing its flushes (every fsync EIO, as a
// dying disk or a lost network volume reports them) while it leads a
// third of the partitions, under fsync = always on three nodes: its
// replicas stop acknowledging, the other two elect new primaries and
// writes go on; nothing the cluster acknowledged is lost; the node
// restarted on a working disk recovers from what it had synced, catches
// up, and every record is read back once, in order.
func TestE2EFsyncFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster on a failing disk")
	}
	ffs := mountFaultyFS(t)
	c := startCluster(t, clusterOpts{nodes: 3, shards: 1, fsync: "always", mutate: func(p *launch.Plan) {
		n := &p.Nodes[0]
		dir := filepath.Join(ffs.dir, "node-1")
		n.DataDir, n.Config, n.Log = dir, filepath.Join(dir, launch.ConfigFile), filepath.Join(dir, launch.LogFile)
	}})
	cl := c.dial(client.Config{})
	const topic, parts = "fsync", 3
	createTopic(t, cl, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 3})
	waitUntil(t, clusterWaitTimeout, "node 1 leading a partition", func() (bool, string) {
		led := ledBy(topicRoutes(t, cl, topic), 1)
		return len(led) > 0, "node 1 leads none"
	})
	lp := startLoad(t, cl, topic, parts)
	waitUntil(t, clusterWaitTimeout, "writes acknowledged", func() (bool, string) { return lp.count() >= 2000, "" })

	ffs.failSync.Store(true)
	at := lp.count()
	waitUntil(t, clusterWaitTimeout, "node 1 leading nothing and writes going on", func() (bool, string) {
		led := ledBy(topicRoutes(t, cl, topic), 1)
		n := lp.count()
		return len(led) == 0 && n >= at+3000, fmt.Sprintf("node 1 leads partitions %v; %d acknowledged since the disk failed", led, n-at)
	})
	if ffs.syncs.Load() == 0 {
		t.Fatal("no fsync reached the failing disk")
	}
	if err := c.exited(); err != nil {
		t.Fatalf("a node exited on the failing disk: %v", err)
	}
	// The node says why, naming its data directory.
	waitUntil(t, clusterWaitTimeout, "node 1 reporting its failing disk", func() (bool, string) {
		return strings.Contains(c.node(1).stderr.String(), "the data directory's disk failed a write or a flush"), "no such line in its log yet"
	})

	// A working disk again, and a restart: the node recovers from what it
	// synced and catches up.
	c.kill(1)
	ffs.failSync.Store(false)
	c.restart(1)
	sent, acked := lp.finish(t)
	c.waitInSync(2)
	checkExactlyOnce(t, cl, topic, parts, sent, acked, 0)
	t.Logf("%d records acknowledged, %d after the disk started failing; %d fsyncs refused", sent, sent-at, ffs.syncs.Load())
}
