package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/segment/vfs"
)

// A node whose metadata replica is fenced (its group lost entries it
// knew committed: storage.fsync other than always, then a power loss on a
// majority) does not start, and its error names the two paths to remove;
// removed, the node starts again with an empty metadata replica that
// copies the cluster's metadata from its peers.
func TestClusterFencedMetadataReplica(t *testing.T) {
	old := metaSnapshotEvery
	metaSnapshotEvery = 3 // node 3 holds a snapshot too, which the fence may have made wrong
	t.Cleanup(func() { metaSnapshotEvery = old })
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 60*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "kept", Partitions: 1, ReplicationFactor: 3})
	createTopic(t, ctx, cl, client.TopicSpec{Name: "also", Partitions: 1, ReplicationFactor: 3})
	dir := tc.cfgs[2].Node.DataDir
	metaDir, snap := filepath.Join(dir, metadata.MetaTopic), filepath.Join(dir, metaSnapshotFile)
	clusterWait(t, 30*time.Second, "node 3 to write a metadata snapshot", func() bool {
		_, err := os.Stat(snap)
		return err == nil
	})
	tc.stopNode(2)
	// The fence record a fenced replica writes (shard/partition, fence.go).
	if err := checkpoint.Write(vfs.OS(), filepath.Join(metaDir, "fenced.checkpoint"), checkpoint.Kind{'F', 'E', 'N', 'C'}, 1,
		[]byte("partition __meta/0 on node 3: its group lost entries this replica knows committed")); err != nil {
		t.Fatal(err)
	}

	n, err := New(tc.cfgs[2], nil)
	if err != nil {
		t.Fatal(err)
	}
	err = n.Start()
	n.Stop(context.Background())
	if err == nil {
		t.Fatal("a node whose metadata replica is fenced started")
	}
	for _, want := range []string{"metadata replica is fenced", "remove (or move away) " + metaDir + " and " + snap, "start the node again",
		"its group lost entries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the start error lacks %q: %v", want, err)
		}
	}

	// Do what it says.
	for _, p := range []string{metaDir, snap} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	tc.startNode(2)
	n3 := tc.nodes[2]
	clusterWait(t, 60*time.Second, "node 3 to copy the metadata from its peers", func() bool {
		v := n3.view.Load()
		return n3.metaLoaded.Load() && v != nil && v.Topics["kept"] != nil && v.Topics["also"] != nil
	})
}
