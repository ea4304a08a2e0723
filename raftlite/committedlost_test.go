package raftlite

import (
	"errors"
	"strings"
	"testing"
)

// A leader whose log lost entries this follower knows committed (a
// majority lost acknowledged writes: a log that acknowledges before it
// syncs, then a power loss) sends an append or a reset that would replace
// them. A durable log's node holds the contract with a panic; one whose
// log loses acknowledged entries refuses the message with
// ErrCommittedLost and keeps its log and commit.
func TestCommittedLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lost is the leader's message of term 3 that would replace
		// offsets the follower knows committed (0..3 of term 1).
		lost Message
	}{
		{"append", Message{Type: MsgApp, From: 3, Term: 3, Index: 0, LogTerm: 1,
			Entries: []Entry{{Base: 1, Last: 1, Term: 3}}}},
		{"reset", Message{Type: MsgReset, From: 3, Term: 3, Index: 1, LogTerm: 2}},
	} {
		for _, loses := range []bool{false, true} {
			t.Run(tc.name, func(t *testing.T) {
				log := NewMemLog()
				n, err := New(Config{ID: 2, Group: 1, Replicas: NewReplicaSet(1, 2, 3), Log: log, Seed: 1, LogLosesAcked: loses})
				if err != nil {
					t.Fatal(err)
				}
				step := func(m Message) error {
					m.Group, m.To = 1, 2
					err := n.Step(m)
					applyReady(t, n, log)
					return err
				}
				// Leader 1 of term 1 commits 0..3 with this follower.
				if err := step(Message{Type: MsgApp, From: 1, Term: 1, Index: -1, LogTerm: 0, Commit: 3,
					Entries: []Entry{{Base: 0, Last: 0, Term: 1}, {Base: 1, Last: 3, Term: 1}}}); err != nil {
					t.Fatal(err)
				}
				n.Durable(3, 1)
				if n.Commit() != 3 {
					t.Fatalf("commit %d, want 3", n.Commit())
				}
				if !loses {
					defer func() {
						if p := recover(); p == nil || !strings.Contains(p.(string), "would replace committed offset") {
							t.Fatalf("a durable log's node did not fail its assertion: %v", p)
						}
					}()
				}
				err = step(tc.lost)
				if !errors.Is(err, ErrCommittedLost) {
					t.Fatalf("Step = %v, want ErrCommittedLost", err)
				}
				if !strings.Contains(err.Error(), "from 3 (term 3)") {
					t.Errorf("the error does not name the leader and its term: %v", err)
				}
				if n.Commit() != 3 || log.EndOffset() != 4 {
					t.Errorf("commit %d, log end %d after the refusal, want 3 and 4 (unchanged)", n.Commit(), log.EndOffset())
				}
				for _, e := range log.All() {
					if e.Term != 1 {
						t.Errorf("entry %v replaced", e)
					}
				}
				// The next message is stepped as usual: the refusal is not sticky in raftlite.
				if err := step(Message{Type: MsgHeartbeat, From: 3, Term: 3, Commit: 0}); err != nil {
					t.Errorf("heartbeat after the refusal: %v", err)
				}
			})
		}
	}
}
