package raftlite

import "testing"

// A leader asks LearnerBudget before it sends entries to a learner: a
// refusal holds them (nothing with entries goes out), and the learner's
// next answer asks again; entries to the leader's own voters are never
// held (a group of one voter here: it commits alone).
func TestLearnerBudgetHoldsEntries(t *testing.T) {
	log := NewMemLog()
	allow := false
	var asked []int64
	n, err := New(Config{ID: 1, Group: 1, Replicas: NewReplicaSet(1), Learners: NewReplicaSet(2), Log: log, Seed: 1,
		LearnerBudget: func(to NodeID, bytes int64) bool {
			if to != 2 {
				t.Errorf("budget asked for node %d, not a learner", to)
			}
			asked = append(asked, bytes)
			return allow
		}})
	if err != nil {
		t.Fatal(err)
	}
	n.Campaign()
	entriesTo2 := func() int {
		t.Helper()
		rd := n.Ready()
		c := 0
		for _, m := range rd.Messages {
			if m.Type == MsgApp && m.To == 2 && len(m.Entries) > 0 {
				c++
			}
		}
		if len(rd.Entries) > 0 {
			if _, err := log.Append(rd.Entries...); err != nil {
				t.Fatal(err)
			}
		}
		n.Advance(rd)
		if len(rd.Entries) > 0 {
			last := rd.Entries[len(rd.Entries)-1]
			n.Durable(last.Last, last.Term)
		}
		return c
	}
	if c := entriesTo2(); c != 0 {
		t.Fatalf("%d appends with entries went to the learner while its budget refused", c)
	}
	if _, err := n.Propose(1, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if c := entriesTo2(); c != 0 {
		t.Fatalf("%d appends with entries went to the learner while its budget refused", c)
	}
	if n.Commit() < 1 {
		t.Fatalf("the voter's commit is held too: %d", n.Commit())
	}
	if len(asked) == 0 {
		t.Fatal("the budget was never asked")
	}
	// The budget allows again: the learner's next answer gets entries.
	allow = true
	if err := n.Step(Message{Type: MsgHeartbeatResp, Group: 1, From: 2, To: 1, Term: n.Term(), Commit: -1}); err != nil {
		t.Fatal(err)
	}
	if c := entriesTo2(); c == 0 {
		t.Fatal("no entries went to the learner once its budget allowed them")
	}
}
