package batch

import "encoding/binary"

// A consensus batch is the one-record control batch a partition's
// consensus group writes for itself: the leader no-op (control key type
// -1) or a configuration entry (type -2). Kafka's transaction markers
// (types 0 and 1) are ordinary control batches and take an offset.
//
// A consensus batch may be zero-width (docs/design/offsets.md): its last
// offset delta is -1, so that it takes no user offset (its base offset is
// the next data record's, its last offset one below) while it still holds
// its one record. Offsets then run "last + 1 == next base" across it,
// and an offset lookup ("first batch whose last offset >= o") passes over
// it. Only consensus batches may be zero-width; a broker never sends one
// to a client.

// Control-record keys of the consensus batches (version 0, then type).
var (
	ConsensusKeyNoop = []byte{0, 0, 0xff, 0xff}
	ConsensusKeyConf = []byte{0, 0, 0xff, 0xfe}
)

// IsZeroWidth reports whether the header is a zero-width batch: a control
// batch of one record with last offset delta -1 (ValidateRecords also
// checks that its record carries a consensus key).
func (h *Header) IsZeroWidth() bool {
	return h.IsControl() && h.RecordCount == 1 && h.LastOffsetDelta == -1
}

// RaftWidth is the number of raft offsets the batch takes in a partition's
// log (docs/design/offsets.md): one for a zero-width batch, one per offset
// of its records otherwise. Its user offsets are BaseOffset..LastOffset(),
// none for a zero-width batch.
func (h *Header) RaftWidth() int64 {
	if h.IsZeroWidth() {
		return 1
	}
	return int64(h.LastOffsetDelta) + 1
}

// isConsensusKey reports whether key is one of the consensus control keys.
func isConsensusKey(key []byte) bool {
	return string(key) == string(ConsensusKeyNoop) || string(key) == string(ConsensusKeyConf)
}

// BuildConsensus builds a consensus batch whose one record has key (one
// of the consensus keys) and value, stamped at nowMs; zeroWidth builds it
// with last offset delta -1. Its base offset and leader epoch are left for
// the appender to stamp, as for every batch.
// REQUIRES: key is ConsensusKeyNoop or ConsensusKeyConf.
func BuildConsensus(key, value []byte, nowMs int64, zeroWidth bool) []byte {
	if !isConsensusKey(key) {
		panic("batch: BuildConsensus with a key that is not a consensus key")
	}
	b, err := NewBuilder(Options{})
	if err != nil {
		panic(err)
	}
	if err := b.AppendKV(nowMs, key, value); err != nil {
		panic(err)
	}
	out, err := b.Build()
	if err != nil {
		panic(err)
	}
	be := binary.BigEndian
	be.PutUint16(out[offAttributes:], be.Uint16(out[offAttributes:])|ControlBit)
	if zeroWidth {
		be.PutUint32(out[offLastOffsetDelta:], 0xffffffff)
	}
	be.PutUint32(out[offCRC:], Checksum(out))
	return out
}
