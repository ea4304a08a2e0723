package batch

import (
	"encoding/binary"
	"fmt"
)

// A transaction marker is the control batch that ends a producer's
// transaction in one partition (Kafka's EndTransactionMarker): a
// transactional control batch of the producer's id and epoch holding one
// record whose key is (version 0, type) — type 0 aborts, 1 commits — and
// whose value is (version 0, the coordinator's epoch). Unlike a
// consensus batch it takes an offset, and clients see it.

// Control-record types of transaction markers.
const (
	MarkerAbort  int16 = 0
	MarkerCommit int16 = 1
)

// TxnMarker is what a transaction marker says.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// BuildTxnMarker builds m's marker batch stamped at nowMs; its base
// offset and leader epoch are left for the appender, as for every batch.
func BuildTxnMarker(m TxnMarker, nowMs int64) []byte {
	b, err := NewBuilder(Options{})
	if err != nil {
		panic(err)
	}
	typ := MarkerAbort
	if m.Commit {
		typ = MarkerCommit
	}
	key := binary.BigEndian.AppendUint16([]byte{0, 0}, uint16(typ))
	value := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(m.CoordinatorEpoch))
	if err := b.AppendKV(nowMs, key, value); err != nil {
		panic(err)
	}
	b.SetProducer(m.ProducerID, m.ProducerEpoch, -1)
	out, err := b.Build()
	if err != nil {
		panic(err)
	}
	be := binary.BigEndian
	be.PutUint16(out[offAttributes:], be.Uint16(out[offAttributes:])|ControlBit|TransactionalBit)
	be.PutUint32(out[offCRC:], Checksum(out))
	return out
}

// IsTxnMarker reports whether h is a transaction marker's header: a
// transactional control batch (consensus batches are not transactional).
func (h *Header) IsTxnMarker() bool { return h.IsControl() && h.IsTransactional() }

// ReadTxnMarker reads the marker batch b (whole, as ValidateRecords
// accepts it). Errors wrap ErrCorrupt: not a marker, or a record that is
// not a marker's.
func ReadTxnMarker(b []byte) (TxnMarker, error) {
	var it Records
	if err := it.Reset(b); err != nil {
		return TxnMarker{}, err
	}
	h := it.h
	if !h.IsTxnMarker() || h.RecordCount != 1 || !it.Next() {
		return TxnMarker{}, fmt.Errorf("%w: not a transaction marker (attributes %#x, %d records)", ErrCorrupt, h.Attributes, h.RecordCount)
	}
	r := it.Record()
	be := binary.BigEndian
	if len(r.Key) != 4 || be.Uint16(r.Key) != 0 {
		return TxnMarker{}, fmt.Errorf("%w: transaction marker key %x: want version 0 and a type", ErrCorrupt, r.Key)
	}
	typ := int16(be.Uint16(r.Key[2:]))
	if typ != MarkerAbort && typ != MarkerCommit {
		return TxnMarker{}, fmt.Errorf("%w: transaction marker type %d: want 0 (abort) or 1 (commit)", ErrCorrupt, typ)
	}
	if len(r.Value) < 6 || be.Uint16(r.Value) != 0 {
		return TxnMarker{}, fmt.Errorf("%w: transaction marker value %x: want version 0 and a coordinator epoch", ErrCorrupt, r.Value)
	}
	return TxnMarker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, Commit: typ == MarkerCommit,
		CoordinatorEpoch: int32(be.Uint32(r.Value[2:]))}, nil
}
