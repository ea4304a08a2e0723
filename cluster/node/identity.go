package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/segment/vfs"
)

// A data directory records, at the node's first start, the id of the node
// it belongs to, and once the node learns it, the id of its cluster
// (minted by the first metadata primary: metadata.OpSetClusterID). A node
// refuses to start on a directory recorded for another node: the
// consensus state and the logs in it are that node's, and a node that
// took them over (node 2 started on node 3's stopped directory) voted and
// answered as node 3 under node 2's name. It refuses to start on a
// directory whose metadata names another cluster than the directory
// records, and the replication handshake refuses a peer whose directory
// records another cluster (peerauth.Compatible), both sides logging both
// ids: a node started on another cluster's directory cannot join.

// ErrWrongDataDir is returned by Start when node.data_dir belongs to
// another node or another cluster.
var ErrWrongDataDir = errors.New("node: data directory of another node")

var identityKind = checkpoint.Kind{'N', 'O', 'D', 'E'}

// identityFile is the identity record's name in the data directory.
const identityFile = "node-identity.checkpoint"

// identityVersion is the payload's version: a uint32 node id, then (from
// version 2) the 16-byte cluster id, zero until learned. Version 3 has
// version 2's payload and is the data format version: the logs in the
// directory give records dense user offsets (docs/design/offsets.md). A
// directory of version 1 or 2 is migrated at start by recording version
// 3: its logs need no rewrite (their consensus batches keep the one offset
// each they took, and every offset consumers committed keeps its
// meaning). An older build refuses a version 3 directory, as it refuses
// every version it does not know, instead of misreading its logs.
const identityVersion = 3

// identity is what a data directory records.
type identity struct {
	node    int32 // 0: none recorded
	cluster metadata.ClusterID
	// version is the record's version (0: none recorded).
	version uint16
}

// readIdentity returns the identity recorded in dir, zero when none is
// recorded (a new directory, or one written before identities existed).
func readIdentity(fsys vfs.FS, dir string) (identity, error) {
	v, payload, err := checkpoint.Read(fsys, filepath.Join(dir, identityFile), identityKind)
	var id identity
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return id, nil
	case err != nil:
		return id, fmt.Errorf("node: %s: %w", identityFile, err)
	case v == 1 && len(payload) == 4:
	case (v == 2 || v == 3) && len(payload) == 20:
		copy(id.cluster[:], payload[4:])
	default:
		return id, fmt.Errorf("node: %s: version %d with %d bytes; this build reads versions 1 to %d (a directory written by a newer corestream: run that release on it)", identityFile, v, len(payload), identityVersion)
	}
	id.version = v
	id.node = int32(binary.BigEndian.Uint32(payload))
	if id.node <= 0 {
		return identity{}, fmt.Errorf("node: %s records node id %d", identityFile, id.node)
	}
	return id, nil
}

func writeIdentity(fsys vfs.FS, dir string, id identity) error {
	var b [20]byte
	binary.BigEndian.PutUint32(b[:], uint32(id.node))
	copy(b[4:], id.cluster[:])
	if err := checkpoint.Write(fsys, filepath.Join(dir, identityFile), identityKind, identityVersion, b[:]); err != nil {
		return fmt.Errorf("node: recording the identity in %s: %w", dir, err)
	}
	return nil
}

// checkIdentity refuses a data directory recorded for a node other than
// self. It only reads.
func checkIdentity(fsys vfs.FS, dir string, self int32) error {
	id, err := readIdentity(fsys, dir)
	if err != nil {
		return err
	}
	return wrongNode(dir, id.node, self)
}

// wrongNode is ErrWrongDataDir when id (0: none) is another node's.
func wrongNode(dir string, id, self int32) error {
	if id == 0 || id == self {
		return nil
	}
	return fmt.Errorf("%w: node.data_dir %s belongs to node %d (recorded in %s at its first start), and this is node %d: start node %d on it, or give node %d a directory of its own",
		ErrWrongDataDir, dir, id, identityFile, self, id, self)
}

// wrongCluster is ErrWrongDataDir when the directory records a cluster
// (zero: none yet) other than the one the metadata names.
func wrongCluster(dir string, recorded, named metadata.ClusterID) error {
	if recorded.IsZero() || named.IsZero() || recorded == named {
		return nil
	}
	return fmt.Errorf("%w: node.data_dir %s records cluster %s (in %s), but the metadata in it names cluster %s: the directory was copied from or mixed with another cluster's; give the node an empty directory to join as a new replica",
		ErrWrongDataDir, dir, recorded, identityFile, named)
}

// recordIdentity writes self into dir unless it is recorded already, and
// refuses a directory recorded for another node (checked again here, under
// the directory's lock). It returns the cluster id recorded (zero: none
// yet).
// REQUIRES: the directory is locked.
func recordIdentity(fsys vfs.FS, dir string, self int32) (metadata.ClusterID, error) {
	id, err := readIdentity(fsys, dir)
	if err != nil {
		return metadata.ClusterID{}, err
	}
	if id.node == self {
		if id.version < identityVersion {
			// The data format's migration: nothing in the logs to
			// rewrite (see identityVersion).
			return id.cluster, writeIdentity(fsys, dir, id)
		}
		return id.cluster, nil
	}
	if err := wrongNode(dir, id.node, self); err != nil {
		return metadata.ClusterID{}, err
	}
	return metadata.ClusterID{}, writeIdentity(fsys, dir, identity{node: self})
}

// recordCluster writes cluster beside self's id in dir, unless it is
// recorded already; a directory that records another cluster is refused.
// REQUIRES: the directory is locked and records self.
func recordCluster(fsys vfs.FS, dir string, self int32, cluster metadata.ClusterID) error {
	id, err := readIdentity(fsys, dir)
	if err != nil {
		return err
	}
	if err := wrongNode(dir, id.node, self); err != nil {
		return err
	}
	if id.cluster == cluster {
		return nil
	}
	if err := wrongCluster(dir, id.cluster, cluster); err != nil {
		return err
	}
	return writeIdentity(fsys, dir, identity{node: self, cluster: cluster})
}

// clusterRecorded is the cluster id this node's directory records (zero:
// none yet). Any goroutine.
func (n *Node) clusterRecorded() metadata.ClusterID {
	if p := n.cluster.Load(); p != nil {
		return *p
	}
	return metadata.ClusterID{}
}

// learnCluster records the cluster id the metadata names, the first time
// it is seen; a directory recording another one is logged once (the start
// refused it already when its snapshot named the other id: see
// checkSnapshotCluster). Runs on shard metaShard.
func (n *Node) learnCluster(id metadata.ClusterID) {
	cur := n.clusterRecorded()
	if id.IsZero() || id == cur {
		return
	}
	if err := recordCluster(n.fs, n.dir, int32(n.self), id); err != nil {
		if !n.clusterWarned {
			n.clusterWarned = true
			n.log.Error("cluster id not recorded", "err", err)
		}
		return
	}
	n.cluster.Store(&id)
	n.log.Info("cluster id recorded in the data directory", "cluster_id", id.String(), "file", identityFile)
}

// checkSnapshotCluster refuses a start whose metadata snapshot names
// another cluster than the directory records.
func (n *Node) checkSnapshotCluster(named metadata.ClusterID) error {
	return wrongCluster(n.dir, n.clusterRecorded(), named)
}

// clusterName is the cluster's name in handshakes and Kafka metadata: its
// id once known, before that its roster's size.
func (n *Node) clusterName() string {
	if id := n.clusterRecorded(); !id.IsZero() {
		return id.String()
	}
	return n.clusterID()
}

// maybeMintCluster proposes the cluster id when this node leads a
// metadata group that has none (its first start, or a cluster made before
// ids existed): the one its directory records if any (a metadata log
// started over keeps its cluster's id), else a new one. Like
// maybeBootstrap it runs after each commit until the id is applied.
func (c *controller) maybeMintCluster() {
	if c.minting || !c.State().ClusterID().IsZero() || c.r == nil || !c.r.IsPrimary() || c.d.ready() != nil || c.d.recordedCluster == nil {
		return
	}
	id := c.d.recordedCluster()
	if id.IsZero() {
		id = metadata.NewClusterID()
	}
	c.minting = true
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpSetClusterID, Cluster: id}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		c.minting = false
		if err != nil && !errors.Is(err, metadata.ErrClusterIDSet) {
			c.d.log.Warn("cluster id not committed; retrying at the next metadata commit", "err", err)
			return
		}
		if err == nil {
			c.d.log.Info("cluster id committed", "cluster_id", id.String())
		}
	})
}
