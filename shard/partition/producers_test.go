package partition

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/segment/batch"
)

// TestProducerWindow: a partition recognises a retry of any of a
// producer's last ProducerWindow batches (the protocol's in-flight
// bound) and answers DUPLICATE_SEQUENCE for anything older.
func TestProducerWindow(t *testing.T) {
	p := newProducers()
	hdr := func(seq int32) batch.Header {
		h, err := batch.ReadHeader(mkBatch(t, 2, 7, 0, seq))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	const n = ProducerWindow + 3
	for i := int32(0); i < n; i++ {
		h := hdr(2 * i)
		if v, _, err := p.check(&h); err != nil || v != appendBatch {
			t.Fatalf("batch %d: verdict %v, %v; want an append", i, v, err)
		}
		p.record(&h, int64(2*i), int64(2*i+1), 1)
	}
	for i := int32(n - ProducerWindow); i < n; i++ {
		h := hdr(2 * i)
		v, b, err := p.check(&h)
		if err != nil || v != duplicate || b.base != int64(2*i) {
			t.Fatalf("retry of batch %d (in the window): verdict %v, base %d, %v; want a duplicate at %d", i, v, b.base, err, 2*i)
		}
	}
	h := hdr(2 * (n - ProducerWindow - 1))
	if _, _, err := p.check(&h); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("retry of the batch just out of the window: %v, want DUPLICATE_SEQUENCE", err)
	}
}
