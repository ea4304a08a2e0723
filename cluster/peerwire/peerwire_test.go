package peerwire

import (
	"bytes"
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
	})
}
