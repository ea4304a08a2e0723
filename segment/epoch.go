package segment

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/corestream/corestream/segment/checkpoint"
)

// EpochEntry says that leader epoch Epoch begins at StartOffset: every
// batch from there up to the next entry's start carries it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is the leader-epoch cache (Kafka's LeaderEpochFileCache).
// Invariant: entries strictly increase in both Epoch and StartOffset.
type epochCache struct {
	entries []EpochEntry
}

// The epoch cache's checkpoint: payload version 1 is
// count uint32, then count × { epoch int32, startOffset int64 }.
var epochKind = checkpoint.Kind{'L', 'E', 'P', 'C'}

const (
	epochFile         = "leader-epoch.checkpoint"
	epochVersion      = 1
	epochEntriesMax   = 1 << 20
	epochEntryPayload = 12
)

func (c *epochCache) last() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// assign records that epoch starts at start. It reports whether the cache
// changed. REQUIRES: epoch >= c.last(); start >= the last entry's start.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if n := len(c.entries); n > 0 {
		lastE := &c.entries[n-1]
		if epoch == lastE.Epoch {
			return false
		}
		if start == lastE.StartOffset {
			// The previous epoch never held a batch: replace it.
			lastE.Epoch = epoch
			return true
		}
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: start})
	return true
}

// termAt returns the epoch of the batch holding offset.
func (c *epochCache) termAt(offset int64) (int32, bool) {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > offset })
	if i == 0 {
		return 0, false
	}
	return c.entries[i-1].Epoch, true
}

// truncateFromEnd drops entries starting at or after end.
func (c *epochCache) truncateFromEnd(end int64) bool {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset >= end })
	changed := i < len(c.entries)
	c.entries = c.entries[:i]
	return changed
}

// truncateFromStart drops entries wholly before start and moves the one
// covering start to begin there.
func (c *epochCache) truncateFromStart(start int64) bool {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > start })
	if i == 0 {
		return false
	}
	changed := i > 1 || c.entries[0].StartOffset != start
	c.entries = c.entries[i-1:]
	c.entries[0].StartOffset = start
	return changed
}

// endOffsetFor answers Kafka's OffsetsForLeaderEpoch: the largest epoch <=
// requested that the log holds, and the offset where the next higher epoch
// begins (the log end offset when requested is the latest epoch). (-1, -1)
// when requested is above every epoch known, or undefined.
func (c *epochCache) endOffsetFor(requested int32, leo int64) (int32, int64) {
	if requested < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if requested == c.last() {
		return requested, leo
	}
	hi := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].Epoch > requested })
	if hi == len(c.entries) {
		return -1, -1
	}
	if hi == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

func (c *epochCache) encode() []byte {
	b := make([]byte, 4+len(c.entries)*epochEntryPayload)
	be := binary.BigEndian
	be.PutUint32(b, uint32(len(c.entries)))
	p := 4
	for _, e := range c.entries {
		be.PutUint32(b[p:], uint32(e.Epoch))
		be.PutUint64(b[p+4:], uint64(e.StartOffset))
		p += epochEntryPayload
	}
	return b
}

func decodeEpochs(version uint16, b []byte) ([]EpochEntry, error) {
	if version != epochVersion || len(b) < 4 {
		return nil, fmt.Errorf("%w: epoch checkpoint version %d, %d bytes", ErrCorrupt, version, len(b))
	}
	be := binary.BigEndian
	n := be.Uint32(b)
	if n > epochEntriesMax || 4+int(n)*epochEntryPayload != len(b) {
		return nil, fmt.Errorf("%w: epoch checkpoint count %d in %d bytes", ErrCorrupt, n, len(b))
	}
	out := make([]EpochEntry, n)
	p := 4
	for i := range out {
		out[i] = EpochEntry{Epoch: int32(be.Uint32(b[p:])), StartOffset: int64(be.Uint64(b[p+4:]))}
		p += epochEntryPayload
		if out[i].Epoch < 0 || out[i].StartOffset < 0 ||
			(i > 0 && (out[i].Epoch <= out[i-1].Epoch || out[i].StartOffset <= out[i-1].StartOffset)) {
			return nil, fmt.Errorf("%w: epoch checkpoint entry %d out of order", ErrCorrupt, i)
		}
	}
	return out, nil
}
