package peerwire

import (
	"bytes"
	"testing"
)

// A marker request and its answer read back as written; a truncated
// frame, trailing bytes, a bad flag or another kind are refused.
func TestTxnMarkerFrames(t *testing.T) {
	m := TxnMarker{ID: 7, From: 2, TopicID: [16]byte{1, 2, 3}, Partition: 5, ProducerID: 1<<48 | 9, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 4}
	b := AppendTxnMarker(nil, m)
	got, err := DecodeTxnMarker(b)
	if err != nil || got != m {
		t.Fatalf("marker %+v %v, want %+v", got, err, m)
	}
	a := TxnMarkerAck{ID: 7, Answer: MarkerFenced}
	ab := AppendTxnMarkerAck(nil, a)
	if got, err := DecodeTxnMarkerAck(ab); err != nil || got != a {
		t.Fatalf("answer %+v %v, want %+v", got, err, a)
	}
	badFlag := bytes.Clone(b)
	badFlag[len(badFlag)-5] = 2
	for name, bad := range map[string][]byte{
		"empty": {}, "truncated": b[:len(b)-1], "trailing": append(bytes.Clone(b), 0), "flag": badFlag, "kind": ab,
	} {
		if _, err := DecodeTxnMarker(bad); err == nil {
			t.Errorf("%s marker decoded", name)
		}
	}
	for name, bad := range map[string][]byte{
		"empty": {}, "truncated": ab[:len(ab)-1], "trailing": append(bytes.Clone(ab), 0), "answer": AppendTxnMarkerAck(nil, TxnMarkerAck{Answer: 3}), "kind": b,
	} {
		if _, err := DecodeTxnMarkerAck(bad); err == nil {
			t.Errorf("%s answer decoded", name)
		}
	}
}
