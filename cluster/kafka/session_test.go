package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sessionRequest(id, epoch int32, offsets map[string][]int64, forget map[string][]int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch = 12, id, epoch
	for _, topic := range []string{"a", "b"} {
		if offs, ok := offsets[topic]; ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			for p, off := range offs {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset = int32(p), off
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		if ps, ok := forget[topic]; ok {
			req.ForgottenTopics = append(req.ForgottenTopics, kmsg.FetchRequestForgottenTopic{Topic: topic, Partitions: ps})
		}
	}
	return req
}

// positions lists a full request's partitions and fetch offsets.
func positions(req *kmsg.FetchRequest) string {
	out := ""
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			out += fmt.Sprintf("%s/%d@%d ", rt.Topic, rp.Partition, rp.FetchOffset)
		}
	}
	return out
}

// A session keeps the positions it was given, takes updates and
// forgotten partitions, and checks ids and epochs.
func TestOpenSession(t *testing.T) {
	l := New(nil, Config{})
	st := &conn{}
	full, s, inc, code := l.openSession(st, sessionRequest(0, 0, map[string][]int64{"a": {5, 7}, "b": {1}}, nil))
	if code != 0 || s == nil || inc || positions(full) != "a/0@5 a/1@7 b/0@1 " {
		t.Fatalf("open: %v %v %d %q", s, inc, code, positions(full))
	}
	full, s2, inc, code := l.openSession(st, sessionRequest(s.id, 1, map[string][]int64{"a": {9}}, map[string][]int32{"b": {0}}))
	if code != 0 || s2 != s || !inc || positions(full) != "a/0@9 a/1@7 " {
		t.Fatalf("incremental: %v %d %q", inc, code, positions(full))
	}
	for _, tc := range []struct {
		id, epoch int32
		want      int16
	}{
		{s.id, 1, kerr.InvalidFetchSessionEpoch.Code}, // already used
		{s.id + 1, 2, kerr.FetchSessionIDNotFound.Code},
		{0, 3, kerr.FetchSessionIDNotFound.Code},
	} {
		if _, _, _, code := l.openSession(st, sessionRequest(tc.id, tc.epoch, nil, nil)); code != tc.want {
			t.Errorf("session %d epoch %d: code %d, want %d", tc.id, tc.epoch, code, tc.want)
		}
	}
	// The answer leaves out what did not change, and remembers what it
	// told.
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "a"
	for p := int32(0); p < 2; p++ {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark = p, 10
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	sessionAnswer(s, resp, true)
	if resp.SessionID != s.id || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("first answer: %+v", resp)
	}
	again := kmsg.NewPtrFetchResponse()
	again.Topics = []kmsg.FetchResponseTopic{{Topic: "a", Partitions: []kmsg.FetchResponseTopicPartition{
		{Partition: 0, HighWatermark: 10, LogStartOffset: -1, PreferredReadReplica: -1},
		{Partition: 1, HighWatermark: 11, LogStartOffset: -1, PreferredReadReplica: -1}}}}
	sessionAnswer(s, again, true)
	if len(again.Topics) != 1 || len(again.Topics[0].Partitions) != 1 || again.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("only the moved high watermark: %+v", again.Topics)
	}
	// A preferred read replica is answered though nothing else moved.
	redirect := kmsg.NewPtrFetchResponse()
	redirect.Topics = []kmsg.FetchResponseTopic{{Topic: "a", Partitions: []kmsg.FetchResponseTopicPartition{
		{Partition: 0, HighWatermark: 10, LogStartOffset: -1, PreferredReadReplica: 2},
		{Partition: 1, HighWatermark: 11, LogStartOffset: -1, PreferredReadReplica: -1}}}}
	sessionAnswer(s, redirect, true)
	if len(redirect.Topics) != 1 || len(redirect.Topics[0].Partitions) != 1 || redirect.Topics[0].Partitions[0].PreferredReadReplica != 2 {
		t.Fatalf("only the preferred read replica: %+v", redirect.Topics)
	}
	// Epoch -1 closes it.
	if _, s3, _, code := l.openSession(st, sessionRequest(s.id, -1, nil, nil)); code != 0 || s3 != nil || st.session != nil {
		t.Fatal("close")
	}
}

// KIP-227's rules for the session fields, against a connection holding
// session 7 at epoch 3: a full fetch (epoch 0 or -1) is always served
// and closes the session it names; only epoch 0 opens a new one; an
// incremental fetch needs the connection's session and its next epoch.
// franz-go resets after either session error with epoch 0 and its old
// id, so that request must open a session, not be refused again.
func TestOpenSessionRules(t *testing.T) {
	const none, keep, fresh = "none", "kept", "new"
	for _, tc := range []struct {
		name      string
		id, epoch int32
		code      int16
		answer    string // the session the answer carries
		after     string // the connection's session after it
	}{
		{"full fetch opening", 0, 0, 0, fresh, fresh},
		{"full fetch resetting the session", 7, 0, 0, fresh, fresh},
		{"full fetch resetting an unknown session", 8, 0, 0, fresh, fresh},
		{"sessionless", 0, -1, 0, none, keep},
		{"closing the session", 7, -1, 0, none, none},
		{"closing an unknown session", 8, -1, 0, none, keep},
		{"incremental", 7, 3, 0, keep, keep},
		{"incremental with an old epoch", 7, 2, kerr.InvalidFetchSessionEpoch.Code, none, keep},
		{"incremental with a future epoch", 7, 4, kerr.InvalidFetchSessionEpoch.Code, none, keep},
		{"incremental with an unknown id", 8, 3, kerr.FetchSessionIDNotFound.Code, none, keep},
		{"incremental without an id", 0, 3, kerr.FetchSessionIDNotFound.Code, none, keep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(nil, Config{})
			old := &fetchSession{id: 7, epoch: 3, index: map[topicPartition]int{}}
			old.update("a", &kmsg.FetchRequestTopicPartition{Partition: 0, FetchOffset: 4})
			st := &conn{session: old}
			full, s, _, code := l.openSession(st, sessionRequest(tc.id, tc.epoch, map[string][]int64{"b": {1}}, nil))
			which := func(s *fetchSession) string {
				switch {
				case s == nil:
					return none
				case s == old:
					return keep
				}
				return fresh
			}
			if code != tc.code || which(s) != tc.answer || which(st.session) != tc.after {
				t.Fatalf("code %d, answer's session %s, connection's %s; want %d, %s, %s",
					code, which(s), which(st.session), tc.code, tc.answer, tc.after)
			}
			if code == 0 && full == nil {
				t.Fatal("served without a request")
			}
			if tc.answer == fresh && (s.id == 0 || s.id == 7 || s.epoch != 1 || positions(full) != "b/0@1 ") {
				t.Fatalf("new session %d at epoch %d serving %q", s.id, s.epoch, positions(full))
			}
		})
	}
}

// A partition this node no longer leads is answered
// NOT_LEADER_OR_FOLLOWER in every incremental answer until the client
// forgets it (an error is always news), its last told watermark is kept,
// and once forgotten it is neither read nor answered.
func TestSessionPartitionMovedAway(t *testing.T) {
	l := New(nil, Config{})
	st := &conn{}
	_, s, _, _ := l.openSession(st, sessionRequest(0, 0, map[string][]int64{"a": {5, 7}}, nil))
	answer := func(code int16) *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		resp.Topics = []kmsg.FetchResponseTopic{{Topic: "a", Partitions: []kmsg.FetchResponseTopicPartition{
			{Partition: 0, HighWatermark: 9, LogStartOffset: 0, PreferredReadReplica: -1},
			{Partition: 1, HighWatermark: 9, LogStartOffset: 0, PreferredReadReplica: -1, ErrorCode: code}}}}
		return resp // the same watermark: only the error is news
	}
	sessionAnswer(s, answer(0), false)
	for epoch := int32(1); epoch <= 2; epoch++ {
		if _, _, _, code := l.openSession(st, sessionRequest(s.id, epoch, nil, nil)); code != 0 {
			t.Fatalf("epoch %d: code %d", epoch, code)
		}
		resp := answer(kerr.NotLeaderForPartition.Code)
		sessionAnswer(s, resp, true)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
			resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("epoch %d: %+v", epoch, resp.Topics)
		}
	}
	if sp := s.parts[s.index[topicPartition{"a", 1}]]; sp.hw != 9 {
		t.Fatalf("told watermark %d after the errors, want 9", sp.hw)
	}
	full, _, _, code := l.openSession(st, sessionRequest(s.id, 3, nil, map[string][]int32{"a": {1}}))
	if code != 0 || positions(full) != "a/0@5 " {
		t.Fatalf("after forgetting: code %d, %q", code, positions(full))
	}
	resp := answer(kerr.NotLeaderForPartition.Code)
	sessionAnswer(s, resp, true)
	if len(resp.Topics) != 0 {
		t.Fatalf("forgotten partition answered: %+v", resp.Topics)
	}
}
