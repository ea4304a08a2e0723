package groups

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Checkpoints keep the coordinator's log bounded (docs/design/groups.md
// "Checkpoints"). Every CheckpointRecords records or CheckpointBytes of
// keys and values written since the last one, the coordinator writes its
// whole durable state again, between two markers:
//
//	checkpoint/begin   version(1) id(u64)
//	<group and offset records: one per group record, one per offset,
//	 one per offset staged by an open transaction>
//	checkpoint/end     version(1) id(u64) count(u64)
//
// count is the number of records between the markers. Replay resets the
// state at a complete checkpoint (its begin, then count records, then
// its end with the same id) to what the checkpoint holds; the records
// after it apply on top. A checkpoint without its end (the coordinator
// died while writing it, or its write failed) is dropped at the next
// begin or load marker and changes nothing. So everything below the
// begin marker of the newest complete checkpoint may be deleted, and a
// log cut there replays to the state of the whole log.
//
// Nothing else is written between a checkpoint's markers: the
// checkpoint goes to the log at the head of the outbox while no Append
// is in flight, so every record below it was answered (and, if it was
// accepted, applied) and every record above it comes after it.

// Marker keys.
const (
	checkpointBeginKey = "checkpoint/begin"
	checkpointEndKey   = "checkpoint/end"
)

// checkpointChunkBytesMax bounds the keys and values of one Append of a
// checkpoint; a checkpoint of a bigger state goes as several, in order,
// with nothing between them.
const checkpointChunkBytesMax = appendBytesMax

// checkpointState is the coordinator's checkpoint bookkeeping.
type checkpointState struct {
	// serving says the coordinator loaded its log (Loaded) and was not
	// Reset since: only then is its state the log's, fit to write as a
	// checkpoint.
	serving bool
	// lastID is the newest checkpoint id written or replayed; the next
	// one is lastID+1.
	lastID uint64
	// sinceRecords and sinceBytes count the records (and their keys and
	// values) handed to the log, or replayed, since the newest complete
	// checkpoint's begin; checkpoints' own records do not count.
	sinceRecords, sinceBytes int64
	// shadow is the state a checkpoint being replayed builds, nil when
	// replay is not inside one; shadowID its id, shadowCount the
	// records it held so far.
	shadow       map[string]*group
	shadowStaged map[int64]map[string]map[TopicPartition]Offset
	shadowID     uint64
	shadowCount  uint64
}

// Loaded tells the coordinator that its replay is done: its state is
// now the log's, and it may write checkpoints of it. A coordinator that
// is Reset writes none again.
func (c *Coordinator) Loaded() {
	defer c.run()
	c.ckpt.serving = true
	c.ckpt.shadow, c.ckpt.shadowStaged = nil, nil
}

// countWritten adds batch's records to the counts towards the next
// checkpoint.
func (c *Coordinator) countWritten(batch []appendCall) {
	for _, a := range batch {
		if a.checkpoint {
			continue
		}
		c.ckpt.sinceRecords += int64(len(a.recs))
		c.ckpt.sinceBytes += int64(a.bytes())
	}
}

// checkpointDue says whether the records written since the last
// checkpoint reached a bound (a zero bound never triggers).
func (c *Coordinator) checkpointDue() bool {
	return c.log != nil && c.ckpt.serving &&
		(c.cfg.CheckpointRecords > 0 && c.ckpt.sinceRecords >= c.cfg.CheckpointRecords ||
			c.cfg.CheckpointBytes > 0 && c.ckpt.sinceBytes >= c.cfg.CheckpointBytes)
}

// maybeCheckpoint puts a checkpoint at the head of the outbox when one
// is due.
// REQUIRES: no Append in flight (every record handed to the
// log before was answered, and applied if accepted).
func (c *Coordinator) maybeCheckpoint() {
	if c.inflight || !c.checkpointDue() {
		return
	}
	c.ckpt.lastID++
	c.ckpt.sinceRecords, c.ckpt.sinceBytes = 0, 0
	chunks := checkpointChunks(c.ckpt.lastID, c.checkpointRecords())
	calls := make([]appendCall, 0, len(chunks)+len(c.outbox))
	for _, ch := range chunks {
		calls = append(calls, appendCall{recs: ch, done: func(error) {}, checkpoint: true})
	}
	c.outbox = append(calls, c.outbox...)
}

// checkpointRecords are the records of the coordinator's state: per
// group by name, its newest group record, then its offsets by topic and
// partition; then the offsets open transactions staged.
func (c *Coordinator) checkpointRecords() []Record {
	names := make([]string, 0, len(c.groups))
	for name := range c.groups {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []Record
	for _, name := range names {
		g := c.groups[name]
		if g.logged != nil {
			out = append(out, Record{Key: GroupKey(name), Value: g.logged})
		}
		for _, tp := range sortedPartitions(g.offsets) {
			out = append(out, Record{Key: OffsetKey(name, tp), Value: encodeOffset(g.offsets[tp])})
		}
	}
	return append(out, c.stagedRecords()...)
}

// checkpointChunks are recs between checkpoint id's markers, cut into
// Appends of at most checkpointChunkBytesMax of keys and values (a
// record above it goes alone).
func checkpointChunks(id uint64, recs []Record) [][]Record {
	all := make([]Record, 0, len(recs)+2)
	all = append(all, CheckpointBegin(id))
	all = append(all, recs...)
	all = append(all, CheckpointEnd(id, uint64(len(recs))))
	var out [][]Record
	start, size := 0, 0
	for i, r := range all {
		s := len(r.Key) + len(r.Value)
		if i > start && size+s > checkpointChunkBytesMax {
			out = append(out, all[start:i])
			start, size = i, 0
		}
		size += s
	}
	return append(out, all[start:])
}

// CheckpointBegin is the record that opens checkpoint id.
func CheckpointBegin(id uint64) Record {
	v := binary.BigEndian.AppendUint64([]byte{recordVersion}, id)
	return Record{Key: []byte(checkpointBeginKey), Value: v}
}

// CheckpointEnd is the record that closes checkpoint id, after count
// records.
func CheckpointEnd(id, count uint64) Record {
	v := binary.BigEndian.AppendUint64([]byte{recordVersion}, id)
	return Record{Key: []byte(checkpointEndKey), Value: binary.BigEndian.AppendUint64(v, count)}
}

// decodeCheckpointMarker reads a marker's id and (for an end) count.
func decodeCheckpointMarker(v []byte, end bool) (id, count uint64, err error) {
	r := &reader{b: v}
	r.version()
	id = r.u64("checkpoint id")
	if end {
		count = r.u64("checkpoint count")
	}
	return id, count, r.end()
}

// replayCheckpointMarker applies a begin or end marker (or a load
// marker, which drops a checkpoint left without its end) to replay.
func (c *Coordinator) replayCheckpointMarker(k string, v []byte) error {
	switch k {
	case loadKey:
		c.ckpt.shadow, c.ckpt.shadowStaged = nil, nil
		return nil
	case checkpointBeginKey:
		id, _, err := decodeCheckpointMarker(v, false)
		if err != nil {
			return fmt.Errorf("%w (key %q)", err, k)
		}
		c.ckpt.shadow, c.ckpt.shadowID, c.ckpt.shadowCount = map[string]*group{}, id, 0
		c.ckpt.shadowStaged = nil
		c.ckpt.lastID = max(c.ckpt.lastID, id)
		return nil
	}
	id, count, err := decodeCheckpointMarker(v, true)
	if err != nil {
		return fmt.Errorf("%w (key %q)", err, k)
	}
	if c.ckpt.shadow != nil && id == c.ckpt.shadowID && count == c.ckpt.shadowCount {
		c.groups, c.staged = c.ckpt.shadow, c.ckpt.shadowStaged
		c.ckpt.sinceRecords, c.ckpt.sinceBytes = 0, 0
	}
	c.ckpt.shadow, c.ckpt.shadowStaged = nil, nil
	return nil
}

// replayInto applies one group or offset record of replay: to the
// checkpoint being replayed, when inside one, else to the state.
func (c *Coordinator) replayInto(rec Record, apply func() error) error {
	if c.ckpt.shadow == nil {
		c.ckpt.sinceRecords++
		c.ckpt.sinceBytes += int64(len(rec.Key) + len(rec.Value))
		return apply()
	}
	live, liveStaged := c.groups, c.staged
	c.groups, c.staged = c.ckpt.shadow, c.ckpt.shadowStaged
	err := apply()
	c.ckpt.shadow, c.ckpt.shadowStaged = c.groups, c.staged
	c.groups, c.staged = live, liveStaged
	c.ckpt.shadowCount++
	return err
}

// CheckpointTracker finds, in a log read in order, the offset of the
// begin marker of the newest complete checkpoint: every record below it
// may be deleted. Each replica of a partition runs one over its own log,
// so that all of them delete the same prefix without being told.
type CheckpointTracker struct {
	// open is the begin marker being followed (openAt its offset, -1:
	// none); openCount the records seen after it.
	openID, openCount uint64
	openAt            int64
	// complete is the begin offset of the newest complete checkpoint
	// (-1: none yet).
	complete int64
}

// NewCheckpointTracker is a tracker that has seen nothing.
func NewCheckpointTracker() *CheckpointTracker {
	return &CheckpointTracker{openAt: -1, complete: -1}
}

// Observe feeds the record at offset off (records in log order; keys
// only matter, and the markers' values).
func (t *CheckpointTracker) Observe(off int64, key, value []byte) {
	switch string(key) {
	case loadKey:
		t.openAt = -1
	case checkpointBeginKey:
		id, _, err := decodeCheckpointMarker(value, false)
		t.openAt = -1
		if err == nil {
			t.openID, t.openCount, t.openAt = id, 0, off
		}
	case checkpointEndKey:
		id, count, err := decodeCheckpointMarker(value, true)
		if err == nil && t.openAt >= 0 && id == t.openID && count == t.openCount {
			t.complete = t.openAt
		}
		t.openAt = -1
	default:
		t.openCount++
	}
}

// Complete is the offset of the begin marker of the newest complete
// checkpoint seen, -1 when none.
func (t *CheckpointTracker) Complete() int64 { return t.complete }
