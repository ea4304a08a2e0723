// Package peerwire is the node-to-node replication protocol after the
// handshake (cluster/peerauth): consensus messages of every group, node
// liveness pings and partition-route announcements. It is a codec only.
//
// Every frame is a netio frame (u32 length, then the body) whose body
// starts with a kind byte. Big-endian; these layouts never change within
// Version.
//
//	kind 1  Messages   count u16, then count × message:
//	          msgLen u32, the encoded message (below), then the bytes of
//	          each of its entries (MsgApp), concatenated in order, each
//	          exactly its entry's Bytes long. A leader may send those bytes
//	          straight from segment files (sendfile), so they come last.
//	kind 2  Ping       node i32, meta_applied i64
//	kind 3  Routes     count u32, then count × route (below)
//	kind 4  Transfer   topic_id [16], partition i32, target i32: "move
//	          this partition's primary to target" (sent by the metadata
//	          primary to the partition's primary)
//	kind 5  Reassign   topic_id [16], partition i32, from i32, target
//	          u32 (bit i-1: node i): "take the next membership step of
//	          this partition towards target and tell node from where it
//	          stands" (metadata primary to the partition's primary)
//	kind 6  ReassignState  topic_id [16], partition i32, voters u32,
//	          learners u32, committed u8 (1: no change waits for its
//	          commit), entries_behind i64, bytes_behind i64 (the learner
//	          being caught up, 0 when none): the answer to Reassign
//	kind 7  Segment    group u64, from u8, to u8, term i32, base i64,
//	          last i64, last_term i32, file_bytes i64, pos i64, then the
//	          chunk: the bytes [pos, pos+chunk) of the primary's sealed
//	          segment file holding offsets base..last, whose last batch
//	          is of last_term; the chunk is the rest of the frame, at most
//	          SegmentChunkBytesMax, last so that it is sent from the
//	          segment file with sendfile (docs/design/moves.md)
//	kind 8  SegmentAck group u64, from u8, to u8, term i32, base i64,
//	          held i64 (the bytes of the segment the follower holds, all
//	          of them once adopted), status u8 (0 more, 1 adopted,
//	          2 refused: the primary falls back to appends)
//	kind 11 GroupsTopic  node i32: "create the consumer groups' internal
//	          topic" (a node that is not the metadata primary, to the
//	          metadata primary, at a group request made before the topic
//	          exists; node is the sender)
//	kind 12 Propose    id u64, node i32, then the command: an encoded
//	          metadata command (at most ProposeBytesMax bytes) that the
//	          sender asks the metadata primary to propose for it (only
//	          the ops the primary takes from peers: a partition primary's
//	          DeleteRecords)
//	kind 13 Proposed   id u64, status u8 (0 committed, 1 not the
//	          metadata primary, 2 refused, 3 failed), message_len u16,
//	          message: the answer to the Propose of that id
//
//	message: type u8, group u64, from u8, to u8, term i32, index i64,
//	         log_term i32, commit i64, flags u8 (1 reject, 2 transfer,
//	         4 quiesce, 8 conf, 16 base), hint i64, hint_term i32,
//	         entries u32, then entries × entry, snapshot_len u32,
//	         snapshot bytes, with flag 8 the message's conf (a MsgReset's
//	         configuration), and with flag 16 base i64 (a MsgReset's count
//	         of consensus entries below the new log start, which the
//	         follower's log needs to give records their user offsets)
//	entry:   base i64, last i64, term i32, bytes i32, kind u8, and for
//	         kind 2 (a configuration entry) its conf
//	conf:    voters u32, learners u32 (bit i-1 set: node i)
//
// The conf fields came with membership changes; every frame without a
// configuration (no kind-2 entry, no flag 8) is encoded exactly as
// before them.
//
//	route:   topic_id [16], partition i32, leader i32, term i32,
//	         in_sync u32 (bit i-1 set: node i is in sync)
package peerwire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/corestream/corestream/raftlite"
)

// Version is the replication protocol's version; the handshake compares
// server versions, which pin it.
const Version = 2

// Frame kinds.
const (
	KindMessages      byte = 1
	KindPing          byte = 2
	KindRoutes        byte = 3
	KindTransfer      byte = 4
	KindReassign      byte = 5
	KindReassignState byte = 6
	KindSegment       byte = 7
	KindSegmentAck    byte = 8
	KindTxnMarker     byte = 9
	KindTxnMarkerAck  byte = 10
	KindGroupsTopic   byte = 11
	KindPropose       byte = 12
	KindProposed      byte = 13
	KindEnds          byte = 14
	KindEndsAnswer    byte = 15
)

// Bounds a decoder enforces before it allocates.
const (
	// MessagesPerFrameMax bounds the messages of one frame.
	MessagesPerFrameMax = 1 << 16
	// EntriesPerMessageMax bounds the entries of one message.
	EntriesPerMessageMax = 1 << 16
	// SnapshotBytesMax bounds a metadata snapshot.
	SnapshotBytesMax = 256 << 20
	// SegmentChunkBytesMax bounds the chunk of one Segment frame, so a
	// large segment never holds the peer link for long.
	SegmentChunkBytesMax = 1 << 20
	// SegmentHeaderBytes is a Segment frame body before its chunk.
	SegmentHeaderBytes = 1 + 8 + 1 + 1 + 4 + 8 + 8 + 4 + 8 + 8
	// ProposeBytesMax bounds the command of one Propose frame.
	ProposeBytesMax = 64 << 10
	// ProposedMessageBytesMax bounds the message of a Proposed frame.
	ProposedMessageBytesMax = 1 << 10
	// RoutesPerFrameMax bounds one routes frame.
	RoutesPerFrameMax = 1 << 20
	// entryHeaderBytes is one entry's metadata (without a conf).
	entryHeaderBytes = 8 + 8 + 4 + 4 + 1
	// confBytes is one encoded configuration.
	confBytes = 4 + 4
	// messageFixedBytes is a message without entries and snapshot.
	messageFixedBytes = 1 + 8 + 1 + 1 + 4 + 8 + 4 + 8 + 1 + 8 + 4 + 4 + 4
	// RouteBytes is one encoded route.
	RouteBytes = 16 + 4 + 4 + 4 + 4
)

// ErrMalformed wraps every decoding error.
var ErrMalformed = errors.New("peerwire: malformed frame")

const (
	flagReject   = 1
	flagTransfer = 2
	flagQuiesce  = 4
	flagConf     = 8
	flagBase     = 16
)

// DataBytes is how many entry bytes follow message m on the wire.
func DataBytes(m *raftlite.Message) int64 {
	var n int64
	for _, e := range m.Entries {
		n += int64(e.Bytes)
	}
	return n
}

// FramedMessageBytes is how many bytes AppendFramedMessage appends for m.
func FramedMessageBytes(m *raftlite.Message, withData bool) int {
	n := 4 + messageFixedBytes + len(m.Entries)*entryHeaderBytes + len(m.Snapshot)
	for _, e := range m.Entries {
		if e.Kind == raftlite.EntryConfChange {
			n += confBytes
		}
	}
	if !m.Conf.IsZero() {
		n += confBytes
	}
	if m.Base != 0 {
		n += 8
	}
	if withData {
		for _, e := range m.Entries {
			n += len(e.Data)
		}
	}
	return n
}

// AppendMessage appends m's encoding (without its entries' bytes) to dst.
func AppendMessage(dst []byte, m *raftlite.Message) []byte {
	be := binary.BigEndian
	dst = append(dst, byte(m.Type))
	dst = be.AppendUint64(dst, uint64(m.Group))
	dst = append(dst, byte(m.From), byte(m.To))
	dst = be.AppendUint32(dst, uint32(m.Term))
	dst = be.AppendUint64(dst, uint64(m.Index))
	dst = be.AppendUint32(dst, uint32(m.LogTerm))
	dst = be.AppendUint64(dst, uint64(m.Commit))
	var f byte
	if m.Reject {
		f |= flagReject
	}
	if m.Transfer {
		f |= flagTransfer
	}
	if m.Quiesce {
		f |= flagQuiesce
	}
	if !m.Conf.IsZero() {
		f |= flagConf
	}
	if m.Base != 0 {
		f |= flagBase
	}
	dst = append(dst, f)
	dst = be.AppendUint64(dst, uint64(m.Hint))
	dst = be.AppendUint32(dst, uint32(m.HintTerm))
	dst = be.AppendUint32(dst, uint32(len(m.Entries)))
	for _, e := range m.Entries {
		dst = be.AppendUint64(dst, uint64(e.Base))
		dst = be.AppendUint64(dst, uint64(e.Last))
		dst = be.AppendUint32(dst, uint32(e.Term))
		dst = be.AppendUint32(dst, uint32(e.Bytes))
		dst = append(dst, byte(e.Kind))
		if e.Kind == raftlite.EntryConfChange {
			dst = appendConf(dst, e.Conf)
		}
	}
	dst = be.AppendUint32(dst, uint32(len(m.Snapshot)))
	dst = append(dst, m.Snapshot...)
	if !m.Conf.IsZero() {
		dst = appendConf(dst, m.Conf)
	}
	if m.Base != 0 {
		dst = be.AppendUint64(dst, uint64(m.Base))
	}
	return dst
}

func appendConf(dst []byte, c raftlite.Membership) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Voters))
	return binary.BigEndian.AppendUint32(dst, uint32(c.Learners))
}

// conf reads a configuration; a zero one is refused (the encoder writes
// none for it), so that every accepted frame encodes back to itself.
func (r *reader) conf() raftlite.Membership {
	c := raftlite.Membership{Voters: raftlite.ReplicaSet(r.u32()), Learners: raftlite.ReplicaSet(r.u32())}
	if r.err == nil && c.IsZero() {
		r.fail("an empty configuration")
	}
	return c
}

// AppendMessagesHeader starts a Messages frame body of count messages.
func AppendMessagesHeader(dst []byte, count int) []byte {
	dst = append(dst, KindMessages)
	return binary.BigEndian.AppendUint16(dst, uint16(count))
}

// AppendFramedMessage appends one message of a Messages frame: its length,
// its encoding and, when data is not nil, its entries' bytes (callers that
// send the bytes from files append only the message and add the files
// after it).
func AppendFramedMessage(dst []byte, m *raftlite.Message, withData bool) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = AppendMessage(dst, m)
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	if withData {
		for _, e := range m.Entries {
			dst = append(dst, e.Data...)
		}
	}
	return dst
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.fail("need %d bytes, have %d", n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// DecodeMessage decodes one message encoding (without entry bytes).
// The returned message's Snapshot aliases b.
func DecodeMessage(b []byte) (raftlite.Message, error) {
	r := &reader{b: b}
	m := r.message()
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after a message", len(r.b))
	}
	return m, r.err
}

func (r *reader) message() raftlite.Message {
	var m raftlite.Message
	m.Type = raftlite.MsgType(r.u8())
	m.Group = raftlite.GroupID(r.u64())
	m.From, m.To = raftlite.NodeID(r.u8()), raftlite.NodeID(r.u8())
	m.Term = int32(r.u32())
	m.Index = int64(r.u64())
	m.LogTerm = int32(r.u32())
	m.Commit = int64(r.u64())
	f := r.u8()
	if f&^(flagReject|flagTransfer|flagQuiesce|flagConf|flagBase) != 0 {
		r.fail("unknown message flags %#x", f)
	}
	m.Reject, m.Transfer, m.Quiesce = f&flagReject != 0, f&flagTransfer != 0, f&flagQuiesce != 0
	m.Hint = int64(r.u64())
	m.HintTerm = int32(r.u32())
	n := r.u32()
	if n > EntriesPerMessageMax || int(n)*entryHeaderBytes > len(r.b) {
		r.fail("%d entries", n)
		return m
	}
	if n > 0 {
		m.Entries = make([]raftlite.Entry, n)
	}
	for i := range m.Entries {
		e := &m.Entries[i]
		e.Base, e.Last = int64(r.u64()), int64(r.u64())
		e.Term, e.Bytes = int32(r.u32()), int32(r.u32())
		e.Kind = raftlite.EntryKind(r.u8())
		if e.Kind == raftlite.EntryConfChange {
			e.Conf = r.conf()
		}
		if r.err == nil && (e.Bytes < 0 || e.Last < e.Base) {
			r.fail("entry [%d, %d] of %d bytes", e.Base, e.Last, e.Bytes)
		}
	}
	sn := r.u32()
	if sn > SnapshotBytesMax {
		r.fail("snapshot of %d bytes", sn)
		return m
	}
	if sn > 0 {
		m.Snapshot = r.take(int(sn))
	}
	if f&flagConf != 0 {
		m.Conf = r.conf()
	}
	if f&flagBase != 0 {
		if m.Base = int64(r.u64()); r.err == nil && m.Base < 0 {
			r.fail("base %d", m.Base)
		}
	}
	return m
}

// DecodeMessages decodes a Messages frame body (after its kind byte was
// checked by the caller or not: both work) and calls fn for each message
// with its entries' Data aliasing body. fn must copy what it keeps.
func DecodeMessages(body []byte, fn func(m *raftlite.Message)) error {
	r := &reader{b: body}
	if k := r.u8(); k != KindMessages {
		r.fail("kind %d is not Messages", k)
		return r.err
	}
	count := r.u16()
	msgs := make([]raftlite.Message, 0, count)
	for i := 0; i < int(count) && r.err == nil; i++ {
		l := r.u32()
		enc := r.take(int(l))
		if r.err != nil {
			break
		}
		m, err := DecodeMessage(enc)
		if err != nil {
			return err
		}
		for j := range m.Entries {
			m.Entries[j].Data = r.take(int(m.Entries[j].Bytes))
		}
		msgs = append(msgs, m)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after %d messages", len(r.b), count)
	}
	if r.err != nil {
		return r.err
	}
	for i := range msgs {
		fn(&msgs[i])
	}
	return nil
}

// Ping is a node's liveness beat.
type Ping struct {
	Node int32
	// MetaApplied is the metadata offset the sender has applied.
	MetaApplied int64
}

// AppendPing appends a Ping frame body.
func AppendPing(dst []byte, p Ping) []byte {
	dst = append(dst, KindPing)
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.Node))
	return binary.BigEndian.AppendUint64(dst, uint64(p.MetaApplied))
}

// DecodePing decodes a Ping frame body.
func DecodePing(b []byte) (Ping, error) {
	r := &reader{b: b}
	if k := r.u8(); k != KindPing {
		r.fail("kind %d is not Ping", k)
	}
	p := Ping{Node: int32(r.u32()), MetaApplied: int64(r.u64())}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after a ping", len(r.b))
	}
	return p, r.err
}

// Route announces a partition's primary.
type Route struct {
	TopicID   [16]byte
	Partition int32
	Leader    int32
	Term      int32
	// InSync has bit i-1 set when node i is in sync.
	InSync uint32
}

// AppendRoutes appends a Routes frame body.
func AppendRoutes(dst []byte, rs []Route) []byte {
	dst = append(dst, KindRoutes)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(rs)))
	for _, r := range rs {
		dst = append(dst, r.TopicID[:]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Partition))
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Leader))
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Term))
		dst = binary.BigEndian.AppendUint32(dst, r.InSync)
	}
	return dst
}

// DecodeRoutes decodes a Routes frame body.
func DecodeRoutes(b []byte) ([]Route, error) {
	r := &reader{b: b}
	if k := r.u8(); k != KindRoutes {
		r.fail("kind %d is not Routes", k)
		return nil, r.err
	}
	n := r.u32()
	if n > RoutesPerFrameMax || int(n)*RouteBytes != len(r.b) {
		r.fail("%d routes in %d bytes", n, len(r.b))
		return nil, r.err
	}
	out := make([]Route, n)
	for i := range out {
		copy(out[i].TopicID[:], r.take(16))
		out[i].Partition = int32(r.u32())
		out[i].Leader = int32(r.u32())
		out[i].Term = int32(r.u32())
		out[i].InSync = r.u32()
	}
	return out, r.err
}

// Transfer asks a partition's primary to hand leadership to Target.
type Transfer struct {
	TopicID   [16]byte
	Partition int32
	Target    int32
}

// AppendTransfer appends a Transfer frame body.
func AppendTransfer(dst []byte, t Transfer) []byte {
	dst = append(dst, KindTransfer)
	dst = append(dst, t.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(t.Partition))
	return binary.BigEndian.AppendUint32(dst, uint32(t.Target))
}

// DecodeTransfer decodes a Transfer frame body.
func DecodeTransfer(b []byte) (Transfer, error) {
	r := &reader{b: b}
	var t Transfer
	if k := r.u8(); k != KindTransfer {
		r.fail("kind %d is not Transfer", k)
		return t, r.err
	}
	copy(t.TopicID[:], r.take(16))
	t.Partition = int32(r.u32())
	t.Target = int32(r.u32())
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after a transfer", len(r.b))
	}
	return t, r.err
}

// GroupsTopic asks the metadata primary to create the consumer groups'
// internal topic, which only it can propose; Node is the asking node.
type GroupsTopic struct {
	Node int32
}

// AppendGroupsTopic appends a GroupsTopic frame body.
func AppendGroupsTopic(dst []byte, g GroupsTopic) []byte {
	dst = append(dst, KindGroupsTopic)
	return binary.BigEndian.AppendUint32(dst, uint32(g.Node))
}

// DecodeGroupsTopic decodes a GroupsTopic frame body.
func DecodeGroupsTopic(b []byte) (GroupsTopic, error) {
	r := &reader{b: b}
	var g GroupsTopic
	if k := r.u8(); k != KindGroupsTopic {
		r.fail("kind %d is not GroupsTopic", k)
		return g, r.err
	}
	g.Node = int32(r.u32())
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after a groups-topic request", len(r.b))
	}
	return g, r.err
}

// Propose asks the metadata primary to propose Command (an encoded
// metadata command) for node Node; ID pairs it with its answer.
type Propose struct {
	ID      uint64
	Node    int32
	Command []byte
}

// AppendPropose appends a Propose frame body.
func AppendPropose(dst []byte, m Propose) []byte {
	dst = append(dst, KindPropose)
	dst = binary.BigEndian.AppendUint64(dst, m.ID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Node))
	return append(dst, m.Command...)
}

// DecodePropose decodes a Propose frame body; Command aliases b.
func DecodePropose(b []byte) (Propose, error) {
	r := &reader{b: b}
	var m Propose
	if k := r.u8(); k != KindPropose {
		r.fail("kind %d is not Propose", k)
		return m, r.err
	}
	m.ID = r.u64()
	m.Node = int32(r.u32())
	if r.err == nil && (len(r.b) == 0 || len(r.b) > ProposeBytesMax) {
		r.fail("a proposed command of %d bytes", len(r.b))
	}
	m.Command = r.b
	return m, r.err
}

// Statuses of a Proposed frame.
const (
	ProposedCommitted  byte = 0
	ProposedNotPrimary byte = 1
	ProposedRefused    byte = 2
	ProposedFailed     byte = 3
)

// Proposed answers the Propose of ID.
type Proposed struct {
	ID      uint64
	Status  byte
	Message string
}

// AppendProposed appends a Proposed frame body; a message over
// ProposedMessageBytesMax is cut there.
func AppendProposed(dst []byte, m Proposed) []byte {
	msg := m.Message
	if len(msg) > ProposedMessageBytesMax {
		msg = msg[:ProposedMessageBytesMax]
	}
	dst = append(dst, KindProposed)
	dst = binary.BigEndian.AppendUint64(dst, m.ID)
	dst = append(dst, m.Status)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...)
}

// DecodeProposed decodes a Proposed frame body.
func DecodeProposed(b []byte) (Proposed, error) {
	r := &reader{b: b}
	var m Proposed
	if k := r.u8(); k != KindProposed {
		r.fail("kind %d is not Proposed", k)
		return m, r.err
	}
	m.ID = r.u64()
	m.Status = r.u8()
	n := r.u16()
	if r.err == nil && (m.Status > ProposedFailed || int(n) > ProposedMessageBytesMax || int(n) != len(r.b)) {
		r.fail("status %d, a message of %d bytes in %d", m.Status, n, len(r.b))
	}
	if r.err == nil {
		m.Message = string(r.b)
	}
	return m, r.err
}

// Reassign asks a partition's primary for the next membership step of a
// replica move towards Target, and for its state (sent to From).
type Reassign struct {
	TopicID   [16]byte
	Partition int32
	From      int32
	Target    raftlite.ReplicaSet
}

// AppendReassign appends a Reassign frame body.
func AppendReassign(dst []byte, m Reassign) []byte {
	dst = append(dst, KindReassign)
	dst = append(dst, m.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Partition))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.From))
	return binary.BigEndian.AppendUint32(dst, uint32(m.Target))
}

// DecodeReassign decodes a Reassign frame body.
func DecodeReassign(b []byte) (Reassign, error) {
	r := &reader{b: b}
	var m Reassign
	if k := r.u8(); k != KindReassign {
		r.fail("kind %d is not Reassign", k)
		return m, r.err
	}
	copy(m.TopicID[:], r.take(16))
	m.Partition = int32(r.u32())
	m.From = int32(r.u32())
	m.Target = raftlite.ReplicaSet(r.u32())
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after a reassign", len(r.b))
	}
	return m, r.err
}

// ReassignState is a partition primary's answer to Reassign: the
// configuration in force, whether it is committed, and how far the
// learner being caught up is behind.
type ReassignState struct {
	TopicID       [16]byte
	Partition     int32
	Conf          raftlite.Membership
	Committed     bool
	EntriesBehind int64
	BytesBehind   int64
}

// AppendReassignState appends a ReassignState frame body.
func AppendReassignState(dst []byte, m ReassignState) []byte {
	dst = append(dst, KindReassignState)
	dst = append(dst, m.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Partition))
	dst = appendConf(dst, m.Conf)
	c := byte(0)
	if m.Committed {
		c = 1
	}
	dst = append(dst, c)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.EntriesBehind))
	return binary.BigEndian.AppendUint64(dst, uint64(m.BytesBehind))
}

// DecodeReassignState decodes a ReassignState frame body.
func DecodeReassignState(b []byte) (ReassignState, error) {
	r := &reader{b: b}
	var m ReassignState
	if k := r.u8(); k != KindReassignState {
		r.fail("kind %d is not ReassignState", k)
		return m, r.err
	}
	copy(m.TopicID[:], r.take(16))
	m.Partition = int32(r.u32())
	m.Conf = r.conf()
	switch c := r.u8(); c {
	case 0, 1:
		m.Committed = c == 1
	default:
		r.fail("committed flag %d", c)
	}
	m.EntriesBehind = int64(r.u64())
	m.BytesBehind = int64(r.u64())
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after a reassign state", len(r.b))
	}
	return m, r.err
}

// Segment is one chunk of a sealed segment sent whole to a follower far
// behind; Chunk is what follows the header on the wire (nil when the
// sender appends it from the file).
type Segment struct {
	Group     raftlite.GroupID
	From, To  raftlite.NodeID
	Term      int32
	Base      int64
	Last      int64
	LastTerm  int32
	FileBytes int64
	Pos       int64
	Chunk     []byte
}

// AppendSegmentHeader appends a Segment frame body up to its chunk, which
// is chunkBytes long and follows it (appended by the caller, or sent from
// the file).
func AppendSegmentHeader(dst []byte, m *Segment) []byte {
	dst = append(dst, KindSegment)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Group))
	dst = append(dst, byte(m.From), byte(m.To))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Term))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Base))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Last))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.LastTerm))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.FileBytes))
	return binary.BigEndian.AppendUint64(dst, uint64(m.Pos))
}

// DecodeSegment decodes a Segment frame body; Chunk aliases b.
func DecodeSegment(b []byte) (Segment, error) {
	r := &reader{b: b}
	var m Segment
	if k := r.u8(); k != KindSegment {
		r.fail("kind %d is not Segment", k)
		return m, r.err
	}
	m.Group = raftlite.GroupID(r.u64())
	m.From, m.To = raftlite.NodeID(r.u8()), raftlite.NodeID(r.u8())
	m.Term = int32(r.u32())
	m.Base, m.Last = int64(r.u64()), int64(r.u64())
	m.LastTerm = int32(r.u32())
	m.FileBytes, m.Pos = int64(r.u64()), int64(r.u64())
	if r.err != nil {
		return m, r.err
	}
	switch n := int64(len(r.b)); {
	case n > SegmentChunkBytesMax:
		r.fail("segment chunk of %d bytes, at most %d", n, SegmentChunkBytesMax)
	case m.Base < 0 || m.Last < m.Base:
		r.fail("segment offsets %d..%d", m.Base, m.Last)
	case m.Pos < 0 || m.FileBytes < 0 || m.Pos+n > m.FileBytes:
		r.fail("segment chunk [%d, %d) outside a file of %d bytes", m.Pos, m.Pos+n, m.FileBytes)
	}
	m.Chunk = r.b
	return m, r.err
}

// Segment statuses of a SegmentAck.
const (
	SegmentMore    byte = 0
	SegmentAdopted byte = 1
	SegmentRefused byte = 2
)

// SegmentAck is a follower's answer to a Segment chunk.
type SegmentAck struct {
	Group    raftlite.GroupID
	From, To raftlite.NodeID
	Term     int32
	Base     int64
	Held     int64
	Status   byte
}

// AppendSegmentAck appends a SegmentAck frame body.
func AppendSegmentAck(dst []byte, m SegmentAck) []byte {
	dst = append(dst, KindSegmentAck)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Group))
	dst = append(dst, byte(m.From), byte(m.To))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Term))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Base))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Held))
	return append(dst, m.Status)
}

// DecodeSegmentAck decodes a SegmentAck frame body.
func DecodeSegmentAck(b []byte) (SegmentAck, error) {
	r := &reader{b: b}
	var m SegmentAck
	if k := r.u8(); k != KindSegmentAck {
		r.fail("kind %d is not SegmentAck", k)
		return m, r.err
	}
	m.Group = raftlite.GroupID(r.u64())
	m.From, m.To = raftlite.NodeID(r.u8()), raftlite.NodeID(r.u8())
	m.Term = int32(r.u32())
	m.Base, m.Held = int64(r.u64()), int64(r.u64())
	m.Status = r.u8()
	if r.err == nil && m.Status > SegmentRefused {
		r.fail("segment status %d", m.Status)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after a segment ack", len(r.b))
	}
	return m, r.err
}
