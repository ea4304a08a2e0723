package batch

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A marker built here is a valid transactional control batch that
// franz-go's own codec reads as Kafka's EndTransactionMarker, and reads
// back to what was built; a consensus batch is no marker.
func TestTxnMarker(t *testing.T) {
	for _, m := range []TxnMarker{{ProducerID: 7, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 12}, {ProducerID: 1 << 40, ProducerEpoch: 0}} {
		b := BuildTxnMarker(m, 1234)
		h, err := ValidateRecords(b)
		if err != nil || !h.IsTxnMarker() || h.ProducerID != m.ProducerID || h.ProducerEpoch != m.ProducerEpoch || h.RaftWidth() != 1 {
			t.Fatalf("%+v: header %+v, %v", m, h, err)
		}
		got, err := ReadTxnMarker(b)
		if err != nil || got != m {
			t.Fatalf("read %+v, %v; want %+v", got, err, m)
		}
		var it Records
		if err := it.Reset(b); err != nil || !it.Next() {
			t.Fatal(err)
		}
		var key kmsg.ControlRecordKey // Kafka's own codec
		var val kmsg.EndTxnMarker
		if err := key.ReadFrom(it.Record().Key); err != nil || int16(key.Type) != map[bool]int16{false: 0, true: 1}[m.Commit] {
			t.Fatalf("key %+v, %v", key, err)
		}
		if err := val.ReadFrom(it.Record().Value); err != nil || val.CoordinatorEpoch != m.CoordinatorEpoch {
			t.Fatalf("value %+v, %v", val, err)
		}
	}
	noop := BuildConsensus(ConsensusKeyNoop, nil, 1, true)
	if h, _ := ReadHeader(noop); h.IsTxnMarker() {
		t.Fatal("a consensus no-op reads as a transaction marker")
	}
	if _, err := ReadTxnMarker(noop); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadTxnMarker(no-op): %v", err)
	}
}
