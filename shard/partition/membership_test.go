package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
)

var (
	ids123 = []raftlite.NodeID{1, 2, 3}
	ids4   = []raftlite.NodeID{4}
)

func conf(voters, learners []raftlite.NodeID) raftlite.Membership {
	return raftlite.Membership{Voters: raftlite.NewReplicaSet(voters...), Learners: raftlite.NewReplicaSet(learners...)}
}

func addLearner(id raftlite.NodeID) func(*Replica, func(ConfChangeResult)) {
	return func(r *Replica, reply func(ConfChangeResult)) { r.AddLearner(id, reply) }
}

func promote(id raftlite.NodeID, wait time.Duration) func(*Replica, func(ConfChangeResult)) {
	return func(r *Replica, reply func(ConfChangeResult)) { r.Promote(id, wait, reply) }
}

func remove(id raftlite.NodeID) func(*Replica, func(ConfChangeResult)) {
	return func(r *Replica, reply func(ConfChangeResult)) { r.RemoveMember(id, reply) }
}

// TestMoveAReplicaUnderProduce moves a replica of a 3-member group from
// node 1 (the primary) to node 4 while a producer writes: node 4 joins as
// a learner, catches up, is promoted, and node 1 removes itself and hands
// the primary role over. No acknowledged write is lost, and every member
// that restarts (each opened with the stale creation configuration) finds
// the configuration in its log.
func TestMoveAReplicaUnderProduce(t *testing.T) {
	tg := newTestGroup(t)
	for _, id := range ids123 {
		tg.start(id, ids123, nil)
	}
	p1 := tg.primary()
	prod := tg.startProducer()

	// The learner not running yet: adding it commits (voters 1-3), but it
	// may not be promoted until it holds the committed log.
	if res := tg.change(p1, addLearner(4)); res.Err != nil || res.Conf != conf(ids123, ids4) {
		t.Fatalf("add learner 4: %+v", res)
	}
	if res := tg.change(p1, promote(4, 0)); !errors.Is(res.Err, raftlite.ErrLearnerBehind) {
		t.Fatalf("promote a learner that holds nothing: %v, want ErrLearnerBehind", res.Err)
	}
	if res := tg.change(p1, promote(4, 50*time.Millisecond)); !errors.Is(res.Err, raftlite.ErrLearnerBehind) {
		t.Fatalf("promote a learner that does not run, waiting: %v, want ErrLearnerBehind", res.Err)
	}
	tg.waitFor(p1, "progress reports learner 4 behind", func(r *Replica) bool {
		ps, err := r.MemberProgress()
		for _, p := range ps {
			if p.ID == 4 {
				return err == nil && p.Learner && !p.CaughtUp && p.EntriesBehind > 0 && p.BytesBehind > 0
			}
		}
		return false
	})

	m4 := tg.start(4, ids123, ids4)
	tg.waitFor(p1, "learner 4 catches up", func(r *Replica) bool {
		ps, _ := r.MemberProgress()
		for _, p := range ps {
			if p.ID == 4 {
				return p.CaughtUp && p.Active
			}
		}
		return false
	})
	if res := tg.change(p1, promote(4, 5*time.Second)); res.Err != nil || res.Conf != conf([]raftlite.NodeID{1, 2, 3, 4}, nil) {
		t.Fatalf("promote 4: %+v", res)
	}
	// The primary removes itself: it leads until the entry commits, then
	// steps down and a caught-up voter takes over.
	res := tg.change(p1, remove(p1.id))
	if res.Err != nil {
		t.Fatalf("remove the primary %d: %v", p1.id, res.Err)
	}
	survivors := []raftlite.NodeID{}
	for _, id := range []raftlite.NodeID{1, 2, 3, 4} {
		if id != p1.id {
			survivors = append(survivors, id)
		}
	}
	final := conf(survivors, nil)
	if res.Conf != final {
		t.Fatalf("after removing %d: %v, want %v", p1.id, res.Conf, final)
	}
	tg.waitFor(p1, "the removed primary steps down and knows it is removed", func(r *Replica) bool {
		return !r.IsPrimary() && r.Removed() && !r.HasMember(p1.id)
	})
	tg.stop(p1.id)
	p2 := tg.primary()
	if p2.id == p1.id {
		t.Fatalf("the removed node %d is still primary", p1.id)
	}
	// Writes continue on the new configuration.
	before := prod.count()
	tg.waitFor(p2, "writes after the move", func(*Replica) bool { return prod.count() > before+20 })
	acked := prod.finish()

	checkAcked := func(m *testMember) {
		t.Helper()
		got := tg.committed(m)
		for off, v := range acked {
			if got[off] != v {
				t.Fatalf("node %d: acknowledged %q at %d reads back %q", m.id, v, off, got[off])
			}
		}
	}
	tg.waitFor(m4, "node 4 holds everything acknowledged", func(r *Replica) bool {
		var last int64 = -1
		for off := range acked {
			last = max(last, off)
		}
		return r.HighWatermark() > last
	})
	checkAcked(p2)
	checkAcked(m4)
	if len(acked) < 20 {
		t.Fatalf("only %d writes acknowledged", len(acked))
	}
	t.Logf("%d writes acknowledged across the move, every one read back on nodes %d and 4", len(acked), p2.id)

	// Restart every member, one at a time, with the configuration the
	// node had at creation: the log's configuration is in force at once.
	for _, id := range survivors {
		var learners []raftlite.NodeID
		if id == 4 {
			learners = ids4
		}
		tg.stop(id)
		m := tg.start(id, ids123, learners)
		m.do(t, func() {
			if got := m.r.Membership(); got != final {
				t.Errorf("node %d after restart: %v, want %v", id, got, final)
			}
			if m.r.HasMember(p1.id) {
				t.Errorf("node %d after restart counts the removed node %d", id, p1.id)
			}
		})
		tg.primary()
	}
	// The removed node, restarted on its old directory, finds its removal
	// in its log: it is no member, and the group is undisturbed.
	m1 := tg.start(p1.id, ids123, nil)
	var got1 raftlite.Membership
	m1.do(t, func() { got1 = m1.r.Membership() })
	if got1 != final {
		t.Fatalf("removed node %d after restart: %v, want %v", p1.id, got1, final)
	}
	// And the group still takes writes, with everything acknowledged kept.
	p3 := tg.primary()
	if p3.id == p1.id {
		t.Fatalf("the removed node %d leads again", p1.id)
	}
	if res := produceOn(t, p3, "after"); res.Err != nil {
		t.Fatalf("produce after the restarts: %v", res.Err)
	}
	checkAcked(p3)
}

// produceOn writes one record on member m and waits for the answer.
func produceOn(t *testing.T, m *testMember, v string) ProduceResult {
	out := make(chan ProduceResult, 1)
	b := mkBatchValue(t, v)
	m.do(t, func() {
		m.r.Produce(&ProduceArgs{Generation: GenerationUnknown, Records: b}, func(res ProduceResult) { out <- res })
	})
	return <-out
}

// TestMembershipChangeRefusals: one change at a time, changes that do not
// fit the configuration, and a replica that is not the primary.
func TestMembershipChangeRefusals(t *testing.T) {
	tg := newTestGroup(t)
	for _, id := range ids123 {
		tg.start(id, ids123, nil)
	}
	p := tg.primary()
	var follower *testMember
	for _, id := range ids123 {
		if id != p.id {
			follower = tg.member(id)
			break
		}
	}

	// A second change while the first waits for its commit.
	first, second := make(chan ConfChangeResult, 1), make(chan ConfChangeResult, 1)
	p.do(t, func() {
		p.r.AddLearner(4, func(res ConfChangeResult) { first <- res })
		p.r.AddLearner(5, func(res ConfChangeResult) { second <- res })
	})
	for _, c := range []struct {
		ch   chan ConfChangeResult
		want error
	}{{second, raftlite.ErrConfChangePending}, {first, nil}} {
		select {
		case res := <-c.ch:
			if !errors.Is(res.Err, c.want) {
				t.Fatalf("two changes at once: %v, want %v", res.Err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a change was never answered")
		}
	}
	for _, c := range []struct {
		name string
		fn   func(*Replica, func(ConfChangeResult))
	}{
		{"add a member again", addLearner(4)},
		{"promote a voter", promote(2, 0)},
		{"promote a voter, waiting", promote(2, time.Second)},
		{"remove a non-member", remove(9)},
		{"add node 0", addLearner(0)},
	} {
		if res := tg.change(p, c.fn); !errors.Is(res.Err, raftlite.ErrInvalidConfChange) {
			t.Errorf("%s: %v, want ErrInvalidConfChange", c.name, res.Err)
		}
	}
	if res := tg.change(follower, addLearner(6)); !errors.Is(res.Err, ErrNotPrimary) {
		t.Fatalf("change on a follower: %v", res.Err)
	}
	follower.do(t, func() {
		if _, err := follower.r.MemberProgress(); !errors.Is(err, ErrNotPrimary) {
			t.Errorf("progress on a follower: %v", err)
		}
	})
	// The learner that never ran is removed again; the group is back to
	// its creation configuration.
	if res := tg.change(p, remove(4)); res.Err != nil || res.Conf != conf(ids123, nil) {
		t.Fatalf("remove learner 4: %+v", res)
	}
}

func TestConfPayload(t *testing.T) {
	for _, c := range []raftlite.Membership{conf(ids123, nil), conf([]raftlite.NodeID{32}, []raftlite.NodeID{1, 31})} {
		got, err := decodeConf(confPayload(c))
		if err != nil || got != c {
			t.Fatalf("%v: %v %v", c, got, err)
		}
	}
	for _, b := range [][]byte{nil, {1}, {2, 0, 0, 0, 1, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 1, 0, 0, 0, 1}} {
		if _, err := decodeConf(b); err == nil {
			t.Errorf("%x decoded", b)
		}
	}
}

// TestLearnerJoinsAfterRetention adds a learner whose configuration entry
// the primary's retention has since deleted: the primary resets the
// learner's log (MsgReset) with the configuration in force at its log
// start, which the learner keeps as its log's base, restarts included.
func TestLearnerJoinsAfterRetention(t *testing.T) {
	tg := newTestGroup(t)
	tg.logCfg.SegmentBytes, tg.logCfg.RetentionBytes = 16<<10, 1
	for _, id := range ids123 {
		tg.start(id, ids123, nil)
	}
	p := tg.primary()
	if res := tg.change(p, addLearner(4)); res.Err != nil {
		t.Fatalf("add learner 4: %v", res.Err)
	}
	var confAt int64
	p.do(t, func() { confAt = p.r.Raft().Status().ConfIndex })
	big := string(make([]byte, 2000))
	for i := 0; i < 40; i++ {
		if res := produceOn(t, p, big); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	// (Nothing fails the test on a shard's thread: t.Fatal there would
	// end the shard's goroutine.)
	var start int64
	var err error
	p.do(t, func() {
		_, err = p.r.ApplyRetention()
		start = p.r.log.LogStartOffset()
	})
	if err != nil || start <= confAt {
		t.Fatalf("retention kept the log from %d (%v), the configuration entry is at %d", start, err, confAt)
	}
	m4 := tg.start(4, ids123, ids4)
	tg.waitFor(m4, "learner 4 is reset past the configuration entry and catches up", func(r *Replica) bool {
		return r.log.LogStartOffset() > confAt && r.CommitEnd() > confAt+40
	})
	want := conf(ids123, ids4)
	var got raftlite.Membership
	m4.do(t, func() { got = m4.r.Membership() })
	if got != want {
		t.Fatalf("learner after the reset: %v, want %v", got, want)
	}
	// Restarted with a configuration that is not the log's, it finds the
	// log's base.
	tg.stop(4)
	m4 = tg.start(4, ids4, nil)
	m4.do(t, func() { got = m4.r.Membership() })
	if got != want {
		t.Fatalf("learner restarted: %v, want %v", got, want)
	}
	if res := tg.change(p, promote(4, 5*time.Second)); res.Err != nil {
		t.Fatalf("promote 4: %v", res.Err)
	}
}

// TestPrimaryStopsMidChange: the primary stops before its change commits.
// The caller learns the outcome is unknown; the survivors elect a primary
// that either kept the entry or lost it, and agree on which.
func TestPrimaryStopsMidChange(t *testing.T) {
	tg := newTestGroup(t)
	for _, id := range ids123 {
		tg.start(id, ids123, nil)
	}
	p1 := tg.primary()
	out := make(chan ConfChangeResult, 1)
	p1.do(t, func() {
		p1.r.AddLearner(4, func(res ConfChangeResult) { out <- res })
		p1.host.Close(nil) // nothing committed yet: the acks come from other shards
	})
	select {
	case res := <-out:
		if !errors.Is(res.Err, ErrConfChangeUnknown) {
			t.Fatalf("change whose primary stopped: %v, want ErrConfChangeUnknown", res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a change whose primary stopped was never answered")
	}
	tg.stop(p1.id)
	p2 := tg.primary()
	res := tg.change(p2, addLearner(4))
	if res.Err != nil && !errors.Is(res.Err, raftlite.ErrInvalidConfChange) {
		t.Fatalf("add learner 4 again on the new primary: %v", res.Err)
	}
	want := conf(ids123, ids4)
	for _, id := range ids123 {
		if id == p1.id {
			continue
		}
		tg.waitFor(tg.member(id), "the survivors agree on the configuration", func(r *Replica) bool {
			return r.Membership() == want && r.CommitEnd() > r.Raft().Status().ConfIndex
		})
	}
}

// A replica whose log no longer counts it a voter (it was removed) does not
// campaign after one tick as the preferred primary of the creation
// configuration the node may still pass: it holds like any other.
func TestRemovedReplicaIsNotPreferred(t *testing.T) {
	g, err := shard.NewGroup(shard.Config{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	sh := g.Shard(0)
	dir := t.TempDir() + "/p0"
	var h *Host
	var r *Replica
	out := make(chan ConfChangeResult, 1)
	preVotes := 0 // touched on the shard only
	do := func(fn func()) {
		if err := sh.Do(func(*shard.Shard) { fn() }); err != nil {
			t.Fatal(err)
		}
	}
	open := func(self raftlite.NodeID, replicas []raftlite.NodeID) {
		do(func() {
			r, err = h.Open(Config{DenseOffsets: true, FS: vfs.OS(), Dir: dir, Log: segment.Config{BatchBytesMax: 1 << 20},
				Topic: "t", TopicID: [16]byte{1}, Partition: 0, Self: self, Replicas: replicas,
				Send: func(_ *Replica, msgs []raftlite.Message) {
					for _, m := range msgs {
						if m.Type == raftlite.MsgPreVote {
							preVotes++
						}
					}
				}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	do(func() { h, err = NewHost(sh, testEngine(vfs.OS()), time.Hour, 0) })
	if err != nil {
		t.Fatal(err)
	}
	defer do(func() { h.Close(nil) })
	// A group of one writes a configuration entry: voters {1}, learner 2.
	open(1, []raftlite.NodeID{1})
	for deadline := time.Now().Add(10 * time.Second); ; {
		var ok bool
		do(func() { ok = r.IsPrimary() && r.CommitEnd() >= r.log.LogEndOffset() })
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a group of one did not commit its no-op")
		}
		time.Sleep(time.Millisecond)
	}
	do(func() { r.AddLearner(2, func(res ConfChangeResult) { out <- res }) })
	select {
	case res := <-out:
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("change not answered")
	}
	do(func() { err = h.CloseReplica(r.Key(), nil) })
	if err != nil {
		t.Fatal(err)
	}
	// Node 3, first in the replica set it is given, finds a log in which
	// it is no member.
	open(3, []raftlite.NodeID{3, 1, 4})
	do(func() {
		for i := 0; i < 2; i++ {
			r.Tick()
		}
	})
	var got raftlite.Membership
	do(func() { got = r.Membership() })
	if want := conf([]raftlite.NodeID{1}, []raftlite.NodeID{2}); got != want {
		t.Fatalf("configuration from the log: %v, want %v", got, want)
	}
	if preVotes != 0 {
		t.Fatalf("a replica its log removed campaigned as preferred (%d pre-votes in two ticks)", preVotes)
	}
}
