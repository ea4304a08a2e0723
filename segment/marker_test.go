package segment

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

// checkMarkers fails unless the log's markers are exactly its marker
// batches (MarkerPayload of what reads back), and MarkerAt answers every
// offset with the last of them, or base when none is at or below it.
func checkMarkers(t *testing.T, l *Log, base []byte) {
	t.Helper()
	if err := markersMatch(l, base); err != nil {
		t.Fatal(err)
	}
}

func markersMatch(l *Log, base []byte) error {
	for _, m := range l.Markers() {
		if m.Offset < l.LogStartOffset() || m.Offset >= l.LogEndOffset() {
			return fmt.Errorf("marker at %d outside the log [%d, %d)", m.Offset, l.LogStartOffset(), l.LogEndOffset())
		}
	}
	inForce := base
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off++ {
		spans, err := l.Read(off, 1<<20, l.WrittenOffset())
		if err != nil {
			return err
		}
		var b []byte
		first := off
		if len(spans) > 0 {
			b, _ = spans[0].AppendTo(nil)
			first = spans[0].FirstOffset
		}
		ReleaseSpans(spans)
		h, err := readHeaderBytes(b)
		if err != nil {
			return fmt.Errorf("batch at %d: %v", off, err)
		}
		last := rlast(&h, first)
		p, marked := MarkerPayload(b[:h.Size()])
		m, ok := l.MarkerOf(last)
		if marked != ok || (ok && !bytes.Equal(m.Payload, p)) {
			return fmt.Errorf("batch at %d: marker batch %v %q, MarkerOf %v %q", off, marked, p, ok, m.Payload)
		}
		if marked {
			inForce = p
		}
		got, ok := l.MarkerAt(last)
		if ok != (inForce != nil) || !bytes.Equal(got.Payload, inForce) {
			return fmt.Errorf("MarkerAt(%d) = %v %q, want %q", last, ok, got.Payload, inForce)
		}
		off = last
	}
	return nil
}

func appendMarked(t *testing.T, l *Log, payload string, epoch int32) int64 {
	t.Helper()
	base, _, err := l.AppendLeaderMarked(MarkerBatch([]byte(payload), 1), epoch, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return base
}

func TestMarkerBatchRoundTrip(t *testing.T) {
	for _, p := range [][]byte{{}, []byte("x"), bytes.Repeat([]byte{7}, MarkerBytesMax)} {
		got, ok := MarkerPayload(MarkerBatch(p, 5))
		if !ok || !bytes.Equal(got, p) {
			t.Fatalf("payload %q: %q %v", p, got, ok)
		}
	}
	if _, ok := MarkerPayload(makeBatch(newRNG(1), 1, 40, 1)); ok {
		t.Fatal("a data batch read as a marker")
	}
}

func TestMarkersSurviveRestartTruncateResetRetention(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096, RetentionBytes: -1, RetentionMs: -1}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	fill(t, l, 10, constEpoch(1), constTs(1))
	a := appendMarked(t, l, "A", 1)
	fill(t, l, 10, constEpoch(1), constTs(1))
	b := appendMarked(t, l, "B", 2)
	fill(t, l, 10, constEpoch(2), constTs(1))
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	checkMarkers(t, l, nil)
	if m, ok := l.MarkerAt(b - 1); !ok || m.Offset != a || string(m.Payload) != "A" {
		t.Fatalf("MarkerAt(%d) = %+v %v", b-1, m, ok)
	}
	if _, ok := l.MarkerAt(a - 1); ok {
		t.Fatalf("a marker before the first marked batch")
	}
	l.Close()

	// A clean restart reads them back.
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	checkMarkers(t, l, nil)
	if got := len(l.Markers()); got != 2 {
		t.Fatalf("%d markers after restart", got)
	}

	// A truncation below B drops it, durably: a plain batch takes its
	// offset and a restart must not call that one marked.
	if err := l.TruncateTo(b); err != nil {
		t.Fatal(err)
	}
	checkMarkers(t, l, nil)
	fill(t, l, 3, constEpoch(3), constTs(1))
	checkMarkers(t, l, nil)
	l.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	checkMarkers(t, l, nil)

	// Retention past A: A becomes the base, kept with the log start.
	cfg.RetentionBytes = 1
	l.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	if _, err := l.ApplyRetention(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() <= a {
		t.Fatalf("retention kept the log from %d (A at %d)", l.LogStartOffset(), a)
	}
	if m, ok := l.MarkerAt(l.LogStartOffset() - 1); !ok || string(m.Payload) != "A" {
		t.Fatalf("base after retention: %+v %v", m, ok)
	}
	l.Close()
	cfg.RetentionBytes = -1
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	checkMarkers(t, l, []byte("A"))

	// A reset installs the base it is given.
	if err := l.ResetWithMarker(5000, 3, []byte("R")); err != nil {
		t.Fatal(err)
	}
	if m, ok := l.MarkerAt(4999); !ok || string(m.Payload) != "R" || m.Offset != 4999 {
		t.Fatalf("base after reset: %+v %v", m, ok)
	}
	c := appendMarked(t, l, "C", 3)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	checkMarkers(t, l, []byte("R"))
	if m, ok := l.MarkerOf(c); !ok || string(m.Payload) != "C" {
		t.Fatalf("C after reset and restart: %+v %v", m, ok)
	}
	if _, _, err := l.AppendLeaderMarked(MarkerBatch(nil, 1), 3, bytes.Repeat([]byte{1}, MarkerBytesMax+1)); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("oversized marker: %v", err)
	}
	if _, _, err := l.AppendLeaderMarked(makeBatch(newRNG(2), 2, 40, 1), 3, []byte("x")); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("marked batch of two offsets: %v", err)
	}
}

// TestMarkersAfterCrash crashes the file system after marked and plain
// appends that were never synced, and after a truncation: whatever prefix
// of the log survives, its markers must be exactly its marker batches.
func TestMarkersAfterCrash(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		fsys := vfs.NewMem()
		cfg := Config{SegmentBytes: 4096, Fsync: FsyncNever}
		l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
		fill(t, l, 5, constEpoch(1), constTs(1))
		appendMarked(t, l, "A", 1)
		fill(t, l, 5, constEpoch(1), constTs(1))
		b := appendMarked(t, l, "B", 1)
		if seed%2 == 1 {
			if err := l.TruncateTo(b); err != nil {
				t.Fatal(err)
			}
		}
		// Unsynced from here on: the crash may keep any prefix.
		rng := newRNG(seed)
		for i := 0; i < 4; i++ {
			if _, _, err := l.AppendLeader(makeBatch(rng, 1, 100, 1), 2); err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				if _, _, err := l.AppendLeaderMarked(MarkerBatch([]byte("C"), 1), 2, []byte("C")); err != nil {
					t.Fatal(err)
				}
			}
		}
		mustFlush(t, l)
		fsys.Crash(seed)
		l2, err := OpenLog(fsys, "/d", cfg, NewIO(NewPwriteEngine()))
		if err != nil {
			t.Fatalf("seed %d: reopen: %v", seed, err)
		}
		l2.ownIO = true
		if err := markersMatch(l2, nil); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test ./segment -run 'TestMarkersAfterCrash$'", seed, err)
		}
		// It goes on working: a plain batch over a dropped marker's
		// offset is not marked after another restart.
		fill(t, l2, 2, constEpoch(3), constTs(1))
		l2.Close()
		l3 := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
		if err := markersMatch(l3, nil); err != nil {
			t.Fatalf("seed %d after append and restart: %v", seed, err)
		}
		l3.Close()
	}
}

// A damaged markers checkpoint is rebuilt from the batches: the marked
// ones are the one-offset control batches holding MarkerControlKey.
func TestMarkersRebuiltFromTheBatches(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{SegmentBytes: 4096}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	fill(t, l, 10, constEpoch(1), constTs(1))
	appendMarked(t, l, "A", 1)
	fill(t, l, 20, constEpoch(1), constTs(1))
	appendMarked(t, l, "B", 1)
	fill(t, l, 2, constEpoch(1), constTs(1))
	l.Close()
	f, err := fsys.OpenReadWrite("/d/" + markersFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	if !l.Recovery().MarkersRebuilt || len(l.Markers()) != 2 {
		t.Fatalf("after damage: rebuilt %v, %d markers (%v)", l.Recovery().MarkersRebuilt, len(l.Markers()), l.Recovery())
	}
	checkMarkers(t, l, nil)
}

// FuzzDecodeMarkers: any payload decodes or is refused, never a panic; a
// decoded one encodes back to itself.
func FuzzDecodeMarkers(f *testing.F) {
	valid := encodeMarkers([]Marker{{Offset: 3, Payload: []byte("ab")}, {Offset: 9, Payload: bytes.Repeat([]byte{1}, MarkerBytesMax)}})
	f.Add([]byte{})
	f.Add(valid)
	f.Add(append(bytes.Clone(valid), 0xff, 0xff))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeMarkers(markersVersion, b)
		if err != nil {
			return
		}
		if again := encodeMarkers(es); !bytes.Equal(again, b) {
			t.Fatalf("decode/encode differs: %x vs %x", again, b)
		}
	})
}

// BenchmarkAppendLeaderMarked measures what a marked batch costs on the
// OS's file system (its marker is a checkpoint write with fsyncs before
// the append), against a plain append of the same batch.
func BenchmarkAppendLeaderMarked(b *testing.B) {
	for _, marked := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "marked"}[marked], func(b *testing.B) {
			l, err := OpenLog(vfs.OS(), b.TempDir(), Config{Fsync: FsyncNever}, NewIO(NewPwriteEngine()))
			if err != nil {
				b.Fatal(err)
			}
			l.ownIO = true
			defer l.Close()
			bt := MarkerBatch([]byte("123456789"), 1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if marked {
					_, _, err = l.AppendLeaderMarked(bt, 1, []byte("123456789"))
				} else {
					_, _, err = l.AppendLeader(bt, 1)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
