package harness

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// Replica comparison. The protocol reads a partition only from its
// primary (there are no follower reads yet), so the harness compares the
// copies offline: once the run has stopped every node gracefully, it
// opens a copy of each replica's partition directory with the segment
// package and compares the bytes of every batch below the high watermark
// the primary reported before the stop. The copy leaves the node's own
// directory as the node left it.

// replicaReadBytesMax bounds one read of a replica's log.
const replicaReadBytesMax = 4 << 20

// partitionDir is where node dataDir keeps partition p of topic id (as
// cluster/node lays it out).
func partitionDir(dataDir string, id wire.TopicID, p int32) string {
	return filepath.Join(dataDir, "partitions", fmt.Sprintf("%x-%d", [16]byte(id), p))
}

// readReplica returns the bytes of the batches of the log in dir (opened
// on a copy under scratch) with offsets [0, hw).
func readReplica(dir, scratch string, hw int64) ([]byte, error) {
	if err := copyDir(dir, scratch); err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	l, err := segment.OpenLog(vfs.OS(), scratch, segment.Config{}, nil)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if l.LogEndOffset() < hw {
		return nil, fmt.Errorf("log ends at %d, below the high watermark %d", l.LogEndOffset(), hw)
	}
	var out []byte
	for pos := l.LogStartOffset(); pos < hw; {
		spans, err := l.Read(pos, replicaReadBytesMax, hw-1)
		if err != nil {
			return nil, err
		}
		if len(spans) == 0 {
			return nil, fmt.Errorf("no batch at offset %d below the high watermark %d", pos, hw)
		}
		for _, s := range spans {
			out, err = s.AppendTo(out)
			pos = s.LastOffset + 1
			if err != nil {
				segment.ReleaseSpans(spans)
				return nil, err
			}
		}
		segment.ReleaseSpans(spans)
	}
	return out, nil
}

// firstDifference returns the base offset of the first batch where a and
// b (whole batches) differ, -1 when they are equal, or -2 when either
// holds a partial or corrupt batch or one is longer.
func firstDifference(a, b []byte) int64 {
	for len(a) > 0 && len(b) > 0 {
		ba, ra, erra := batch.Cut(a)
		bb, rb, errb := batch.Cut(b)
		if erra != nil || errb != nil || ba == nil || bb == nil {
			return -2 // a torn or corrupt batch: not comparable
		}
		if !bytes.Equal(ba, bb) {
			h, _ := batch.ReadHeader(ba)
			return h.BaseOffset
		}
		a, b = ra, rb
	}
	if len(a) != len(b) {
		return -2
	}
	return -1
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
