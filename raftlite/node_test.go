package raftlite

import (
	"errors"
	"testing"
)

// newTestNode returns node id of the group {1,2,3} over an empty MemLog.
func newTestNode(t *testing.T, id NodeID) (*Node, *MemLog) {
	t.Helper()
	log := NewMemLog()
	n, err := New(Config{ID: id, Group: 1, Replicas: NewReplicaSet(1, 2, 3), Log: log, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return n, log
}

// applyReady plays the node layer without reporting durability.
func applyReady(t *testing.T, n *Node, log *MemLog) Ready {
	t.Helper()
	rd := n.Ready()
	if rd.Reset != nil {
		log.Reset(rd.Reset.Start, rd.Reset.PrevTerm)
	}
	if len(rd.Entries) > 0 {
		if _, err := log.Append(rd.Entries...); err != nil {
			t.Fatal(err)
		}
	}
	n.Advance(rd)
	return rd
}

// A durability report that a truncation overtook must not count the new
// entries at the same offsets as durable.
func TestDurableStaleReportIgnored(t *testing.T) {
	n, log := newTestNode(t, 2)
	step := func(m Message) {
		t.Helper()
		m.Group, m.To = 1, 2
		if err := n.Step(m); err != nil {
			t.Fatal(err)
		}
		applyReady(t, n, log)
	}
	step(Message{Type: MsgApp, From: 1, Term: 1, Index: -1, LogTerm: 0,
		Entries: []Entry{{Base: 0, Last: 0, Term: 1}, {Base: 1, Last: 3, Term: 1}}})
	n.Durable(0, 1)
	// The leader of term 2 replaces offsets 1.. with its own batch.
	step(Message{Type: MsgApp, From: 3, Term: 2, Index: 0, LogTerm: 1,
		Entries: []Entry{{Base: 1, Last: 5, Term: 2}}})
	n.Durable(3, 1) // the sync that covered the old entries reports late
	if got := n.Status().Durable; got != 0 {
		t.Fatalf("durable = %d after a stale report, want 0", got)
	}
	rd := n.Ready()
	for _, m := range rd.Messages {
		if m.Type == MsgAppResp && !m.Reject && m.Index > 0 {
			t.Fatalf("acknowledged %d, which is not durable", m.Index)
		}
	}
	n.Advance(rd)
	n.Durable(5, 2)
	if got := n.Status().Durable; got != 5 {
		t.Fatalf("durable = %d, want 5", got)
	}
}

// A group at TermMax never campaigns: terms must fit the batch header.
func TestTermMaxStopsCampaigns(t *testing.T) {
	log := NewMemLog()
	n, err := New(Config{ID: 1, Group: 1, Replicas: NewReplicaSet(1), Log: log,
		HardState: HardState{Term: TermMax}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		n.Tick()
	}
	if n.Role() != RoleFollower || n.Term() != TermMax {
		t.Fatalf("role %v term %d, want follower at TermMax", n.Role(), n.Term())
	}
	// One below the maximum, a single node still elects itself.
	n, err = New(Config{ID: 1, Group: 1, Replicas: NewReplicaSet(1), Log: log,
		HardState: HardState{Term: TermMax - 1}})
	if err != nil {
		t.Fatal(err)
	}
	n.Campaign()
	if n.Role() != RoleLeader || n.Term() != TermMax {
		t.Fatalf("role %v term %d, want leader at TermMax", n.Role(), n.Term())
	}
}

func TestConfigValidation(t *testing.T) {
	log := NewMemLog()
	three := NewReplicaSet(1, 2, 3)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"zero id", Config{ID: 0, Replicas: three, Log: log}},
		{"id too large", Config{ID: 33, Replicas: three, Log: log}},
		{"not a member", Config{ID: 4, Replicas: three, Log: log}},
		{"nil log", Config{ID: 1, Replicas: three}},
		{"vote out of range", Config{ID: 1, Replicas: three, Log: log, HardState: HardState{Term: 1, Vote: 33}}},
		{"learner also a voter", Config{ID: 1, Replicas: three, Learners: NewReplicaSet(3), Log: log}},
		{"no voters", Config{ID: 1, Learners: NewReplicaSet(1), Log: log}},
		{"negative term", Config{ID: 1, Replicas: three, Log: log, HardState: HardState{Term: -1}}},
		{"heartbeat >= election", Config{ID: 1, Replicas: three, Log: log, Limits: &Limits{ElectionTicks: 3, HeartbeatTicks: 3}}},
		{"election too short", Config{ID: 1, Replicas: three, Log: log, Limits: &Limits{ElectionTicks: 1}}},
	} {
		if _, err := New(tc.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", tc.name, err)
		}
	}
	// A shared, partly filled Limits is copied, never written.
	lim := &Limits{ElectionTicks: 5}
	if _, err := New(Config{ID: 1, Replicas: three, Log: log, Limits: lim}); err != nil {
		t.Fatal(err)
	}
	if *lim != (Limits{ElectionTicks: 5}) {
		t.Fatalf("New wrote to the caller's Limits: %+v", *lim)
	}
}

func TestStepRefuses(t *testing.T) {
	n, _ := newTestNode(t, 1)
	for _, tc := range []struct {
		name string
		m    Message
		want error
	}{
		{"other group", Message{Type: MsgHeartbeat, Group: 2, From: 2, To: 1, Term: 1}, ErrGroupMismatch},
		{"not for us", Message{Type: MsgHeartbeat, Group: 1, From: 2, To: 3, Term: 1}, ErrUnknownPeer},
		{"from an invalid id", Message{Type: MsgHeartbeat, Group: 1, From: NodeIDMax + 1, To: 1, Term: 1}, ErrUnknownPeer},
		{"from nobody", Message{Type: MsgHeartbeat, Group: 1, From: None, To: 1, Term: 1}, ErrUnknownPeer},
		{"from ourselves", Message{Type: MsgHeartbeat, Group: 1, From: 1, To: 1, Term: 1}, ErrUnknownPeer},
		{"bad type", Message{Type: 200, Group: 1, From: 2, To: 1, Term: 1}, ErrInvalidMessage},
		{"gap in entries", Message{Type: MsgApp, Group: 1, From: 2, To: 1, Term: 1, Index: -1,
			Entries: []Entry{{Base: 1, Last: 1, Term: 1}}}, ErrInvalidMessage},
		{"entry from the future", Message{Type: MsgApp, Group: 1, From: 2, To: 1, Term: 1, Index: -1,
			Entries: []Entry{{Base: 0, Last: 0, Term: 2}}}, ErrInvalidMessage},
		{"terms going down", Message{Type: MsgApp, Group: 1, From: 2, To: 1, Term: 3, Index: -1,
			Entries: []Entry{{Base: 0, Last: 0, Term: 2}, {Base: 1, Last: 1, Term: 1}}}, ErrInvalidMessage},
		{"last before base", Message{Type: MsgApp, Group: 1, From: 2, To: 1, Term: 1, Index: -1,
			Entries: []Entry{{Base: 0, Last: -1, Term: 1}}}, ErrInvalidMessage},
	} {
		if err := n.Step(tc.m); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestProposeRefuses(t *testing.T) {
	n, log := newTestNode(t, 1)
	if _, err := n.Propose(1, []byte("x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower: err = %v", err)
	}
	one, err := New(Config{ID: 1, Replicas: NewReplicaSet(1), Log: log,
		Limits: &Limits{UncommittedBytesMax: 10, EntryBytesMax: 8, NoopBytes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	one.Campaign()
	if one.Role() != RoleLeader {
		t.Fatal("single node did not elect itself")
	}
	for _, tc := range []struct {
		count int32
		data  string
		want  error
	}{
		{0, "x", ErrInvalidProposal},
		{1, "123456789", ErrInvalidProposal},
		{1, "1234567", nil},
		{1, "1234", ErrProposalBackpressure},
	} {
		if _, err := one.Propose(tc.count, []byte(tc.data)); !errors.Is(err, tc.want) {
			t.Errorf("Propose(%d, %q): err = %v, want %v", tc.count, tc.data, err, tc.want)
		}
	}
}

func TestReplicaSet(t *testing.T) {
	s := NewReplicaSet(1, 5, 32, 0, 33)
	if got, want := s.String(), "{1,5,32}"; got != want {
		t.Fatalf("set %s, want %s", got, want)
	}
	for _, tc := range []struct {
		ids    []NodeID
		quorum int
	}{{[]NodeID{1}, 1}, {[]NodeID{1, 2}, 2}, {[]NodeID{1, 2, 3}, 2}, {[]NodeID{1, 2, 3, 4}, 3}, {[]NodeID{1, 2, 3, 4, 5}, 3}} {
		if q := NewReplicaSet(tc.ids...).Quorum(); q != tc.quorum {
			t.Errorf("quorum of %v = %d, want %d", tc.ids, q, tc.quorum)
		}
	}
	if s.Has(0) || s.Has(2) || !s.Has(32) {
		t.Fatal("Has is wrong")
	}
}
