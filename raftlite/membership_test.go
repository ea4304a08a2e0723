package raftlite

import (
	"errors"
	"testing"
)

func TestConfChangeApply(t *testing.T) {
	c := Membership{Voters: NewReplicaSet(1, 2), Learners: NewReplicaSet(3)}
	for _, tc := range []struct {
		cc   ConfChange
		want Membership
		err  error
	}{
		{ConfChange{ConfAddLearner, 4}, Membership{Voters: NewReplicaSet(1, 2), Learners: NewReplicaSet(3, 4)}, nil},
		{ConfChange{ConfAddLearner, 2}, c, ErrInvalidConfChange},
		{ConfChange{ConfAddLearner, 3}, c, ErrInvalidConfChange},
		{ConfChange{ConfAddLearner, NodeIDMax + 1}, c, ErrInvalidConfChange},
		{ConfChange{ConfPromote, 3}, Membership{Voters: NewReplicaSet(1, 2, 3)}, nil},
		{ConfChange{ConfPromote, 2}, c, ErrInvalidConfChange},
		{ConfChange{ConfRemove, 1}, Membership{Voters: NewReplicaSet(2), Learners: NewReplicaSet(3)}, nil},
		{ConfChange{ConfRemove, 3}, Membership{Voters: NewReplicaSet(1, 2)}, nil},
		{ConfChange{ConfRemove, 5}, c, ErrInvalidConfChange},
		{ConfChange{0, 1}, c, ErrInvalidConfChange},
	} {
		got, err := tc.cc.apply(c)
		if !errors.Is(err, tc.err) || (err == nil && got != tc.want) {
			t.Errorf("%v: got %v, %v; want %v, %v", tc.cc, got, err, tc.want, tc.err)
		}
	}
	one := Membership{Voters: NewReplicaSet(1), Learners: NewReplicaSet(2)}
	if _, err := (ConfChange{ConfRemove, 1}).apply(one); !errors.Is(err, ErrInvalidConfChange) {
		t.Errorf("removing the last voter: err = %v", err)
	}
}

// plainLog hides MemLog's ConfAt: a Log that records no configurations.
type plainLog struct{ Log }

// A single-node leader over a log that is not a ConfLog refuses changes
// (a restart could not recover them), but works as before otherwise.
func TestProposeConfChangeNeedsConfLog(t *testing.T) {
	n, err := New(Config{ID: 1, Group: 1, Replicas: NewReplicaSet(1), Log: plainLog{NewMemLog()}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	n.Campaign()
	if n.Role() != RoleLeader {
		t.Fatalf("role %v", n.Role())
	}
	if _, err := n.ProposeConfChange(ConfChange{ConfAddLearner, 2}); !errors.Is(err, ErrConfChangePending) {
		t.Fatalf("before the own-term commit: err = %v", err)
	}
	n.Durable(0, 1) // the no-op: committed on the one voter
	if _, err := n.ProposeConfChange(ConfChange{ConfAddLearner, 2}); !errors.Is(err, ErrInvalidConfChange) {
		t.Fatalf("not a ConfLog: err = %v", err)
	}
	if _, err := n.Propose(1, []byte("x")); err != nil {
		t.Fatalf("propose: %v", err)
	}
	if got := n.Membership(); got != (Membership{Voters: NewReplicaSet(1)}) {
		t.Fatalf("membership %v", got)
	}
}

func TestConfEntryValidation(t *testing.T) {
	n, _ := newTestNode(t, 1)
	for _, e := range []Entry{
		{Base: 0, Last: 0, Term: 1, Kind: EntryConfChange},                                                   // no configuration
		{Base: 0, Last: 0, Term: 1, Kind: EntryConfChange, Conf: Membership{Voters: 1, Learners: 1}},         // overlap
		{Base: 0, Last: 1, Term: 1, Kind: EntryConfChange, Conf: Membership{Voters: NewReplicaSet(1, 2, 3)}}, // two offsets
		{Base: 0, Last: 0, Term: 1, Kind: EntryData, Conf: Membership{Voters: NewReplicaSet(1)}},             // conf on data
		{Base: 0, Last: 0, Term: 1, Kind: entryKindCount},                                                    // bad kind
	} {
		m := Message{Type: MsgApp, Group: 1, From: 2, To: 1, Term: 1, Index: -1, Entries: []Entry{e}}
		if err := n.Step(m); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%v (kind %d, conf %v): err = %v, want ErrInvalidMessage", e, e.Kind, e.Conf, err)
		}
	}
	m := Message{Type: MsgReset, Group: 1, From: 2, To: 1, Term: 1, Index: 5, LogTerm: 1, Conf: Membership{Learners: 2}}
	if err := n.Step(m); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("MsgReset with an invalid configuration: err = %v", err)
	}
}
