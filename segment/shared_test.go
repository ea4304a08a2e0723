package segment

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

// TestSharedIO: many logs on one dispatcher, appends interleaved, one
// Flush per loop iteration; notifications arrive per log with durable
// offsets that never go back, and every log reads back what it got.
func TestSharedIO(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		d := NewIO(newEngine())
		const logsN = 20
		logs := make([]*Log, logsN)
		want := make([]map[int64][]byte, logsN)
		lastDurable := map[*Log]int64{}
		d.SetNotify(func(l *Log) {
			if l.DurableOffset() < lastDurable[l] {
				t.Errorf("durable offset of %s went back: %d after %d", l.Dir(), l.DurableOffset(), lastDurable[l])
			}
			lastDurable[l] = l.DurableOffset()
		})
		cfg := Config{SegmentBytes: 16 << 10, PreallocateBytes: 64 << 10}
		for i := range logs {
			l, err := OpenLog(fsys, fmt.Sprintf("%s/p%d", dir, i), cfg, d)
			if err != nil {
				t.Fatal(err)
			}
			logs[i], want[i], lastDurable[l] = l, map[int64][]byte{}, -1
		}
		rng := newRNG(13)
		for iter := 0; iter < 40; iter++ {
			for k := 0; k < 15; k++ {
				i := rng.IntN(logsN)
				b := makeBatch(rng, 1+rng.IntN(3), rng.IntN(3000), int64(iter))
				base, _, err := logs[i].AppendLeader(b, 1)
				if err != nil {
					t.Fatal(err)
				}
				want[i][base] = stamped(b, base, 1)
			}
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Poll(); err != nil {
				t.Fatal(err)
			}
		}
		for d.InFlight() > 0 {
			if _, err := d.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		for i, l := range logs {
			if l.DurableOffset() != l.LogEndOffset()-1 || lastDurable[l] != l.DurableOffset() {
				t.Fatalf("log %d: durable %d, notified %d, LEO %d", i, l.DurableOffset(), lastDurable[l], l.LogEndOffset())
			}
			got := readAll(t, l)
			for k, v := range want[i] {
				if !bytes.Equal(got[k], v) {
					t.Fatalf("log %d: batch %d differs", i, k)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if d.pool.liveBytes != 0 {
			t.Fatalf("%d buffer bytes never came back to the pool", d.pool.liveBytes)
		}
	})
}

// TestSpanOutlivesSegment: a span keeps its file open when retention or
// truncation deletes its segment, and the file closes on the last release.
func TestSpanOutlivesSegment(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		cfg := Config{SegmentBytes: 4096, RetentionBytes: 1, RetentionMs: -1}
		l := openLog(t, fsys, dir, cfg, newEngine())
		defer l.Close()
		fill(t, l, 60, constEpoch(1), constTs(1))
		if l.SegmentCount() < 5 {
			t.Fatalf("%d segments", l.SegmentCount())
		}
		spans, err := l.Read(0, 1<<20, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		n := len(spans)
		// Retention deletes the first two segments; truncation to the
		// fourth's base deletes every segment after it.
		deleted := append([]Span{spans[0], spans[1]}, spans[4:n]...)
		before := make([][]byte, len(deleted))
		for i, sp := range deleted {
			before[i], _ = sp.AppendTo(nil)
		}
		ReleaseSpans(spans[2:4])
		l.cfg.RetentionBytes = l.Size() - l.segs[0].size - l.segs[1].size
		if res, err := l.ApplyRetention(1 << 40); err != nil || res.Segments != 2 {
			t.Fatalf("retention: %+v, %v", res, err)
		}
		if err := l.TruncateTo(l.segs[1].base); err != nil {
			t.Fatal(err)
		}
		for i, sp := range deleted {
			var buf bytes.Buffer
			if _, err := sp.ReadTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), before[i]) {
				t.Fatalf("span %d after its segment was deleted: %v", i, err)
			}
			if sp.file.refs.Load() != 1 {
				t.Fatalf("span %d: refs %d with only the span holding the file", i, sp.file.refs.Load())
			}
		}
		for _, sp := range deleted {
			f := sp.file
			sp.Release()
			if f.refs.Load() != 0 {
				t.Fatalf("refs %d after release", f.refs.Load())
			}
			if err := f.f.Close(); err == nil {
				t.Fatal("file still open after the last release")
			}
		}
	})
}

// TestSpansOnAnotherGoroutine: spans travel to a consumer goroutine that
// reads and releases them while the owner keeps appending, reading and
// deleting segments (run with -race).
func TestSpansOnAnotherGoroutine(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		cfg := Config{SegmentBytes: 8 << 10, RetentionBytes: 16 << 10, RetentionMs: -1, Fsync: FsyncNever}
		l := openLog(t, fsys, dir, cfg, newEngine())
		defer l.Close()
		type item struct {
			spans []Span
			want  []byte
		}
		work := make(chan item, 16)
		errs := make(chan error, 1)
		go func() {
			defer close(errs)
			for it := range work {
				var got bytes.Buffer
				for _, sp := range it.spans {
					if _, err := sp.ReadTo(&got); err != nil {
						errs <- err
						return
					}
					sp.Release()
				}
				if !bytes.Equal(got.Bytes(), it.want) {
					errs <- fmt.Errorf("consumer read %d bytes that differ from the %d appended", got.Len(), len(it.want))
					return
				}
			}
		}()
		rng := newRNG(14)
		for i := 0; i < 300; i++ {
			b := makeBatch(rng, 1+rng.IntN(3), rng.IntN(1500), 1)
			base, _, err := l.AppendLeader(b, 1)
			if err != nil {
				t.Fatal(err)
			}
			mustFlush(t, l)
			spans, err := l.Read(base, 1<<20, base+100)
			if err != nil {
				t.Fatal(err)
			}
			work <- item{spans: spans, want: stamped(b, base, 1)}
			if i%10 == 0 {
				if _, err := l.ApplyRetention(l.WrittenOffset()); err != nil {
					t.Fatal(err)
				}
			}
		}
		close(work)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	})
}
