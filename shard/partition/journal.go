package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/vfs"
)

// The hard-state journal. Every replica of a shard records its consensus
// term and vote in one append-only file per shard, and one fdatasync at the
// end of a round makes every change of the round durable before any of
// those replicas sends the messages that depend on it (Ready's step 1).
// A per-replica file cost a write, two fsyncs and a rename per vote: a
// 2,000-partition topic created on three nodes spent most of its CPU there,
// blocking heartbeats until peers were declared down and elections fed on
// themselves.
//
// File layout (big-endian; never changes):
//
//	header  magic "CSHJ" (4), version u16 (1), reserved u16
//	record  group u64, term i32, vote u8, reserved [3], crc32c u32 of the 16 bytes before it
//
// A torn or corrupt record ends the file (what follows was not synced).
// Loading reads every shard's journal (a replica may have moved shard when
// the shard count changed) and keeps, per group, the highest term — and in
// a term, the vote — which is what a crash-consistent reader of several
// monotonic histories may do: terms never go back and a vote, once cast,
// never changes within its term.

const (
	journalMagic       = "CSHJ"
	journalVersion     = 1
	journalHeaderBytes = 8
	journalRecordBytes = 20
)

// journalCompactBytes rewrites the journal with only the live groups'
// latest states once it grows past this size (a variable: tests lower it).
var journalCompactBytes int64 = 4 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// JournalName is shard i's journal file name.
func JournalName(shard int) string { return fmt.Sprintf("hardstate-%03d.journal", shard) }

func appendRecord(dst []byte, g raftlite.GroupID, hs raftlite.HardState) []byte {
	at := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(g))
	dst = binary.BigEndian.AppendUint32(dst, uint32(hs.Term))
	dst = append(dst, byte(hs.Vote), 0, 0, 0)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[at:], crcTable))
}

// newer reports whether a should replace b as a group's hard state.
func newer(a, b raftlite.HardState) bool {
	return a.Term > b.Term || a.Term == b.Term && b.Vote == raftlite.None && a.Vote != raftlite.None
}

// readJournal adds the records of one journal file to states; it returns
// the byte length of the valid prefix.
func readJournal(fsys vfs.FS, path string, states map[raftlite.GroupID]raftlite.HardState) (int64, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return 0, err
	}
	if len(b) < journalHeaderBytes || string(b[:4]) != journalMagic || binary.BigEndian.Uint16(b[4:]) != journalVersion {
		return 0, fmt.Errorf("partition: %s is not a version %d hard-state journal", path, journalVersion)
	}
	off := int64(journalHeaderBytes)
	for ; off+journalRecordBytes <= size; off += journalRecordBytes {
		r := b[off : off+journalRecordBytes]
		if crc32.Checksum(r[:16], crcTable) != binary.BigEndian.Uint32(r[16:]) {
			break
		}
		g := raftlite.GroupID(binary.BigEndian.Uint64(r))
		hs := raftlite.HardState{Term: int32(binary.BigEndian.Uint32(r[8:])), Vote: raftlite.NodeID(r[12])}
		if newer(hs, states[g]) {
			states[g] = hs
		}
	}
	return off, nil
}

// LoadHardStates reads every shard journal in dir.
func LoadHardStates(fsys vfs.FS, dir string) (map[raftlite.GroupID]raftlite.HardState, error) {
	states := map[raftlite.GroupID]raftlite.HardState{}
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return states, nil
	}
	if err != nil {
		return nil, fmt.Errorf("partition: listing %s: %w", dir, err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "hardstate-") && strings.HasSuffix(n, ".journal") {
			if _, err := readJournal(fsys, filepath.Join(dir, n), states); err != nil {
				return nil, err
			}
		}
	}
	return states, nil
}

// journal is one shard's hard-state journal; owned by the shard.
type journal struct {
	fs   vfs.FS
	dir  string
	path string
	f    vfs.File
	size int64
	// live is the latest state written here for each group.
	live map[raftlite.GroupID]raftlite.HardState
	buf  []byte
	// held are the replicas waiting for this round's sync to finish their
	// Ready.
	held []*Replica
	err  error
}

// openJournal opens (or creates) shard's journal in dir, cutting a torn
// tail.
func openJournal(fsys vfs.FS, dir string, shard int) (*journal, error) {
	j := &journal{fs: fsys, dir: dir, path: filepath.Join(dir, JournalName(shard)), live: map[raftlite.GroupID]raftlite.HardState{}}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	valid, err := readJournal(fsys, j.path, j.live)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := j.create(); err != nil {
			return nil, err
		}
		return j, nil
	case err != nil:
		return nil, err
	}
	if j.f, err = fsys.OpenReadWrite(j.path); err != nil {
		return nil, err
	}
	if err := j.f.Truncate(valid); err != nil {
		return nil, err
	}
	j.size = valid
	return j, nil
}

// create writes a new journal holding live's states, atomically.
func (j *journal) create() error {
	b := append([]byte(journalMagic), 0, journalVersion, 0, 0)
	groups := make([]raftlite.GroupID, 0, len(j.live))
	for g := range j.live {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(a, b int) bool { return groups[a] < groups[b] })
	for _, g := range groups {
		b = appendRecord(b, g, j.live[g])
	}
	tmp := j.path + ".tmp"
	f, err := j.fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.WriteAt(b, 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = j.fs.Rename(tmp, j.path)
	}
	if err == nil {
		err = j.fs.SyncDir(j.dir)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("partition: writing %s: %w", j.path, err)
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.size = f, int64(len(b))
	return nil
}

// put queues g's new state for this round's sync.
func (j *journal) put(g raftlite.GroupID, hs raftlite.HardState) {
	j.buf = appendRecord(j.buf, g, hs)
	j.live[g] = hs
}

// sync writes the queued records with one fdatasync and resumes the
// replicas that waited for it. On failure they restart (ErrStorage):
// nothing that depends on the lost state was sent.
func (j *journal) sync(open func(raftlite.GroupID) bool) {
	held := j.held
	j.held = nil
	var err error
	switch {
	case j.err != nil:
		// After a failed write or fsync the file's contents are unknown
		// (and a retried fsync may report success for lost pages): write
		// a new file from live, which holds every state put so far.
		err = j.create()
	case len(j.buf) > 0:
		if _, err = j.f.WriteAt(j.buf, j.size); err == nil {
			err = j.f.Sync()
		}
		if err == nil {
			j.size += int64(len(j.buf))
		}
	}
	j.buf = j.buf[:0]
	j.err = nil
	if err != nil {
		j.err = fmt.Errorf("partition: hard-state journal %s: %w", j.path, err)
	}
	for _, r := range held {
		r.resume(j.err)
	}
	if j.err == nil && j.size > journalCompactBytes {
		for g := range j.live {
			if !open(g) {
				delete(j.live, g)
			}
		}
		if err := j.create(); err != nil {
			j.err = err
		}
	}
}

func (j *journal) close() error {
	if j.f == nil {
		return nil
	}
	return j.f.Close()
}
