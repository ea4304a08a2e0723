package peerwire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/corestream/corestream/raftlite"
)

func sampleMessages() []raftlite.Message {
	return []raftlite.Message{
		{Type: raftlite.MsgHeartbeat, Group: 1 << 60, From: 1, To: 32, Term: 7, Commit: 99, Quiesce: true},
		{Type: raftlite.MsgApp, Group: 42, From: 2, To: 3, Term: 3, Index: 10, LogTerm: 2, Commit: 9,
			Entries: []raftlite.Entry{
				{Base: 11, Last: 14, Term: 3, Bytes: 5, Data: []byte("hello")},
				{Base: 15, Last: 15, Term: 3, Bytes: 3, Kind: raftlite.EntryLeaderNoop, Data: []byte("abc")},
			}},
		{Type: raftlite.MsgAppResp, Group: 42, From: 3, To: 2, Term: 3, Index: 10, Reject: true, Hint: 8, HintTerm: 2},
		{Type: raftlite.MsgVote, Group: 5, From: 1, To: 2, Term: 4, Index: -1, Transfer: true},
		{Type: raftlite.MsgReset, Group: 0, From: 1, To: 2, Term: 4, Index: 100, LogTerm: 3, Snapshot: []byte("snap")},
		// Membership changes: a configuration entry between data, and a
		// reset that carries the configuration at its base.
		{Type: raftlite.MsgApp, Group: 42, From: 2, To: 4, Term: 5, Index: 15, LogTerm: 3, Commit: 15,
			Entries: []raftlite.Entry{
				{Base: 16, Last: 16, Term: 5, Bytes: 2, Kind: raftlite.EntryConfChange, Data: []byte("cc"),
					Conf: raftlite.Membership{Voters: raftlite.NewReplicaSet(1, 2, 3), Learners: raftlite.NewReplicaSet(32)}},
				{Base: 17, Last: 18, Term: 5, Bytes: 1, Data: []byte("d")},
			}},
		{Type: raftlite.MsgReset, Group: 7, From: 1, To: 4, Term: 6, Index: 200, LogTerm: 5, Commit: 210,
			Conf: raftlite.Membership{Voters: raftlite.NewReplicaSet(1, 2, 4)}},
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	msgs := sampleMessages()
	body := AppendMessagesHeader(nil, len(msgs))
	for i := range msgs {
		for _, data := range []bool{false, true} {
			if got, want := len(AppendFramedMessage(nil, &msgs[i], data)), FramedMessageBytes(&msgs[i], data); got != want {
				t.Fatalf("message %d (data %v): FramedMessageBytes %d, appended %d", i, data, want, got)
			}
		}
		body = AppendFramedMessage(body, &msgs[i], true)
	}
	var got []raftlite.Message
	if err := DecodeMessages(body, func(m *raftlite.Message) { got = append(got, *m) }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, msgs) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, msgs)
	}
	// Every truncation is refused, never a panic.
	for i := 0; i < len(body); i++ {
		if err := DecodeMessages(body[:i], func(*raftlite.Message) {}); err == nil {
			t.Fatalf("truncated at %d accepted", i)
		}
	}
	if err := DecodeMessages(append(body, 0), func(*raftlite.Message) {}); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

// TestConfFraming pins where the conf fields go: a frame without a
// configuration is byte for byte what it was before them, a zero
// configuration under flag 8 is refused, and the sizes add up.
func TestConfFraming(t *testing.T) {
	plain := raftlite.Message{Type: raftlite.MsgApp, Group: 1, From: 1, To: 2, Term: 1,
		Entries: []raftlite.Entry{{Base: 0, Last: 0, Term: 1, Bytes: 0, Kind: raftlite.EntryLeaderNoop}}}
	if got, want := len(AppendMessage(nil, &plain)), messageFixedBytes+entryHeaderBytes; got != want {
		t.Fatalf("a frame without conf is %d bytes, want %d", got, want)
	}
	conf := raftlite.Membership{Voters: raftlite.NewReplicaSet(1, 2), Learners: raftlite.NewReplicaSet(3)}
	withConf := plain
	withConf.Entries = []raftlite.Entry{{Base: 0, Last: 0, Term: 1, Kind: raftlite.EntryConfChange, Conf: conf}}
	withConf.Conf = conf
	enc := AppendMessage(nil, &withConf)
	if got, want := len(enc), messageFixedBytes+entryHeaderBytes+2*confBytes; got != want {
		t.Fatalf("a frame with two confs is %d bytes, want %d", got, want)
	}
	back, err := DecodeMessage(enc)
	if err != nil || back.Conf != conf || back.Entries[0].Conf != conf {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	// Zero the message's conf but keep flag 8.
	bad := append([]byte(nil), enc...)
	clear(bad[len(bad)-confBytes:])
	if _, err := DecodeMessage(bad); err == nil {
		t.Fatal("flag 8 with an empty configuration accepted")
	}
}

func TestPingAndRoutes(t *testing.T) {
	p := Ping{Node: 3, MetaApplied: 1234}
	got, err := DecodePing(AppendPing(nil, p))
	if err != nil || got != p {
		t.Fatalf("ping %+v %v", got, err)
	}
	rs := []Route{{TopicID: [16]byte{1, 2}, Partition: 7, Leader: 2, Term: 9, InSync: 0b111}}
	back, err := DecodeRoutes(AppendRoutes(nil, rs))
	if err != nil || !reflect.DeepEqual(back, rs) {
		t.Fatalf("routes %+v %v", back, err)
	}
	if _, err := DecodeRoutes(AppendRoutes(nil, rs)[:10]); err == nil {
		t.Fatal("short routes accepted")
	}
	tr := Transfer{TopicID: [16]byte{9}, Partition: 3, Target: 2}
	if back, err := DecodeTransfer(AppendTransfer(nil, tr)); err != nil || back != tr {
		t.Fatalf("transfer %+v %v", back, err)
	}
	if _, err := DecodeTransfer(AppendTransfer(nil, tr)[:20]); err == nil {
		t.Fatal("short transfer accepted")
	}
	gt := GroupsTopic{Node: 3}
	if back, err := DecodeGroupsTopic(AppendGroupsTopic(nil, gt)); err != nil || back != gt {
		t.Fatalf("groups topic %+v %v", back, err)
	}
	if _, err := DecodeGroupsTopic(AppendGroupsTopic(nil, gt)[:4]); err == nil {
		t.Fatal("short groups-topic request accepted")
	}
	if _, err := DecodeGroupsTopic(append(AppendGroupsTopic(nil, gt), 0)); err == nil {
		t.Fatal("groups-topic request with trailing bytes accepted")
	}
	pr := Propose{ID: 1 << 40, Node: 2, Command: []byte(`{"op":"delete_records"}`)}
	if back, err := DecodePropose(AppendPropose(nil, pr)); err != nil || back.ID != pr.ID || back.Node != 2 || string(back.Command) != string(pr.Command) {
		t.Fatalf("propose %+v %v", back, err)
	}
	if _, err := DecodePropose(AppendPropose(nil, Propose{ID: 1, Node: 2})); err == nil {
		t.Fatal("an empty proposed command accepted")
	}
	if _, err := DecodePropose(AppendPropose(nil, Propose{Command: make([]byte, ProposeBytesMax+1)})); err == nil {
		t.Fatal("a proposed command over the bound accepted")
	}
	pd := Proposed{ID: 9, Status: ProposedRefused, Message: "no"}
	b := AppendProposed(nil, pd)
	if back, err := DecodeProposed(b); err != nil || back != pd {
		t.Fatalf("proposed %+v %v", back, err)
	}
	if _, err := DecodeProposed(b[:len(b)-1]); err == nil {
		t.Fatal("a short answer accepted")
	}
	if _, err := DecodeProposed(AppendProposed(nil, Proposed{Status: 4})); err == nil {
		t.Fatal("an unknown status accepted")
	}
	if back, _ := DecodeProposed(AppendProposed(nil, Proposed{Message: string(make([]byte, 2*ProposedMessageBytesMax))})); len(back.Message) != ProposedMessageBytesMax {
		t.Fatalf("a long message kept %d bytes", len(back.Message))
	}
}

func FuzzDecode(f *testing.F) {
	msgs := sampleMessages()
	body := AppendMessagesHeader(nil, len(msgs))
	for i := range msgs {
		body = AppendFramedMessage(body, &msgs[i], true)
	}
	f.Add(body)
	f.Add([]byte{})
	f.Add(AppendPing(nil, Ping{Node: 1}))
	f.Add(AppendRoutes(nil, []Route{{Partition: 1}}))
	f.Add(AppendTxnMarker(nil, TxnMarker{ID: 1, Commit: true}))
	f.Add(AppendTxnMarkerAck(nil, TxnMarkerAck{ID: 1}))
	f.Add(AppendGroupsTopic(nil, GroupsTopic{Node: 2}))
	f.Add(AppendPropose(nil, Propose{ID: 1, Node: 2, Command: []byte("{}")}))
	f.Add(AppendProposed(nil, Proposed{ID: 1, Status: ProposedFailed, Message: "x"}))
	f.Add(append(bytes.Clone(body), 0xff, 0xff))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []raftlite.Message
		if err := DecodeMessages(b, func(m *raftlite.Message) { got = append(got, *m) }); err == nil {
			again := AppendMessagesHeader(nil, len(got))
			for i := range got {
				again = AppendFramedMessage(again, &got[i], true)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("decode/encode differs")
			}
		}
		DecodePing(b)
		DecodeRoutes(b)
		DecodeTransfer(b)
		if m, err := DecodeTxnMarker(b); err == nil && !bytes.Equal(AppendTxnMarker(nil, m), b) {
			t.Fatalf("marker decode/encode differs")
		}
		if a, err := DecodeTxnMarkerAck(b); err == nil && !bytes.Equal(AppendTxnMarkerAck(nil, a), b) {
			t.Fatalf("marker answer decode/encode differs")
		}
		DecodeGroupsTopic(b)
		DecodePropose(b)
		if m, err := DecodeProposed(b); err == nil && !bytes.Equal(AppendProposed(nil, m), b) {
			t.Fatalf("proposed decode/encode differs")
		}
	})
}

func TestReassignFrames(t *testing.T) {
	m := Reassign{TopicID: [16]byte{1, 2}, Partition: 7, From: 3, Target: raftlite.NewReplicaSet(2, 3, 4)}
	got, err := DecodeReassign(AppendReassign(nil, m))
	if err != nil || got != m {
		t.Fatalf("reassign %+v, %v; want %+v", got, err, m)
	}
	st := ReassignState{TopicID: [16]byte{9}, Partition: 2, Committed: true, EntriesBehind: 12, BytesBehind: 1 << 40,
		Conf: raftlite.Membership{Voters: raftlite.NewReplicaSet(1, 2, 3), Learners: raftlite.NewReplicaSet(4)}}
	b := AppendReassignState(nil, st)
	gs, err := DecodeReassignState(b)
	if err != nil || gs != st {
		t.Fatalf("state %+v, %v; want %+v", gs, err, st)
	}
	if _, err := DecodeReassignState(b[:len(b)-1]); err == nil {
		t.Fatal("a short state decoded")
	}
	if _, err := DecodeReassignState(append(b, 0)); err == nil {
		t.Fatal("a state with trailing bytes decoded")
	}
	bad := append([]byte(nil), b...)
	bad[1+16+4+8] = 2
	if _, err := DecodeReassignState(bad); err == nil {
		t.Fatal("a committed flag of 2 decoded")
	}
	if _, err := DecodeReassign(b); err == nil {
		t.Fatal("a state decoded as a reassign")
	}
}

func TestSegmentRoundTrip(t *testing.T) {
	m := Segment{Group: 1 << 62, From: 1, To: 32, Term: 9, Base: 1 << 40, Last: 1<<40 + 999, LastTerm: 8,
		FileBytes: 3 << 20, Pos: 2 << 20, Chunk: bytes.Repeat([]byte{7}, 1000)}
	body := AppendSegmentHeader(nil, &m)
	if len(body) != SegmentHeaderBytes {
		t.Fatalf("header is %d bytes, SegmentHeaderBytes says %d", len(body), SegmentHeaderBytes)
	}
	body = append(body, m.Chunk...)
	got, err := DecodeSegment(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("got %+v, want %+v", got, m)
	}
	a := SegmentAck{Group: 3, From: 32, To: 1, Term: 9, Base: 1 << 40, Held: 3 << 20, Status: SegmentAdopted}
	ga, err := DecodeSegmentAck(AppendSegmentAck(nil, a))
	if err != nil || ga != a {
		t.Fatalf("ack got %+v, %v, want %+v", ga, err, a)
	}
}

func TestSegmentMalformed(t *testing.T) {
	head := func(m Segment, chunk int) []byte {
		return append(AppendSegmentHeader(nil, &m), make([]byte, chunk)...)
	}
	ok := Segment{Group: 1, From: 1, To: 2, Term: 1, Base: 0, Last: 10, LastTerm: 1, FileBytes: 100, Pos: 0}
	big := ok
	big.FileBytes = 4 << 20
	past := ok
	past.Pos = 90
	backwards := ok
	backwards.Last = -1
	cases := map[string][]byte{
		"short header":       head(ok, 0)[:SegmentHeaderBytes-1],
		"chunk too large":    head(big, SegmentChunkBytesMax+1),
		"chunk past the end": head(past, 11),
		"offsets backwards":  head(backwards, 1),
		"wrong kind":         append([]byte{KindPing}, head(ok, 1)[1:]...),
		"ack status":         append(AppendSegmentAck(nil, SegmentAck{})[:1+8+2+4+8+8], 3),
		"ack trailing":       append(AppendSegmentAck(nil, SegmentAck{}), 0),
	}
	for name, b := range cases {
		var err error
		if b[0] == KindSegmentAck {
			_, err = DecodeSegmentAck(b)
		} else {
			_, err = DecodeSegment(b)
		}
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := DecodeSegment(head(ok, 100)); err != nil {
		t.Fatalf("a whole file in one chunk: %v", err)
	}
}
