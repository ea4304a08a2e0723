package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/segment/checkpoint"
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
	if id, err := readIdentity(vfs.OS(), tc.cfgs[2].Node.DataDir); err != nil || id.node != 3 {
		t.Fatalf("the directory now records node %d (%v), want 3", id.node, err)
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
	if _, err := recordIdentity(fs, "/d", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := recordIdentity(fs, "/d", 2); err != nil {
		t.Fatalf("recording the same id again: %v", err)
	}
	if _, err := recordIdentity(fs, "/d", 5); !errors.Is(err, ErrWrongDataDir) {
		t.Fatalf("recording over another node's id: %v", err)
	}
	if id, _ := readIdentity(fs, "/d"); id.node != 2 {
		t.Fatalf("the record was overwritten: %d", id.node)
	}
	// The cluster id is recorded once, beside the node id, and survives
	// a restart's recordIdentity; another cluster's is refused, naming
	// both.
	a, b := metadata.NewClusterID(), metadata.NewClusterID()
	if err := recordCluster(fs, "/d", 2, a); err != nil {
		t.Fatal(err)
	}
	if got, err := recordIdentity(fs, "/d", 2); err != nil || got != a {
		t.Fatalf("restart reads cluster %s (%v), want %s", got, err, a)
	}
	if err := recordCluster(fs, "/d", 2, a); err != nil {
		t.Fatalf("the same cluster again: %v", err)
	}
	err := recordCluster(fs, "/d", 2, b)
	if !errors.Is(err, ErrWrongDataDir) || !strings.Contains(err.Error(), "records cluster "+a.String()) || !strings.Contains(err.Error(), "names cluster "+b.String()) {
		t.Fatalf("another cluster: %v", err)
	}
	if id, _ := readIdentity(fs, "/d"); id.cluster != a || id.node != 2 {
		t.Fatalf("the record changed: %+v", id)
	}
	// A version 1 record (the node id alone) is still read.
	if err := checkpoint.Write(fs, "/d/"+identityFile, identityKind, 1, []byte{0, 0, 0, 4}); err != nil {
		t.Fatal(err)
	}
	if id, err := readIdentity(fs, "/d"); err != nil || id.node != 4 || !id.cluster.IsZero() {
		t.Fatalf("version 1 record: %+v %v", id, err)
	}
	// A version 2 record is a directory from before dense offsets: the
	// start migrates it by recording the data format's version.
	var v2 [20]byte
	v2[3] = 4
	copy(v2[4:], a[:])
	if err := checkpoint.Write(fs, "/d/"+identityFile, identityKind, 2, v2[:]); err != nil {
		t.Fatal(err)
	}
	if got, err := recordIdentity(fs, "/d", 4); err != nil || got != a {
		t.Fatalf("a version 2 directory: cluster %s, %v", got, err)
	}
	if v, _, err := checkpoint.Read(fs, "/d/"+identityFile, identityKind); err != nil || v != identityVersion {
		t.Fatalf("after the start the record is version %d (%v), want %d", v, err, identityVersion)
	}
	// A newer build's record is refused, not misread.
	if err := checkpoint.Write(fs, "/d/"+identityFile, identityKind, identityVersion+1, v2[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := readIdentity(fs, "/d"); err == nil || !strings.Contains(err.Error(), "newer corestream") {
		t.Fatalf("a newer record: %v", err)
	}
}

// Every node of a cluster records the id its first metadata primary
// minted and names the cluster by it; a node started with another
// cluster's data directory (its own node id, another cluster's id)
// refuses the peers of the cluster its configuration names, each side
// logging both ids, and never takes that cluster's metadata.
func TestClusterIDRecordedAndChecked(t *testing.T) {
	a := startCluster(t, 3, nil)
	b := startCluster(t, 3, nil)
	idOf := func(tc *testCluster) metadata.ClusterID {
		t.Helper()
		var id metadata.ClusterID
		clusterWait(t, 30*time.Second, "every node to record the cluster id", func() bool {
			id = tc.nodes[0].clusterRecorded()
			for i, n := range tc.nodes {
				rec, err := readIdentity(vfs.OS(), tc.cfgs[i].Node.DataDir)
				if err != nil || id.IsZero() || n.clusterRecorded() != id || rec.cluster != id {
					return false
				}
			}
			return true
		})
		return id
	}
	ida, idb := idOf(a), idOf(b)
	if ida == idb {
		t.Fatalf("two clusters share id %s", ida)
	}
	if got := a.nodes[1].svc.Identity().ClusterID; got != ida.String() {
		t.Fatalf("node 2 names its cluster %q, want %s", got, ida)
	}
	if v := a.nodes[2].view.Load(); v.ClusterID != ida {
		t.Fatalf("node 3's metadata names cluster %s, want %s", v.ClusterID, ida)
	}

	// Node 3 of cluster b, started on node 3 of cluster a's directory.
	a.stopNode(2)
	b.stopNode(2)
	cfg := b.cfgs[2]
	cfg.Node.DataDir = a.cfgs[2].Node.DataDir
	lb := &logBuf{}
	n, err := New(cfg, slog.New(slog.NewTextHandler(lb, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		// The directory's snapshot may name cluster a already: refused
		// at the start instead.
		if !errors.Is(err, ErrWrongDataDir) {
			t.Fatal(err)
		}
		t.Logf("refused at the start: %v", err)
		return
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	// The directory's committed roster (roster.checkpoint) names cluster
	// a's nodes, and the committed roster wins over cluster.nodes
	// (docs/design/membership.md): the intruder dials cluster a, whose
	// id its directory records. Cluster b's nodes, whose roster names
	// node 3 at the intruder's addresses, dial it and are refused, each
	// side naming both clusters.
	refusedIn := "belongs to cluster " + ida.String() + ", node 1's to cluster " + idb.String()
	clusterWait(t, 30*time.Second, "the intruder to refuse cluster b's nodes, naming both clusters", func() bool {
		return len(lb.lines("replication handshake refused", refusedIn)) > 0
	})
	if n.clusterRecorded() != ida {
		t.Fatalf("the intruder changed its record to %s", n.clusterRecorded())
	}
	if v := n.view.Load(); v != nil && !v.ClusterID.IsZero() && v.ClusterID != ida {
		t.Fatalf("the intruder loaded cluster %s's metadata, its directory is cluster %s's", v.ClusterID, ida)
	}
	for i := 0; i < 2; i++ {
		if v := b.nodes[i].view.Load(); v.ClusterID != idb {
			t.Fatalf("cluster b's node %d names cluster %s", i+1, v.ClusterID)
		}
	}
}
