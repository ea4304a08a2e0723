package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/segment/vfs"
)

// A data directory records, at the node's first start, the id of the node
// it belongs to. A node refuses to start on a directory recorded for
// another node: the consensus state and the logs in it are that node's,
// and a node that took them over (node 2 started on node 3's stopped
// directory) voted and answered as node 3 under node 2's name.
//
// The cluster's own id is not recorded yet: there is no cluster-wide id to
// record until the metadata group mints one.

// ErrWrongDataDir is returned by Start when node.data_dir belongs to
// another node.
var ErrWrongDataDir = errors.New("node: data directory of another node")

var identityKind = checkpoint.Kind{'N', 'O', 'D', 'E'}

// identityFile is the identity record's name in the data directory.
const identityFile = "node-identity.checkpoint"

// identityVersion is the payload's version: a uint32 node id.
const identityVersion = 1

// readIdentity returns the node id recorded in dir, or 0 when none is
// recorded (a new directory, or one written before identities existed).
func readIdentity(fsys vfs.FS, dir string) (int32, error) {
	v, payload, err := checkpoint.Read(fsys, filepath.Join(dir, identityFile), identityKind)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("node: %s: %w", identityFile, err)
	case v != identityVersion || len(payload) != 4:
		return 0, fmt.Errorf("node: %s: version %d with %d bytes; this build reads version %d", identityFile, v, len(payload), identityVersion)
	}
	id := int32(binary.BigEndian.Uint32(payload))
	if id <= 0 {
		return 0, fmt.Errorf("node: %s records node id %d", identityFile, id)
	}
	return id, nil
}

// checkIdentity refuses a data directory recorded for a node other than
// self. It only reads.
func checkIdentity(fsys vfs.FS, dir string, self int32) error {
	id, err := readIdentity(fsys, dir)
	if err != nil {
		return err
	}
	return wrongNode(dir, id, self)
}

// wrongNode is ErrWrongDataDir when id (0: none) is another node's.
func wrongNode(dir string, id, self int32) error {
	if id == 0 || id == self {
		return nil
	}
	return fmt.Errorf("%w: node.data_dir %s belongs to node %d (recorded in %s at its first start), and this is node %d: start node %d on it, or give node %d a directory of its own",
		ErrWrongDataDir, dir, id, identityFile, self, id, self)
}

// recordIdentity writes self into dir unless it is recorded already, and
// refuses a directory recorded for another node (checked again here, under
// the directory's lock).
// REQUIRES: the directory is locked.
func recordIdentity(fsys vfs.FS, dir string, self int32) error {
	id, err := readIdentity(fsys, dir)
	if err != nil || id == self {
		return err
	}
	if err := wrongNode(dir, id, self); err != nil {
		return err
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(self))
	if err := checkpoint.Write(fsys, filepath.Join(dir, identityFile), identityKind, identityVersion, b[:]); err != nil {
		return fmt.Errorf("node: recording the node id in %s: %w", dir, err)
	}
	return nil
}
