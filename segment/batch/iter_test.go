package batch

import (
	"errors"
	"testing"
)

// TestRecordsReuse runs one iterator over batches of every codec in turn,
// including a corrupt one in between, and checks each reads back whole.
func TestRecordsReuse(t *testing.T) {
	var it Records
	for round := 0; round < 2; round++ {
		for i, c := range allCodecs {
			recs := manyRecords(20 + 40*i)
			b := build(t, Options{Codec: c}, recs)
			if err := it.Reset(b); err != nil {
				t.Fatal(err)
			}
			if h := it.Header(); h.Codec() != c {
				t.Fatalf("Header codec %s, want %s", h.Codec(), c)
			}
			var got []Record
			for it.Next() {
				got = append(got, it.Record().Clone())
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, withOffsets(recs, 0))
			if it.Next() || it.Err() != nil {
				t.Fatal("Next after the end returned true or set an error")
			}
			b[len(b)-1] ^= 0xff // now the CRC fails
			if err := it.Reset(b); !errors.Is(err, ErrChecksum) || it.Next() || !errors.Is(it.Err(), ErrChecksum) {
				t.Fatalf("Reset of a corrupt batch: %v, Err %v", err, it.Err())
			}
		}
	}
}

// TestRecordViewAliases checks the documented aliasing: an uncompressed
// record's key and value point into the batch, and Clone copies.
func TestRecordViewAliases(t *testing.T) {
	b := build(t, Options{}, []Record{{Timestamp: 1, Key: []byte("key"), Value: []byte("value")}})
	var it Records
	if err := it.Reset(b); err != nil || !it.Next() {
		t.Fatal(err)
	}
	r := it.Record()
	c := r.Clone()
	r.Value[0] = 'V' // writes into b
	if string(c.Value) != "value" || b[len(b)-1-len("value")] != 'V' {
		t.Fatalf("clone %q; view did not alias the batch", c.Value)
	}
	if cap(r.Key) != len(r.Key) {
		t.Fatal("key view has spare capacity into the value")
	}
}

// TestRecordsAllocs checks that a warm iterator allocates nothing per batch
// for every codec: the decompression buffer and header slice are reused,
// and the codecs come from pools.
func TestRecordsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	recs := manyRecords(200)
	for _, c := range allCodecs {
		b := build(t, Options{Codec: c}, recs)
		var it Records
		run := func() {
			if err := it.Reset(b); err != nil {
				t.Fatal(err)
			}
			for it.Next() {
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
		}
		run()
		if n := testing.AllocsPerRun(20, run); n > 0 {
			t.Errorf("%s: %.1f allocs per batch, want 0", c, n)
		}
	}
	b := build(t, Options{}, recs)
	if n := testing.AllocsPerRun(20, func() { _, _ = ValidateRecords(b) }); n > 0 {
		t.Errorf("ValidateRecords: %.1f allocs, want 0", n)
	}
}

// TestConcurrentUse builds, validates and iterates with every codec from
// several goroutines at once: the pooled and shared codecs must not mix
// state (run under -race).
func TestConcurrentUse(t *testing.T) {
	recs := manyRecords(100)
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func() {
			var err error
			for i := 0; i < 10 && err == nil; i++ {
				c := allCodecs[(g+i)%len(allCodecs)]
				var bl *Builder
				if bl, err = NewBuilder(Options{Codec: c}); err != nil {
					break
				}
				for _, r := range recs {
					_ = bl.Append(r)
				}
				var b []byte
				if b, err = bl.Build(); err != nil {
					break
				}
				if _, err = ValidateRecords(b); err != nil {
					break
				}
				var got []Record
				if got, err = collect(b); err == nil && len(got) != len(recs) {
					err = errors.New("lost records")
				}
			}
			done <- err
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
