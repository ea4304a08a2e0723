package raftlite

import (
	"errors"
	"testing"
)

// adoptPair is a leader (voter 1) and a learner (2) on MemLogs, with a
// message pump that applies each Ready as the node layer does.
type adoptPair struct {
	t      *testing.T
	nodes  map[NodeID]*Node
	logs   map[NodeID]*MemLog
	allow  bool
	resets int
	apps   int // MsgApp with entries to the learner
}

func newAdoptPair(t *testing.T) *adoptPair {
	p := &adoptPair{t: t, nodes: map[NodeID]*Node{}, logs: map[NodeID]*MemLog{}}
	for _, id := range []NodeID{1, 2} {
		log := NewMemLog()
		n, err := New(Config{ID: id, Group: 1, Replicas: NewReplicaSet(1), Learners: NewReplicaSet(2), Log: log, Seed: uint64(id),
			LearnerBudget: func(NodeID, int64) bool { return p.allow }})
		if err != nil {
			t.Fatal(err)
		}
		p.nodes[id], p.logs[id] = n, log
	}
	return p
}

// pump runs Readys and delivers messages until nothing moves.
func (p *adoptPair) pump() {
	p.t.Helper()
	for moved := true; moved; {
		moved = false
		for _, id := range []NodeID{1, 2} {
			n := p.nodes[id]
			if !n.HasReady() {
				continue
			}
			moved = true
			rd := n.Ready()
			if rd.Reset != nil {
				p.logs[id].ResetTo(*rd.Reset)
			}
			if len(rd.Entries) > 0 {
				if _, err := p.logs[id].Append(rd.Entries...); err != nil {
					p.t.Fatal(err)
				}
			}
			msgs := append([]Message(nil), rd.Messages...)
			n.Advance(rd)
			if len(rd.Entries) > 0 {
				last := rd.Entries[len(rd.Entries)-1]
				n.Durable(last.Last, last.Term)
			}
			for _, m := range msgs {
				if m.Type == MsgReset {
					p.resets++
				}
				if m.Type == MsgApp && m.To == 2 && len(m.Entries) > 0 {
					p.apps++
				}
				if err := p.nodes[m.To].Step(m); err != nil {
					p.t.Fatalf("step %v: %v", m.Type, err)
				}
			}
		}
	}
}

// TestAdoptedThenReset: the learner's log is extended outside raftlite
// with the leader's committed entries (a segment sent whole), Adopted
// extends its view, and the leader's SendReset at the segment's end makes
// it the learner's match without dropping its log; appends then go on
// from there. The failure cases change nothing.
func TestAdoptedThenReset(t *testing.T) {
	p := newAdoptPair(t)
	leader, learner := p.nodes[1], p.nodes[2]
	leader.Campaign()
	p.pump()
	for i := 0; i < 5; i++ {
		if _, err := leader.Propose(2, []byte("abcd")); err != nil {
			t.Fatal(err)
		}
	}
	p.pump()
	if p.apps != 0 {
		t.Fatalf("%d appends with entries went to the learner while its budget refused", p.apps)
	}
	commit := leader.Commit()
	if commit < 5 {
		t.Fatalf("commit %d", commit)
	}
	if _, err := leader.Propose(1, []byte("z")); err != nil { // not part of the segment
		t.Fatal(err)
	}
	p.pump()
	// The "segment": the leader's entries from the learner's end to commit.
	first := p.logs[2].EndOffset()
	ents, err := p.logs[1].Entries(first, commit+1, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Before the entries are there, Adopted refuses.
	if err := learner.Adopted(first, commit); !errors.Is(err, ErrNotAdoptable) {
		t.Fatalf("Adopted before the log grew = %v, want ErrNotAdoptable", err)
	}
	if _, err := p.logs[2].Append(ents...); err != nil {
		t.Fatal(err)
	}
	if err := learner.Adopted(first+1, commit); !errors.Is(err, ErrNotAdoptable) {
		t.Fatalf("Adopted at the wrong first = %v, want ErrNotAdoptable", err)
	}
	if err := leader.Adopted(first, commit); !errors.Is(err, ErrNotAdoptable) {
		t.Fatalf("Adopted on the leader = %v, want ErrNotAdoptable", err)
	}
	if err := learner.Adopted(first, commit); err != nil {
		t.Fatal(err)
	}
	if st := learner.Status(); st.LastOffset != commit || st.Durable != commit {
		t.Fatalf("the learner's view ends at %d durable %d, want %d", st.LastOffset, st.Durable, commit)
	}
	if err := learner.SendReset(1, commit); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("SendReset on the learner = %v", err)
	}
	if err := leader.SendReset(2, leader.Commit()+1); !errors.Is(err, ErrNotAdoptable) {
		t.Fatalf("SendReset above the commit = %v, want ErrNotAdoptable", err)
	}
	if err := leader.SendReset(2, commit); err != nil {
		t.Fatal(err)
	}
	p.pump()
	if p.resets != 1 {
		t.Fatalf("%d resets sent, want 1", p.resets)
	}
	if m, _ := leader.Match(2); m != commit {
		t.Fatalf("the leader sees the learner's match at %d, want %d", m, commit)
	}
	if p.logs[2].StartOffset() != 0 {
		t.Fatalf("the learner's log was dropped: it starts at %d", p.logs[2].StartOffset())
	}
	// The tail goes as appends once the budget allows.
	p.allow = true
	if err := leader.Step(Message{Type: MsgHeartbeatResp, Group: 1, From: 2, To: 1, Term: leader.Term(), Commit: commit}); err != nil {
		t.Fatal(err)
	}
	p.pump()
	if m, _ := leader.Match(2); m != p.logs[1].EndOffset()-1 {
		t.Fatalf("the learner's match is %d, the leader's log ends at %d", m, p.logs[1].EndOffset()-1)
	}
	a, _ := p.logs[1].Entries(0, p.logs[1].EndOffset(), 1<<30, nil)
	b, _ := p.logs[2].Entries(0, p.logs[2].EndOffset(), 1<<30, nil)
	if len(a) != len(b) {
		t.Fatalf("the learner holds %d entries, the leader %d", len(b), len(a))
	}
	for i := range a {
		if a[i].Base != b[i].Base || a[i].Term != b[i].Term || string(a[i].Data) != string(b[i].Data) {
			t.Fatalf("entry %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}
