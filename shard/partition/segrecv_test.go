package partition

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
)

func flushLog(t *testing.T, l *segment.Log) {
	t.Helper()
	if err := l.IO().Flush(); err != nil {
		t.Fatal(err)
	}
	for l.IO().InFlight() > 0 {
		if _, err := l.IO().Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// segSource is a primary's log with several sealed segments (two epochs).
func segSource(t *testing.T, fsys vfs.FS) *segment.Log {
	t.Helper()
	l, err := segment.OpenLog(fsys, "/src", segment.Config{SegmentBytes: 4096}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		epoch := int32(1)
		if i >= 100 {
			epoch = 2
		}
		if _, _, err := l.AppendLeader(mkBatch(t, 1+i%5, -1, 0, int32(i)), epoch); err != nil {
			t.Fatal(err)
		}
		flushLog(t, l)
	}
	if n := len(l.SealedSegments(nil)); n < 4 {
		t.Fatalf("the source has %d sealed segments, want at least 4", n)
	}
	return l
}

// logBytes reads l's batches [from, to) as one byte string.
func logBytes(t *testing.T, l *segment.Log, from, to int64) []byte {
	t.Helper()
	var out []byte
	for off := from; off < to; {
		spans, err := l.Read(off, 1<<20, to-1)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(spans) == 0 {
			t.Fatalf("Read(%d) returned nothing below %d", off, to)
		}
		for _, sp := range spans {
			if out, err = sp.AppendTo(out); err != nil {
				t.Fatal(err)
			}
			off = sp.LastOffset + 1
		}
		segment.ReleaseSpans(spans)
	}
	return out
}

// sendSegments sends dst, from its log end on, every sealed segment of
// src in chunks of chunkBytes as the primary would, answering as the
// follower does; it stops at the first error.
func sendSegments(t *testing.T, src, dst *segment.Log, rc *segReceiver, chunkBytes int64) error {
	t.Helper()
	for _, s := range src.SealedSegments(nil) {
		if s.Base < dst.LogEndOffset() {
			continue
		}
		plan, ok := SegmentPlan(dst.LogEndOffset()-1, src.LogEndOffset()-1, src.SealedSegments(nil), 4096, 4096)
		if !ok || plan != s {
			t.Fatalf("SegmentPlan at %d = %+v, %v; want %+v", dst.LogEndOffset(), plan, ok, s)
		}
		lastTerm, err := src.TermAt(s.Last)
		if err != nil {
			t.Fatal(err)
		}
		tr := &segTransfer{seg: s, lastTerm: lastTerm}
		for {
			pos, n, ok := tr.nextChunk(chunkBytes)
			if !ok {
				t.Fatalf("segment %d: no chunk to send and not done", s.Base)
			}
			sp, err := src.SegmentChunk(s.Base, pos, n)
			if err != nil {
				t.Fatal(err)
			}
			data, err := sp.AppendTo(nil)
			sp.Release()
			if err != nil {
				t.Fatal(err)
			}
			tr.sent(n)
			held, status, err := rc.receive(dst, &SegmentChunk{Base: s.Base, Last: s.Last, LastTerm: lastTerm, FileBytes: s.Bytes, Pos: pos, Data: data})
			if err != nil {
				return err
			}
			if tr.answered(SegmentAnswer{Base: s.Base, Held: held, Status: status}) {
				if status != SegmentAdopted {
					t.Fatalf("segment %d: status %d", s.Base, status)
				}
				break
			}
		}
	}
	return nil
}

// TestSegmentReceive: a follower with an empty log receives every sealed
// segment of the primary in chunks and reads back the primary's bytes;
// chunks out of order are answered with the position wanted.
func TestSegmentReceive(t *testing.T) {
	fsys := vfs.NewMem()
	src := segSource(t, fsys)
	defer src.Close()
	dst, err := segment.OpenLog(fsys, "/dst", segment.Config{SegmentBytes: 4096}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	rc := &segReceiver{fs: fsys}
	s := src.SealedSegments(nil)[0]
	if held, status, _ := rc.receive(dst, &SegmentChunk{Base: s.Base, Last: s.Last, FileBytes: s.Bytes, Pos: 1000, Data: make([]byte, 10)}); held != 0 || status != SegmentMore {
		t.Fatalf("a chunk at 1000 first: held %d status %d, want 0 and more", held, status)
	}
	if _, status, err := rc.receive(dst, &SegmentChunk{Base: 5, Last: 9, FileBytes: 100, Pos: 0, Data: make([]byte, 10)}); status != SegmentRefused || !errors.Is(err, segment.ErrAdopt) {
		t.Fatalf("a segment past the log end: status %d, %v; want refused, ErrAdopt", status, err)
	}
	if _, status, err := rc.receive(dst, &SegmentChunk{Base: 0, Last: 9, FileBytes: 1 << 40, Pos: 0, Data: make([]byte, 10)}); status != SegmentRefused || !errors.Is(err, segment.ErrAdopt) {
		t.Fatalf("a file of 1 TiB announced: status %d, %v; want refused, ErrAdopt", status, err)
	}
	if err := sendSegments(t, src, dst, rc, 1000); err != nil {
		t.Fatal(err)
	}
	sealed := src.SealedSegments(nil)
	end := sealed[len(sealed)-1].Last + 1
	if dst.LogEndOffset() != end {
		t.Fatalf("the follower ends at %d, want %d", dst.LogEndOffset(), end)
	}
	if !bytes.Equal(logBytes(t, dst, 0, end), logBytes(t, src, 0, end)) {
		t.Fatal("the follower's log differs from the primary's")
	}
}

// TestSegmentReceiveCrash crashes the follower at every file-system
// operation of receiving the primary's segments: after the reopen no
// temporary file is left, the log is a prefix of the primary's ending at
// a segment boundary (nothing half-visible), and the transfer started
// again from its end catches it up byte for byte.
func TestSegmentReceiveCrash(t *testing.T) {
	srcFS := vfs.NewMem()
	src := segSource(t, srcFS)
	defer src.Close()
	sealed := src.SealedSegments(nil)
	end := sealed[len(sealed)-1].Last + 1
	want := logBytes(t, src, 0, end)
	bounds := map[int64]bool{}
	for _, s := range sealed {
		bounds[s.Base] = true
	}
	bounds[end] = true
	for deathAt := 0; ; deathAt++ {
		fsys := vfs.NewMem()
		dst, err := segment.OpenLog(fsys, "/d", segment.Config{SegmentBytes: 4096}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ops, dead := 0, false
		fsys.SetInjector(func(vfs.Op, string) error {
			if ops++; ops > deathAt {
				dead = true
				return vfs.ErrCrashed
			}
			return nil
		})
		err = sendSegments(t, src, dst, &segReceiver{fs: fsys}, 1500)
		_ = dst.Close()
		if !dead {
			if err != nil {
				t.Fatal(err)
			}
			if deathAt < 20 {
				t.Fatalf("a whole receive took only %d file-system operations", deathAt)
			}
			break
		}
		fsys.Crash(uint64(deathAt))
		dst, err = segment.OpenLog(fsys, "/d", segment.Config{SegmentBytes: 4096}, nil)
		if err != nil {
			t.Fatalf("deathAt %d: reopen: %v", deathAt, err)
		}
		names, _ := fsys.List("/d")
		for _, n := range names {
			if strings.HasSuffix(n, ".tmp") {
				t.Fatalf("deathAt %d: %s left after the reopen", deathAt, n)
			}
		}
		at := dst.LogEndOffset()
		if !bounds[at] {
			t.Fatalf("deathAt %d: the log ends at %d, not a segment boundary", deathAt, at)
		}
		if !bytes.Equal(logBytes(t, dst, 0, at), want[:len(logBytes(t, src, 0, at))]) {
			t.Fatalf("deathAt %d: the log is not a prefix of the primary's", deathAt)
		}
		if err := sendSegments(t, src, dst, &segReceiver{fs: fsys}, 1500); err != nil {
			t.Fatalf("deathAt %d: catching up after the crash: %v", deathAt, err)
		}
		if !bytes.Equal(logBytes(t, dst, 0, end), want) {
			t.Fatalf("deathAt %d: caught up, but the log differs from the primary's", deathAt)
		}
		_ = dst.Close()
	}
}
