package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// adoptSource builds a source log with several sealed segments (two
// epochs, one marked batch) and returns it with every batch by base
// offset.
func adoptSource(t *testing.T, fsys vfs.FS) (*Log, map[int64][]byte) {
	t.Helper()
	src := openLog(t, fsys, "/src", Config{SegmentBytes: 4096, IndexIntervalBytes: 700}, NewPwriteEngine())
	rng := newRNG(1)
	want := map[int64][]byte{}
	for i := 0; i < 60; i++ {
		epoch := int32(1)
		if i >= 25 {
			epoch = 3
		}
		b := makeBatch(rng, 1+i%4, 150+i%7*20, int64(1000+i))
		var base int64
		var err error
		user := src.UserEndOffset()
		if i == 30 {
			b = MarkerBatch([]byte("conf-7"), int64(1000+i))
			base, _, err = src.AppendLeaderMarked(b, epoch, []byte("conf-7"))
		} else {
			base, _, err = src.AppendLeader(b, epoch)
		}
		if err != nil {
			t.Fatal(err)
		}
		want[base] = stamped(b, user, epoch)
		mustFlush(t, src)
	}
	if len(src.segs) < 4 {
		t.Fatalf("the source has %d segments, want at least 4", len(src.segs))
	}
	return src, want
}

// sendSegment copies the source's sealed segment s to dst's temporary
// name, as a receiver writes the chunks it gets.
func sendSegment(t *testing.T, srcFS vfs.FS, src *Log, s *segment, dstFS vfs.FS, dst *Log) {
	t.Helper()
	b := make([]byte, s.size)
	if _, err := s.file.f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	f, err := dstFS.Create(dst.AdoptTempPath(s.base))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

func writeFile(fsys vfs.FS, name string, b []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func below(want map[int64][]byte, end int64) map[int64][]byte {
	out := map[int64][]byte{}
	for k, v := range want {
		if k < end {
			out[k] = v
		}
	}
	return out
}

// TestAdoptSegments: an empty log adopts the source's sealed segments one
// by one and then reads back exactly their batches, byte for byte, keeps
// their epochs and marker, goes on appending, and reopens the same.
func TestAdoptSegments(t *testing.T) {
	fsys := vfs.NewMem()
	src, want := adoptSource(t, fsys)
	defer src.Close()
	dst := openLog(t, fsys, "/dst", Config{SegmentBytes: 4096}, NewPwriteEngine())
	sealed := src.segs[:len(src.segs)-1]
	for _, s := range sealed {
		sendSegment(t, fsys, src, s, fsys, dst)
		epoch, err := src.TermAt(s.last)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.AdoptSegment(s.base, s.last, epoch); err != nil {
			t.Fatalf("AdoptSegment(%d, %d): %v", s.base, s.last, err)
		}
	}
	end := sealed[len(sealed)-1].last + 1
	if dst.LogEndOffset() != end || dst.DurableOffset() != end-1 {
		t.Fatalf("log end %d durable %d, want %d and %d", dst.LogEndOffset(), dst.DurableOffset(), end, end-1)
	}
	mustHave(t, dst, below(want, end))
	checkMarkers(t, dst, nil)
	if len(dst.Markers()) != 1 {
		t.Fatalf("markers %v, want the one of the source", dst.Markers())
	}
	for off := int64(0); off < end; off++ {
		a, _ := src.TermAt(off)
		b, err := dst.TermAt(off)
		if err != nil || a != b {
			t.Fatalf("TermAt(%d) = %d, %v, want %d", off, b, err, a)
		}
	}
	for _, s := range sealed {
		if !bytes.Equal(fileBytes(t, fsys, dst.path(segName(s.base, logSuffix))), fileBytes(t, fsys, src.path(segName(s.base, logSuffix)))) {
			t.Fatalf("segment %d is not the source's file byte for byte", s.base)
		}
	}
	// The tail goes as appends.
	b := stamped(want[end], dst.UserEndOffset(), 3)
	if err := dst.AppendFollower(b); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, dst)
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	dst = openLog(t, fsys, "/dst", Config{SegmentBytes: 4096}, NewPwriteEngine())
	defer dst.Close()
	mustHave(t, dst, below(want, rlastOf(b, end)+1))
	checkMarkers(t, dst, nil)
}

func fileBytes(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAdoptSegmentRefuses: a segment that does not continue the log, is
// damaged, ends elsewhere or carries another epoch is refused with
// ErrAdopt, its file removed, and the log unchanged.
func TestAdoptSegmentRefuses(t *testing.T) {
	fsys := vfs.NewMem()
	src, _ := adoptSource(t, fsys)
	defer src.Close()
	s0, s1 := src.segs[0], src.segs[1]
	e0, _ := src.TermAt(s0.last)
	cases := []struct {
		name       string
		seg        *segment
		last       int64
		epoch      int32
		damage     func(b []byte)
		truncateAt int64
	}{
		{name: "not at the log end", seg: s1, last: s1.last, epoch: e0},
		{name: "checksum", seg: s0, last: s0.last, epoch: e0, damage: func(b []byte) { b[batch.HeaderSize+3] ^= 1 }},
		{name: "ends earlier", seg: s0, last: s0.last + 1, epoch: e0},
		{name: "torn", seg: s0, last: s0.last, epoch: e0, truncateAt: s0.size - 10},
		{name: "epoch", seg: s0, last: s0.last, epoch: e0 + 1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := fmt.Sprintf("/dst%d", i)
			dst := openLog(t, fsys, dir, Config{SegmentBytes: 4096}, NewPwriteEngine())
			defer dst.Close()
			b := make([]byte, c.seg.size)
			if _, err := c.seg.file.f.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			if c.damage != nil {
				c.damage(b)
			}
			if c.truncateAt > 0 {
				b = b[:c.truncateAt]
			}
			f, err := fsys.Create(dst.AdoptTempPath(c.seg.base))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(b, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			err = dst.AdoptSegment(c.seg.base, c.last, c.epoch)
			if !errors.Is(err, ErrAdopt) {
				t.Fatalf("AdoptSegment = %v, want ErrAdopt", err)
			}
			if _, err := fsys.Stat(dst.AdoptTempPath(c.seg.base)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the refused file is still there: %v", err)
			}
			if dst.LogEndOffset() != 0 || len(readAll(t, dst)) != 0 {
				t.Fatalf("the log changed: end %d", dst.LogEndOffset())
			}
		})
	}
}

// TestAdoptSegmentCrash kills the process at every file-system operation
// of an adoption (and of writing the received file before it) after the
// log already holds batches of its own, crashes the file system and
// reopens: the log holds either what it held before or that and the whole
// segment, never part of it, no temporary file is left, and the adoption
// can be done again.
func TestAdoptSegmentCrash(t *testing.T) {
	srcFS := vfs.NewMem()
	src, want := adoptSource(t, srcFS)
	defer src.Close()
	s0, s1 := src.segs[0], src.segs[1]
	e1, _ := src.TermAt(s1.last)
	seg1 := fileBytes(t, srcFS, src.path(segName(s1.base, logSuffix)))
	for deathAt := 0; ; deathAt++ {
		fsys := vfs.NewMem()
		cfg := Config{SegmentBytes: 1 << 20}
		dst := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
		// The log's own copy of the first segment came as appends.
		for off := s0.base; off <= s0.last; {
			b := want[off]
			if err := dst.AppendFollower(b); err != nil {
				t.Fatal(err)
			}
			off = rlastOf(b, off) + 1
		}
		mustFlush(t, dst)
		ops, dead := 0, false
		fsys.SetInjector(func(vfs.Op, string) error {
			ops++
			if ops > deathAt {
				dead = true
				return vfs.ErrCrashed
			}
			return nil
		})
		err := func() error {
			f, err := fsys.Create(dst.AdoptTempPath(s1.base))
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := f.WriteAt(seg1, 0); err != nil {
				return err
			}
			return dst.AdoptSegment(s1.base, s1.last, e1)
		}()
		if !dead {
			if err != nil {
				t.Fatalf("deathAt %d: AdoptSegment without a crash: %v", deathAt, err)
			}
			_ = dst.Close()
			break
		}
		_ = dst.Close()
		fsys.Crash(uint64(deathAt))
		dst = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
		names, _ := fsys.List("/d")
		for _, n := range names {
			if bytes.HasSuffix([]byte(n), []byte(".tmp")) {
				t.Fatalf("deathAt %d: %s left after the reopen", deathAt, n)
			}
		}
		switch dst.LogEndOffset() {
		case s1.base:
			mustHave(t, dst, below(want, s1.base))
		case s1.last + 1:
			mustHave(t, dst, below(want, s1.last+1))
		default:
			t.Fatalf("deathAt %d: the log ends at %d, want %d or %d", deathAt, dst.LogEndOffset(), s1.base, s1.last+1)
		}
		if dst.LogEndOffset() == s1.base {
			// The transfer restarts.
			if err := writeFile(fsys, dst.AdoptTempPath(s1.base), seg1); err != nil {
				t.Fatal(err)
			}
			if err := dst.AdoptSegment(s1.base, s1.last, e1); err != nil {
				t.Fatalf("deathAt %d: adopting again: %v", deathAt, err)
			}
			mustHave(t, dst, below(want, s1.last+1))
		}
		_ = dst.Close()
	}
}

// TestSealedSegmentsAndChunks: the sealed segments listed are the files a
// primary sends, and their chunks read back the file's bytes; the active
// segment and ranges outside a file are refused.
func TestSealedSegmentsAndChunks(t *testing.T) {
	fsys := vfs.NewMem()
	src, _ := adoptSource(t, fsys)
	defer src.Close()
	segs := src.SealedSegments(nil)
	if len(segs) != len(src.segs)-1 {
		t.Fatalf("%d sealed segments listed, the log has %d", len(segs), len(src.segs)-1)
	}
	for i, s := range segs {
		if i > 0 && s.Base != segs[i-1].Last+1 {
			t.Fatalf("segment %d starts at %d after %d", i, s.Base, segs[i-1].Last)
		}
		file := fileBytes(t, fsys, src.path(segName(s.Base, logSuffix)))
		if int64(len(file)) != s.Bytes {
			t.Fatalf("segment %d: %d bytes listed, the file has %d", s.Base, s.Bytes, len(file))
		}
		var got []byte
		for pos := int64(0); pos < s.Bytes; pos += 1000 {
			sp, err := src.SegmentChunk(s.Base, pos, min(1000, s.Bytes-pos))
			if err != nil {
				t.Fatal(err)
			}
			if got, err = sp.AppendTo(got); err != nil {
				t.Fatal(err)
			}
			sp.Release()
		}
		if !bytes.Equal(got, file) {
			t.Fatalf("segment %d: the chunks differ from the file", s.Base)
		}
	}
	last := segs[len(segs)-1]
	for _, c := range []struct{ base, pos, n int64 }{
		{last.Last + 1, 0, 10}, // the active segment
		{segs[0].Base + 1, 0, 10},
		{segs[0].Base, segs[0].Bytes - 5, 10},
		{segs[0].Base, -1, 10},
	} {
		if _, err := src.SegmentChunk(c.base, c.pos, c.n); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("SegmentChunk(%d, %d, %d) = %v, want ErrOffsetOutOfRange", c.base, c.pos, c.n, err)
		}
	}
}
