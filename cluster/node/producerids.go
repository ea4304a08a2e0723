package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/segment/vfs"
)

// Producer ids are unique across the cluster without asking anyone: the
// top bits are the node id (1..32), the low 48 bits a counter that this
// node persists in blocks (hi/lo allocation), so a restart skips at most
// one unused block and never reuses an id.
const (
	producerIDBlock   = 1 << 12
	producerCounterMx = 1<<48 - 1
)

var producerKind = checkpoint.Kind{'P', 'I', 'D', 'S'}

const producerFile = "producer-ids.checkpoint"

// producerIDs hands out producer ids. mu guards next and limit.
type producerIDs struct {
	mu    sync.Mutex
	fs    vfs.FS
	path  string
	node  int64
	next  int64 // next counter value to hand out
	limit int64 // first counter value not yet reserved on disk
}

func openProducerIDs(fsys vfs.FS, dir string, nodeID int32) (*producerIDs, error) {
	p := &producerIDs{fs: fsys, path: filepath.Join(dir, producerFile), node: int64(nodeID)}
	v, payload, err := checkpoint.Read(fsys, p.path, producerKind)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("node: %s: %w", producerFile, err)
	case v != 1 || len(payload) != 8:
		return nil, fmt.Errorf("node: %s: version %d with %d bytes", producerFile, v, len(payload))
	default:
		p.next = int64(binary.BigEndian.Uint64(payload))
		p.limit = p.next
	}
	return p, nil
}

// allocate returns a fresh producer id.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.limit {
		limit := p.next + producerIDBlock
		if limit > producerCounterMx {
			return 0, errors.New("node: producer ids of this node are exhausted")
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(limit))
		if err := checkpoint.Write(p.fs, p.path, producerKind, 1, b[:]); err != nil {
			return 0, fmt.Errorf("node: reserving producer ids: %w", err)
		}
		p.limit = limit
	}
	id := p.node<<48 | p.next
	p.next++
	return id, nil
}
