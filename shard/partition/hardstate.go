package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/segment/vfs"
)

// The consensus state file of a replica. Payload version 1:
// term int32, vote uint8.
var hardStateKind = checkpoint.Kind{'R', 'A', 'F', 'T'}

const hardStateFile = "raft-state.checkpoint"

// loadHardState reads the persisted term and vote (zero when none).
func loadHardState(fsys vfs.FS, dir string) (raftlite.HardState, error) {
	v, p, err := checkpoint.Read(fsys, filepath.Join(dir, hardStateFile), hardStateKind)
	if errors.Is(err, fs.ErrNotExist) {
		return raftlite.HardState{}, nil
	}
	if err != nil {
		return raftlite.HardState{}, fmt.Errorf("partition: %s: %w", hardStateFile, err)
	}
	if v != 1 || len(p) != 5 {
		return raftlite.HardState{}, fmt.Errorf("partition: %s: version %d with %d bytes", hardStateFile, v, len(p))
	}
	return raftlite.HardState{Term: int32(binary.BigEndian.Uint32(p)), Vote: raftlite.NodeID(p[4])}, nil
}

// saveHardState writes term and vote durably (the checkpoint syncs the
// file and its directory before it returns).
func saveHardState(fsys vfs.FS, dir string, hs raftlite.HardState) error {
	var p [5]byte
	binary.BigEndian.PutUint32(p[:], uint32(hs.Term))
	p[4] = byte(hs.Vote)
	return checkpoint.Write(fsys, filepath.Join(dir, hardStateFile), hardStateKind, 1, p[:])
}
