package peerwire

import "encoding/binary"

// TxnMarker asks a partition's primary to write a transaction marker
// (a transaction coordinator on node From, whose partition's primary is
// the receiver); the primary answers a TxnMarkerAck with the same ID.
//
//	kind(9) id(u64) from(i32) topicID(16) partition(i32)
//	producerID(i64) producerEpoch(i16) commit(u8) coordinatorEpoch(i32)
type TxnMarker struct {
	ID               uint64
	From             int32
	TopicID          [16]byte
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// Answers of a TxnMarkerAck.
const (
	// MarkerWritten: the marker committed.
	MarkerWritten byte = 0
	// MarkerRetry: not written (the receiver is not the primary, the
	// replica is opening, the write failed); the coordinator retries.
	MarkerRetry byte = 1
	// MarkerFenced: a newer epoch of the producer wrote there: the
	// transaction's end is decided.
	MarkerFenced byte = 2
)

// TxnMarkerAck answers the TxnMarker of ID.
//
//	kind(10) id(u64) answer(u8)
type TxnMarkerAck struct {
	ID     uint64
	Answer byte
}

// AppendTxnMarker appends a TxnMarker frame body.
func AppendTxnMarker(dst []byte, m TxnMarker) []byte {
	be := binary.BigEndian
	dst = append(dst, KindTxnMarker)
	dst = be.AppendUint64(dst, m.ID)
	dst = be.AppendUint32(dst, uint32(m.From))
	dst = append(dst, m.TopicID[:]...)
	dst = be.AppendUint32(dst, uint32(m.Partition))
	dst = be.AppendUint64(dst, uint64(m.ProducerID))
	dst = be.AppendUint16(dst, uint16(m.ProducerEpoch))
	var c byte
	if m.Commit {
		c = 1
	}
	dst = append(dst, c)
	return be.AppendUint32(dst, uint32(m.CoordinatorEpoch))
}

// DecodeTxnMarker decodes a TxnMarker frame body.
func DecodeTxnMarker(b []byte) (TxnMarker, error) {
	r := &reader{b: b}
	var m TxnMarker
	if k := r.u8(); k != KindTxnMarker {
		r.fail("kind %d is not TxnMarker", k)
		return m, r.err
	}
	m.ID = r.u64()
	m.From = int32(r.u32())
	copy(m.TopicID[:], r.take(16))
	m.Partition = int32(r.u32())
	m.ProducerID = int64(r.u64())
	m.ProducerEpoch = int16(r.u16())
	switch c := r.u8(); c {
	case 0, 1:
		m.Commit = c == 1
	default:
		r.fail("commit flag %d", c)
	}
	m.CoordinatorEpoch = int32(r.u32())
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after a transaction marker", len(r.b))
	}
	return m, r.err
}

// AppendTxnMarkerAck appends a TxnMarkerAck frame body.
func AppendTxnMarkerAck(dst []byte, a TxnMarkerAck) []byte {
	dst = append(dst, KindTxnMarkerAck)
	dst = binary.BigEndian.AppendUint64(dst, a.ID)
	return append(dst, a.Answer)
}

// DecodeTxnMarkerAck decodes a TxnMarkerAck frame body.
func DecodeTxnMarkerAck(b []byte) (TxnMarkerAck, error) {
	r := &reader{b: b}
	var a TxnMarkerAck
	if k := r.u8(); k != KindTxnMarkerAck {
		r.fail("kind %d is not TxnMarkerAck", k)
		return a, r.err
	}
	a.ID = r.u64()
	a.Answer = r.u8()
	if r.err == nil && (len(r.b) != 0 || a.Answer > MarkerFenced) {
		r.fail("a transaction marker answer %d with %d bytes after it", a.Answer, len(r.b))
	}
	return a, r.err
}
