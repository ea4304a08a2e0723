package groups

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The coordinator's log records. Every change that must survive a
// failover is one keyed record; the newest record of a key is the whole
// state it names, and a record with a nil value (a tombstone) says the
// key is gone, so a compacted log (the last record per key) replays to
// the same state as the whole log.
//
//	key                                     value (version 1)
//	group/<group>                           groupValue: generation, protocol type,
//	                                        protocol, leader, members
//	offset/<group>/<topic>/<partition>      offsetValue: offset, metadata
//	txnoffset/<group>/<producer id>/<topic>/<partition>
//	                                        offsetValue: an offset staged by
//	                                        the producer's open transaction
//	                                        (TxnOffsetCommit), until its
//	                                        marker writes the tombstone
//
// Group and topic names hold no '/' (the naming rule allows letters,
// digits and "._-" only), so a key splits without escaping.
//
// Value layout, never to change for version 1 (integers big-endian,
// strings and byte slices as a uvarint length then the bytes):
//
//	group:  version(1) generation(i32) protocolType protocol leader
//	        members(uvarint) { id instance clientID host sessionMs(i64)
//	        rebalanceMs(i64) metadata assignment }
//	offset: version(1) topicID(16 bytes) offset(i64) metadata
//
// The record batch that carries a record has its own CRC-32C, so the
// value carries a version and length checks, not a second checksum.

// recordVersion is the value layout written; a decoder refuses others.
const recordVersion = 1

// Key prefixes, and the load marker's key.
const (
	groupKeyPrefix  = "group/"
	offsetKeyPrefix = "offset/"
	txnKeyPrefix    = "txnoffset/"
	loadKey         = "load"
)

// LoadMarker is the record a new coordinator writes before it replays
// its log: once the marker is durable, every record an earlier
// coordinator had answered lies below it, so reading up to it reads
// them all. Replay skips it.
func LoadMarker() Record { return Record{Key: []byte(loadKey), Value: []byte{recordVersion}} }

// ErrCorruptRecord: a record the coordinator cannot read (unknown key
// kind, unknown version, truncated or trailing bytes). Replay stops at
// it: a log that holds one was not written by this coordinator.
var ErrCorruptRecord = errors.New("groups: corrupt coordinator record")

// Record is one change to persist: Key names what it describes, Value
// is its newest state, nil for a tombstone.
type Record struct {
	Key, Value []byte
}

// IsTombstone says whether r deletes its key.
func (r Record) IsTombstone() bool { return r.Value == nil }

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Offset is a committed offset with the metadata string its committer
// stored with it.
type Offset struct {
	TopicPartition
	// TopicID is the id of the topic the offset was committed for (zero:
	// unknown): a reader compares it with the topic's id now, so that a
	// topic deleted and created again under its name does not inherit
	// the old one's offsets. Opaque here.
	TopicID  [16]byte
	Offset   int64
	Metadata string
}

// GroupKey is the key of a group's metadata record.
func GroupKey(group string) []byte { return []byte(groupKeyPrefix + group) }

// OffsetKey is the key of a group's committed offset of one partition.
func OffsetKey(group string, tp TopicPartition) []byte {
	return []byte(offsetKeyPrefix + group + "/" + tp.Topic + "/" + strconv.FormatInt(int64(tp.Partition), 10))
}

// TxnOffsetKey is the key of an offset of group that producer pid's
// open transaction staged for one partition.
func TxnOffsetKey(group string, pid int64, tp TopicPartition) []byte {
	return []byte(txnKeyPrefix + group + "/" + strconv.FormatInt(pid, 10) + "/" + tp.Topic + "/" + strconv.FormatInt(int64(tp.Partition), 10))
}

// parseTxnOffsetKey splits a staged offset's key.
func parseTxnOffsetKey(k string) (group string, pid int64, tp TopicPartition, err error) {
	parts := strings.Split(strings.TrimPrefix(k, txnKeyPrefix), "/")
	bad := func(why string) error {
		return fmt.Errorf("%w: staged offset key %q %s", ErrCorruptRecord, k, why)
	}
	if len(parts) != 4 || parts[0] == "" || parts[2] == "" {
		return "", 0, tp, bad("is not txnoffset/<group>/<producer id>/<topic>/<partition>")
	}
	pid, perr := strconv.ParseInt(parts[1], 10, 64)
	if perr != nil || pid < 0 {
		return "", 0, tp, bad("has producer id " + strconv.Quote(parts[1]))
	}
	p, perr := strconv.ParseInt(parts[3], 10, 32)
	if perr != nil || p < 0 {
		return "", 0, tp, bad("has partition " + strconv.Quote(parts[3]))
	}
	return parts[0], pid, TopicPartition{Topic: parts[2], Partition: int32(p)}, nil
}

// GroupOfKey is the group a record's key belongs to ("" for a key that
// is not the coordinator's): the node places a record in the partition
// of its group.
func GroupOfKey(key []byte) string {
	k := string(key)
	switch {
	case strings.HasPrefix(k, groupKeyPrefix):
		return k[len(groupKeyPrefix):]
	case strings.HasPrefix(k, offsetKeyPrefix), strings.HasPrefix(k, txnKeyPrefix):
		rest := k[strings.IndexByte(k, '/')+1:]
		if i := strings.IndexByte(rest, '/'); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

// parseOffsetKey splits an offset key.
func parseOffsetKey(k string) (group string, tp TopicPartition, err error) {
	rest := strings.TrimPrefix(k, offsetKeyPrefix)
	i, j := strings.IndexByte(rest, '/'), strings.LastIndexByte(rest, '/')
	if i <= 0 || j <= i+1 || j == len(rest)-1 {
		return "", tp, fmt.Errorf("%w: offset key %q is not offset/<group>/<topic>/<partition>", ErrCorruptRecord, k)
	}
	p, perr := strconv.ParseInt(rest[j+1:], 10, 32)
	if perr != nil || p < 0 {
		return "", tp, fmt.Errorf("%w: offset key %q has partition %q", ErrCorruptRecord, k, rest[j+1:])
	}
	return rest[:i], TopicPartition{Topic: rest[i+1 : j], Partition: int32(p)}, nil
}

// groupImage is what a group record holds: the state a coordinator
// rebuilds a group from after a failover.
type groupImage struct {
	generation                     int32
	protocolType, protocol, leader string
	members                        []memberImage
}

// memberImage is one member in a group record: the metadata of the
// group's protocol only (a member that rejoins sends its protocols
// again).
type memberImage struct {
	id, instance, clientID, host string
	session, rebalance           time.Duration
	metadata, assignment         []byte
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encodeGroup is a group record's value.
func encodeGroup(im groupImage) []byte {
	b := []byte{recordVersion}
	b = binary.BigEndian.AppendUint32(b, uint32(im.generation))
	b = appendString(b, im.protocolType)
	b = appendString(b, im.protocol)
	b = appendString(b, im.leader)
	b = binary.AppendUvarint(b, uint64(len(im.members)))
	for _, m := range im.members {
		b = appendString(b, m.id)
		b = appendString(b, m.instance)
		b = appendString(b, m.clientID)
		b = appendString(b, m.host)
		b = binary.BigEndian.AppendUint64(b, uint64(m.session.Milliseconds()))
		b = binary.BigEndian.AppendUint64(b, uint64(m.rebalance.Milliseconds()))
		b = appendBytes(b, m.metadata)
		b = appendBytes(b, m.assignment)
	}
	return b
}

// encodeOffset is an offset record's value.
func encodeOffset(o Offset) []byte {
	b := []byte{recordVersion}
	b = append(b, o.TopicID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(o.Offset))
	return appendString(b, o.Metadata)
}

// reader decodes a value; the first failure sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated at %s", ErrCorruptRecord, what)
	}
}

func (r *reader) u32(what string) uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64(what string) uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	v := append([]byte{}, r.b[:n]...)
	r.b = r.b[n:]
	return v
}

// millis reads a duration in milliseconds; one a time.Duration cannot
// hold is corrupt.
func (r *reader) millis(what string) time.Duration {
	v := r.u64(what)
	if v > uint64(math.MaxInt64/int64(time.Millisecond)) {
		if r.err == nil {
			r.err = fmt.Errorf("%w: %s of %d ms", ErrCorruptRecord, what, v)
		}
		return 0
	}
	return time.Duration(v) * time.Millisecond
}

func (r *reader) str(what string) string { return string(r.bytes(what)) }

func (r *reader) version() {
	if len(r.b) == 0 {
		r.fail("version")
		return
	}
	if r.b[0] != recordVersion {
		r.err = fmt.Errorf("%w: value version %d, this coordinator reads %d", ErrCorruptRecord, r.b[0], recordVersion)
		return
	}
	r.b = r.b[1:]
}

func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrCorruptRecord, len(r.b))
	}
	return r.err
}

// decodeGroup reads a group record's value.
func decodeGroup(v []byte) (groupImage, error) {
	r := &reader{b: v}
	r.version()
	var im groupImage
	im.generation = int32(r.u32("generation"))
	im.protocolType = r.str("protocol type")
	im.protocol = r.str("protocol")
	im.leader = r.str("leader")
	n := r.uvarint("member count")
	// Each member takes at least 22 bytes (six empty lengths, two
	// int64s), so a count past what the value can hold is corrupt, not
	// an allocation to make.
	if n > uint64(len(r.b))/22 {
		r.fail("member count")
		return im, r.err
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		var m memberImage
		m.id, m.instance, m.clientID, m.host = r.str("member id"), r.str("instance id"), r.str("client id"), r.str("host")
		m.session, m.rebalance = r.millis("session"), r.millis("rebalance")
		m.metadata, m.assignment = r.bytes("metadata"), r.bytes("assignment")
		im.members = append(im.members, m)
	}
	return im, r.end()
}

// decodeOffset reads an offset record's value into o (its partition
// comes from the key).
func decodeOffset(v []byte, o *Offset) error {
	r := &reader{b: v}
	r.version()
	if r.err == nil && len(r.b) < len(o.TopicID) {
		r.fail("topic id")
	}
	if r.err == nil {
		copy(o.TopicID[:], r.b)
		r.b = r.b[len(o.TopicID):]
	}
	o.Offset = int64(r.u64("offset"))
	o.Metadata = r.str("metadata")
	return r.end()
}
