package txns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The coordinator's log records: every transition is one keyed record,
// the newest record of a key the whole state of its transactional id, a
// nil value (a tombstone) its removal. A compacted log replays to the
// same state as the whole log.
//
//	key           value (version 1)
//	txn/<id>      version(1) producerID(i64) epoch(i16) prevEpoch(i16)
//	              timeoutMs(i32) state(i8) flags(u8: 1 = version 2)
//	              startMs(i64) updateMs(i64)
//	              partitions(uvarint) { topic partition(i32) }
//
// Integers are big-endian, strings a uvarint length then the bytes. A
// transactional id is any string (Kafka's rule), so it is the key's whole
// rest. The record batch that carries a record has its own CRC-32C.

const (
	recordVersion = 1
	keyPrefix     = "txn/"
	flagVersion2  = 1
)

// ErrCorruptRecord: a record this coordinator cannot read.
var ErrCorruptRecord = errors.New("txns: corrupt coordinator record")

// Record is one persisted change.
type Record struct {
	Key, Value []byte
}

// Record is tr's record.
func (tr *Transition) Record() Record {
	key := []byte(keyPrefix + tr.Next.ID)
	if tr.Delete {
		return Record{Key: key}
	}
	return Record{Key: key, Value: encodeTxn(tr.Next)}
}

func encodeTxn(t *Txn) []byte {
	be := binary.BigEndian
	b := []byte{recordVersion}
	b = be.AppendUint64(b, uint64(t.ProducerID))
	b = be.AppendUint16(b, uint16(t.Epoch))
	b = be.AppendUint16(b, uint16(t.PrevEpoch))
	b = be.AppendUint32(b, uint32(t.TimeoutMs))
	b = append(b, byte(t.State))
	var flags byte
	if t.Version2 {
		flags |= flagVersion2
	}
	b = append(b, flags)
	b = be.AppendUint64(b, uint64(t.StartMs))
	b = be.AppendUint64(b, uint64(t.UpdateMs))
	b = binary.AppendUvarint(b, uint64(len(t.Partitions)))
	for _, p := range t.Partitions {
		b = binary.AppendUvarint(b, uint64(len(p.Topic)))
		b = append(b, p.Topic...)
		b = be.AppendUint32(b, uint32(p.Partition))
	}
	return b
}

// DecodeRecord reads a record: the id it names and its state (nil for a
// tombstone).
func DecodeRecord(r Record) (id string, t *Txn, err error) {
	id, ok := strings.CutPrefix(string(r.Key), keyPrefix)
	if !ok {
		return "", nil, fmt.Errorf("%w: key %q", ErrCorruptRecord, r.Key)
	}
	if r.Value == nil {
		return id, nil, nil
	}
	d := decoder{b: r.Value}
	if v := d.u8(); v != recordVersion {
		return id, nil, fmt.Errorf("%w: %q: value version %d", ErrCorruptRecord, id, v)
	}
	t = &Txn{ID: id}
	t.ProducerID = int64(d.u64())
	t.Epoch = int16(d.u16())
	t.PrevEpoch = int16(d.u16())
	t.TimeoutMs = int32(d.u32())
	t.State = State(d.u8())
	t.Version2 = d.u8()&flagVersion2 != 0
	t.StartMs = int64(d.u64())
	t.UpdateMs = int64(d.u64())
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each partition takes bytes: a bound before the allocation
		return id, nil, fmt.Errorf("%w: %q: %d partitions in %d bytes", ErrCorruptRecord, id, n, len(d.b))
	}
	for range n {
		topic := d.str()
		t.Partitions = append(t.Partitions, Partition{Topic: topic, Partition: int32(d.u32())})
	}
	if d.err || len(d.b) != 0 || t.State > Dead || t.State < Empty {
		return id, nil, fmt.Errorf("%w: %q: a truncated value, trailing bytes or an unknown state", ErrCorruptRecord, id)
	}
	return id, t, nil
}

// Replay applies persisted records, in log order, to a coordinator that
// was just Reset.
func (c *Coordinator) Replay(r Record) error {
	id, t, err := DecodeRecord(r)
	if err != nil {
		return err
	}
	if t == nil {
		delete(c.ids, id)
		return nil
	}
	c.ids[id] = t
	return nil
}

// decoder reads a value, latching the first short read.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) take(n int) []byte {
	if d.err || len(d.b) < n {
		d.err = true
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u8() byte    { return d.take(1)[0] }
func (d *decoder) u16() uint16 { return binary.BigEndian.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { return binary.BigEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.BigEndian.Uint64(d.take(8)) }

func (d *decoder) uvarint() uint64 {
	if d.err {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	return string(d.take(int(n)))
}
