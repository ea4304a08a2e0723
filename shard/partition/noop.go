package partition

import (
	"encoding/binary"

	"github.com/corestream/corestream/segment/batch"
)

// noopBatch is the one-record control batch a new primary appends so that
// entries of earlier terms can commit (raftlite's EntryLeaderNoop). Its
// record carries Kafka's control-record key (version 0, type -1: none of
// Kafka's transaction markers); consumers skip control batches.
func noopBatch(nowMs int64) []byte {
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		panic(err)
	}
	key := []byte{0, 0, 0xff, 0xff}
	if err := b.AppendKV(nowMs, key, nil); err != nil {
		panic(err)
	}
	out, err := b.Build()
	if err != nil {
		panic(err)
	}
	const offAttributes, offCRC = 21, 17
	attrs := binary.BigEndian.Uint16(out[offAttributes:])
	binary.BigEndian.PutUint16(out[offAttributes:], attrs|batch.ControlBit)
	binary.BigEndian.PutUint32(out[offCRC:], batch.Checksum(out))
	return out
}
