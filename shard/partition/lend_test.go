package partition

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// TestProduceLendsLargeBatches: a produce whose caller can lend its batch
// (ProduceArgs.Lend) has a large batch written from the caller's memory,
// stamped there, and released once written; a small one is copied and
// lends nothing; the records read back either way.
func TestProduceLendsLargeBatches(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncNever)
	large := mkBatchBytes(t, 64, 1<<10, "L")
	small := mkBatchBytes(t, 3, 100, "S")
	if len(large) < segment.InPlaceBytesMin || len(small) >= segment.InPlaceBytesMin {
		t.Fatalf("batches of %d and %d bytes do not bracket %d", len(large), len(small), segment.InPlaceBytesMin)
	}
	lent, released := map[string]int{}, map[string]int{}
	lend := func(name string) segment.Lend {
		return func() func() {
			lent[name]++
			return func() { released[name]++ }
		}
	}
	origLarge := bytes.Clone(large)
	for _, b := range []struct {
		name string
		data []byte
	}{{"large", large}, {"small", small}} {
		out := make(chan ProduceResult, 1)
		e.do(func() {
			r.Produce(&ProduceArgs{Generation: GenerationUnknown, Records: b.data, Lend: lend(b.name)},
				func(res ProduceResult) { out <- res })
		})
		var res ProduceResult
		select {
		case res = <-out:
		case <-time.After(10 * time.Second):
			t.Fatal("produce not answered")
		}
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if b.name == "large" {
			h, _ := batch.ReadHeader(large)
			if h.BaseOffset != res.Produced.BaseOffset || bytes.Equal(large, origLarge) {
				t.Fatalf("the lent batch was not written from the caller's memory (base %d there, produced at %d)", h.BaseOffset, res.Produced.BaseOffset)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		e.do(func() { n = released["large"] })
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lent batch was released %d times, want once", n)
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
	var lentLarge, lentSmall, relSmall int
	e.do(func() { lentLarge, lentSmall, relSmall = lent["large"], lent["small"], released["small"] })
	if lentLarge != 1 || lentSmall != 0 || relSmall != 0 {
		t.Fatalf("lent large %d, small %d (released %d); want 1, 0, 0", lentLarge, lentSmall, relSmall)
	}
	data, res := e.fetch(r, FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	got := values(t, data, 0)
	if len(got) != 67 || got[0] != "L0" || got[63] != "L63" || got[64] != "S0" {
		t.Fatalf("read back %d values", len(got))
	}
}

// mkBatchBytes builds a batch of n records, each with a key of size bytes
// and the value prefix followed by its index.
func mkBatchBytes(t *testing.T, n, size int, prefix string) []byte {
	t.Helper()
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		v := []byte(fmt.Sprintf("%s%d", prefix, i))
		if err := b.AppendKV(1000, bytes.Repeat([]byte{'k'}, size), v); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
