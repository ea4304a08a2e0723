package controller

import (
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/raftlite"
)

func conf(voters []raftlite.NodeID, learners ...raftlite.NodeID) raftlite.Membership {
	return raftlite.Membership{Voters: raftlite.NewReplicaSet(voters...), Learners: raftlite.NewReplicaSet(learners...)}
}

// TestReassignNext walks 1,2,3 -> 4,5,6 and a cancelled move back: one
// change at a time, a learner added before a voter leaves, the primary
// removed last, nothing while a change waits for its commit.
func TestReassignNext(t *testing.T) {
	ids := func(x ...raftlite.NodeID) []raftlite.NodeID { return x }
	target := raftlite.NewReplicaSet(4, 5, 6)
	add := func(id raftlite.NodeID) raftlite.ConfChange {
		return raftlite.ConfChange{Type: raftlite.ConfAddLearner, Node: id}
	}
	promote := func(id raftlite.NodeID) raftlite.ConfChange {
		return raftlite.ConfChange{Type: raftlite.ConfPromote, Node: id}
	}
	remove := func(id raftlite.NodeID) raftlite.ConfChange {
		return raftlite.ConfChange{Type: raftlite.ConfRemove, Node: id}
	}
	cases := []struct {
		name      string
		conf      raftlite.Membership
		committed bool
		target    raftlite.ReplicaSet
		self      raftlite.NodeID
		want      raftlite.ConfChange
		ok        bool
	}{
		{"waits for the commit", conf(ids(1, 2, 3)), false, target, 1, raftlite.ConfChange{}, false},
		{"adds the first new node", conf(ids(1, 2, 3)), true, target, 1, add(4), true},
		{"promotes the learner", conf(ids(1, 2, 3), 4), true, target, 1, promote(4), true},
		{"removes an old follower before the primary", conf(ids(1, 2, 3, 4)), true, target, 1, remove(2), true},
		{"adds the next", conf(ids(1, 3, 4)), true, target, 1, add(5), true},
		{"removes the primary last", conf(ids(1, 4, 5, 6)), true, target, 1, remove(1), true},
		{"done", conf(ids(4, 5, 6)), true, target, 4, raftlite.ConfChange{}, false},
		{"cancelled: removes the learner", conf(ids(1, 2, 3), 4), true, raftlite.NewReplicaSet(1, 2, 3), 1, remove(4), true},
		{"cancelled: removes the promoted node", conf(ids(1, 2, 3, 4)), true, raftlite.NewReplicaSet(1, 2, 3), 1, remove(4), true},
		{"cancelled: adds back a removed node", conf(ids(1, 3, 4)), true, raftlite.NewReplicaSet(1, 2, 3), 1, add(2), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ReassignNext(c.conf, c.committed, c.target, c.self)
			if got != c.want || ok != c.ok {
				t.Fatalf("reassignNext = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestReassignRecord: what the metadata primary records from a
// partition primary's answer.
func TestReassignRecord(t *testing.T) {
	mv := &metadata.Reassignment{Topic: "t", Partition: 0, From: []metadata.NodeID{1, 2, 3}, Target: []metadata.NodeID{2, 3, 4}}
	st := func(c raftlite.Membership, committed bool) peerwire.ReassignState {
		return peerwire.ReassignState{Conf: c, Committed: committed}
	}
	ids := func(x ...raftlite.NodeID) []raftlite.NodeID { return x }
	check := func(s peerwire.ReassignState, op metadata.Op, step string, node metadata.NodeID, ok bool) {
		t.Helper()
		cmd, got := reassignRecord(mv, s)
		if got != ok || ok && (cmd.Op != op || cmd.Step != step || cmd.Node != node) {
			t.Fatalf("record = %+v, %v; want %s %s %d, %v", cmd, got, op, step, node, ok)
		}
		if ok && cmd.Op == metadata.OpReassignStep {
			mv.Steps = append(mv.Steps, metadata.ReassignStep{Step: step, Node: node})
		}
	}
	check(st(conf(ids(1, 2, 3)), true), "", "", 0, false)
	check(st(conf(ids(1, 2, 3), 4), false), metadata.OpReassignStep, metadata.StepLearnerAdded, 4, true)
	check(st(conf(ids(1, 2, 3), 4), true), "", "", 0, false)
	check(st(conf(ids(1, 2, 3, 4)), true), metadata.OpReassignStep, metadata.StepPromoted, 4, true)
	check(st(conf(ids(2, 3, 4)), false), metadata.OpReassignStep, metadata.StepRemoved, 1, true)
	check(st(conf(ids(2, 3, 4)), false), "", "", 0, false) // not committed: no completion
	check(st(conf(ids(2, 3, 4)), true), metadata.OpReassignComplete, "", 0, true)
}

// The throttle is the smallest a move in progress asks for, else the
// configured one.
func TestThrottleRate(t *testing.T) {
	mv := func(bps int64) *metadata.Reassignment { return &metadata.Reassignment{ThrottleBytesPerSecond: bps} }
	cases := []struct {
		moves      []*metadata.Reassignment
		configured int64
		want       int64
	}{
		{nil, 0, 0},
		{nil, 5 << 20, 5 << 20},
		{[]*metadata.Reassignment{mv(0)}, 5 << 20, 5 << 20},
		{[]*metadata.Reassignment{mv(0), mv(8 << 20), mv(2 << 20)}, 5 << 20, 2 << 20},
		{[]*metadata.Reassignment{mv(8 << 20)}, 0, 8 << 20},
	}
	for i, c := range cases {
		if got := ThrottleRate(c.moves, c.configured); got != c.want {
			t.Errorf("case %d: %d, want %d", i, got, c.want)
		}
	}
}

// A move's progress sums how far the learners' lag shrank, smooths the
// rate, and gives an ETA once a rate is known.
func TestReassignProgressETA(t *testing.T) {
	at := time.Unix(100, 0)
	var p reassignProgress
	st := func(behind int64) peerwire.ReassignState { return peerwire.ReassignState{BytesBehind: behind} }
	p = p.next(st(10<<20), at)
	if p.moved != 0 || p.etaMs() != -1 {
		t.Fatalf("first answer: moved %d, eta %d; want 0, -1", p.moved, p.etaMs())
	}
	p = p.next(st(8<<20), at.Add(time.Second)) // 2 MiB/s
	if p.moved != 2<<20 || p.etaMs() != 4000 {
		t.Fatalf("second answer: moved %d, eta %d; want 2 MiB, 4000", p.moved, p.etaMs())
	}
	p = p.next(st(8<<20), at.Add(2*time.Second)) // a stall: the rate falls by the weight
	if want := int64(5714); p.etaMs() != want {  // 8 MiB at 0.7 x 2 MiB/s
		t.Fatalf("after a stall: eta %d, want %d", p.etaMs(), want)
	}
	p = p.next(st(0), at.Add(3*time.Second)) // caught up (promoted)
	if p.moved != 10<<20 || p.etaMs() != 0 {
		t.Fatalf("caught up: moved %d, eta %d; want 10 MiB, 0", p.moved, p.etaMs())
	}
}
