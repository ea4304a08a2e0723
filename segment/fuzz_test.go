package segment

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// FuzzRecoverTail: whatever bytes follow a valid log in its active segment
// (mode 0), or make up the whole segment (mode 1), OpenLog does not panic,
// keeps every batch that was there before, and yields a log that reads
// back and takes appends.
func FuzzRecoverTail(f *testing.F) {
	rng := newRNG(1)
	valid := stamped(makeBatch(rng, 2, 100, 1), 6, 1)
	maxLen := make([]byte, batch.HeaderSize)
	copy(maxLen, valid)
	binary.BigEndian.PutUint32(maxLen[8:], batch.BatchBytesMax-batch.LengthFieldEnd)
	f.Add(uint8(0), []byte{})
	f.Add(uint8(0), maxLen)
	f.Add(uint8(0), append(bytes.Clone(valid), "garbage"...))
	f.Add(uint8(0), valid[:len(valid)-3])
	f.Add(uint8(0), make([]byte, 200))
	f.Add(uint8(1), append(stamped(makeBatch(rng, 1, 10, 1), 0, 0), 0xff, 0xff))
	f.Add(uint8(1), []byte{})
	f.Fuzz(func(t *testing.T, mode uint8, tail []byte) {
		fsys := vfs.NewMem()
		cfg := Config{IndexIntervalBytes: 128, PreallocateBytes: -1}
		var want map[int64][]byte
		if mode%2 == 0 {
			l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
			want = fill(t, l, 3, constEpoch(1), constTs(1))
			end := l.active().size
			abandon(l)
			appendRaw(t, fsys, "/d/"+segName(0, logSuffix), end, tail)
		} else {
			fsys.MkdirAll("/d", 0o755)
			f, _ := fsys.Create("/d/" + segName(0, logSuffix))
			f.WriteAt(tail, 0)
			f.Sync()
			fsys.SyncDir("/d")
		}
		l, err := OpenLog(fsys, "/d", cfg, NewIO(NewPwriteEngine()))
		if err != nil {
			t.Fatalf("OpenLog: %v", err)
		}
		l.ownIO = true
		defer l.Close()
		r := l.Recovery()
		if r.TruncatedBytes < 0 || r.ScannedBytes+r.TruncatedBytes < int64(len(tail))*int64(mode%2) {
			t.Fatalf("report does not account for the file: %v", r)
		}
		got, err := readAllErr(l)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("batch %d lost or changed by recovery", k)
			}
		}
		if _, _, err := l.AppendLeader(makeBatch(newRNG(2), 1, 10, 1), max(1, l.LastEpoch())); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecodeIndexFiles: the index and epoch decoders refuse or accept any
// bytes without panicking, and what they accept re-encodes to itself.
func FuzzDecodeIndexFiles(f *testing.F) {
	x := newSegIndex()
	x.add(0, 0, 100, 5, 10)
	x.add(3, 100, 100, 9, 10)
	x.add(7, 200, 100, 12, 10)
	x.markTime()
	idx := encodeIndex(10, 300, 20, x)
	tidx := encodeTimeIndex(10, 300, x)
	ep := (&epochCache{entries: []EpochEntry{{1, 10}, {4, 15}}}).encode()
	f.Add([]byte{})
	f.Add(idx)
	f.Add(tidx)
	f.Add(ep)
	f.Add(append(bytes.Clone(idx), 1, 2, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		y := newSegIndex()
		if decodeIndex(b, 10, 300, 20, y) == nil {
			if !bytes.Equal(encodeIndex(10, 300, 20, y), b) {
				t.Fatal("accepted index does not re-encode to itself")
			}
		}
		z := newSegIndex()
		if decodeTimeIndex(b, 10, 300, 20, z) == nil {
			if !bytes.Equal(encodeTimeIndex(10, 300, z), b) {
				t.Fatal("accepted time index does not re-encode to itself")
			}
		}
		if e, err := decodeEpochs(epochVersion, b); err == nil {
			if !bytes.Equal((&epochCache{entries: e}).encode(), b) {
				t.Fatal("accepted epochs do not re-encode to themselves")
			}
		}
	})
}
