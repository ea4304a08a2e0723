package groups

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"
)

// memLog is a Log that keeps each Append as one batch and answers it at
// once, inside Append (the case the coordinator's outbox must survive),
// or, with hold, when the test releases it.
type memLog struct {
	batches [][]Record
	hold    bool
	held    []func(error)
}

func (l *memLog) Append(recs []Record, done func(error)) {
	l.batches = append(l.batches, recs)
	if l.hold {
		l.held = append(l.held, done)
		return
	}
	done(nil)
}

// release answers the held appends with err, oldest first.
func (l *memLog) release(err error) {
	h := l.held
	l.held = nil
	for _, d := range h {
		d(err)
	}
}

// groupView is what must survive a failover of one group.
type groupView struct {
	State                          State
	Generation                     int32
	ProtocolType, Protocol, Leader string
	Members                        []memberImage
	Static                         map[string]string
	Offsets                        map[TopicPartition]Offset
}

// view is every group's durable state.
func view(c *Coordinator) map[string]groupView {
	defer c.run()
	out := map[string]groupView{}
	for name, g := range c.groups {
		im := g.image()
		v := groupView{State: g.state, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
			Leader: g.leader, Members: im.members, Static: map[string]string{}, Offsets: map[TopicPartition]Offset{}}
		for k, id := range g.static {
			v.Static[k] = id
		}
		for k, o := range g.offsets {
			v.Offsets[k] = o
		}
		out[name] = v
	}
	return out
}

// replayed is a fresh coordinator fed the first n batches of l.
func replayed(t *testing.T, batches [][]Record) *Coordinator {
	t.Helper()
	c := New(noDelay)
	for _, b := range batches {
		for _, r := range b {
			if err := c.Replay(t0, r); err != nil {
				t.Fatalf("replay %q: %v", r.Key, err)
			}
		}
	}
	return c
}

func joinG(c *Coordinator, now time.Time, group, id, instance string) *joinCall {
	jc := &joinCall{}
	c.Join(now, JoinRequest{Group: group, MemberID: id, InstanceID: instance, ClientID: "c", Host: "h", ProtocolType: "consumer",
		Protocols:      []Protocol{{Name: "range", Metadata: []byte("sub-" + group)}, {Name: "sticky", Metadata: []byte("st")}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second}, func(r JoinResult, err error) {
		jc.done, jc.res, jc.err = true, r, err
	})
	return jc
}

func syncG(c *Coordinator, now time.Time, group, id string, gen int32, as map[string][]byte) *syncCall {
	sc := &syncCall{}
	c.Sync(now, SyncRequest{Group: group, MemberID: id, Generation: gen, Assignments: as}, func(a []byte, err error) {
		sc.done, sc.a, sc.err = true, a, err
	})
	return sc
}

func commitG(t *testing.T, c *Coordinator, now time.Time, group, id string, gen int32, offs ...Offset) {
	t.Helper()
	var got error
	called := false
	c.Commit(now, group, id, gen, offs, func(err error) { called, got = true, err })
	if !called || got != nil {
		t.Fatalf("commit %s %v: called %v, %v", group, offs, called, got)
	}
}

func off(topic string, p int32, o int64) Offset {
	return Offset{TopicPartition: TopicPartition{topic, p}, TopicID: [16]byte{byte(len(topic)), byte(p)}, Offset: o,
		Metadata: fmt.Sprintf("m%d", o)}
}

// TestReplayEveryPrefix runs a coordinator through joins, syncs,
// commits, a leave, a static restart, expiry, offset deletion and group
// deletion, and checks after each step whose group is at rest (Stable
// or Empty) that replaying the log written so far into a fresh
// coordinator gives the same durable state.
func TestReplayEveryPrefix(t *testing.T) {
	log := &memLog{}
	c := NewLogged(noDelay, log)
	var a, b, s1 string
	var gen int32
	now := t0
	steps := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"first member stable", func(t *testing.T) {
			j := joinG(c, now, "g", "", "")
			a, gen = j.res.MemberID, j.res.Generation
			if s := syncG(c, now, "g", a, gen, map[string][]byte{a: []byte("all")}); !s.done || s.err != nil {
				t.Fatalf("sync: %+v", s)
			}
		}},
		{"member commits", func(t *testing.T) { commitG(t, c, now, "g", a, gen, off("t", 0, 10)) }},
		{"second member joins, stable at gen 2", func(t *testing.T) {
			jb := joinG(c, now, "g", "", "")
			ja := joinG(c, now, "g", a, "")
			if !ja.done || !jb.done {
				t.Fatalf("joins: %+v %+v", ja, jb)
			}
			b, gen = jb.res.MemberID, ja.res.Generation
			sb := syncG(c, now, "g", b, gen, nil)
			sa := syncG(c, now, "g", a, gen, map[string][]byte{a: []byte("p0"), b: []byte("p1")})
			if !sa.done || !sb.done || string(sb.a) != "p1" {
				t.Fatalf("syncs: %+v %+v", sa, sb)
			}
		}},
		{"both commit", func(t *testing.T) {
			commitG(t, c, now, "g", b, gen, off("t", 1, 5), off("u", 0, 7))
			commitG(t, c, now, "g", a, gen, off("t", 0, 20))
		}},
		{"simple consumer commits to another group", func(t *testing.T) { commitG(t, c, now, "h", "", -1, off("t", 0, 3)) }},
		{"b leaves, a rebalances alone", func(t *testing.T) {
			c.Leave(now, "g", []string{b})
			ja := joinG(c, now, "g", a, "")
			gen = ja.res.Generation
			syncG(c, now, "g", a, gen, map[string][]byte{a: []byte("p0,p1")})
		}},
		{"static member stable", func(t *testing.T) {
			j := joinG(c, now, "s", "", "i1")
			s1 = j.res.MemberID
			syncG(c, now, "s", s1, j.res.Generation, map[string][]byte{s1: []byte("static")})
		}},
		{"static member restarts without a rebalance", func(t *testing.T) {
			j := joinG(c, now, "s", "", "i1")
			if j.err != nil || j.res.MemberID == s1 {
				t.Fatalf("restart: %+v", j)
			}
			s1 = j.res.MemberID
		}},
		{"a leaves, group empty", func(t *testing.T) { c.Leave(now, "g", []string{a}) }},
		{"offset deleted", func(t *testing.T) {
			c.DeleteOffsets("g", []TopicPartition{{"u", 0}}, func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			})
		}},
		{"group deleted", func(t *testing.T) {
			if err := c.Delete("h"); err != nil {
				t.Fatal(err)
			}
		}},
		{"static member's session expires", func(t *testing.T) {
			now = now.Add(time.Minute)
			c.Tick(now)
		}},
		{"offsets of a group only commits made, deleted", func(t *testing.T) {
			commitG(t, c, now, "k", "", -1, off("t", 2, 1))
			c.DeleteOffsets("k", []TopicPartition{{"t", 2}}, func(error) {})
		}},
	}
	for _, st := range steps {
		before := len(log.batches)
		st.do(t)
		if len(log.batches) == before {
			t.Fatalf("%s: wrote no record", st.name)
		}
		want := view(c)
		got := view(replayed(t, log.batches))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: replay of %d batches\n got %+v\nwant %+v", st.name, len(log.batches), got, want)
		}
	}
	// Every record prefix, not only batch boundaries, replays cleanly.
	var all []Record
	for _, b := range log.batches {
		all = append(all, b...)
	}
	for n := range all {
		replayed(t, [][]Record{all[:n]})
	}
	// A compacted log (the last record per key; a key whose last record
	// is a tombstone dropped) replays to the same state.
	last := map[string]int{}
	for i, r := range all {
		last[string(r.Key)] = i
	}
	var compacted []Record
	for i, r := range all {
		if last[string(r.Key)] == i && !r.IsTombstone() {
			compacted = append(compacted, r)
		}
	}
	if got, want := view(replayed(t, [][]Record{compacted})), view(c); !reflect.DeepEqual(got, want) {
		t.Fatalf("compacted replay\n got %+v\nwant %+v", got, want)
	}
}

// TestReplayedMembersCarryOn: after a failover the members found in the
// log heartbeat and commit at their generation without rejoining, and a
// new member gets an id no replayed member has.
func TestReplayedMembersCarryOn(t *testing.T) {
	log := &memLog{}
	c := NewLogged(noDelay, log)
	ja := joinG(c, t0, "g", "", "")
	a, gen := ja.res.MemberID, ja.res.Generation
	syncG(c, t0, "g", a, gen, map[string][]byte{a: []byte("all")})
	commitG(t, c, t0, "g", a, gen, off("t", 0, 42))

	r := NewLogged(noDelay, &memLog{})
	for _, b := range log.batches {
		for _, rec := range b {
			if err := r.Replay(t0, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Heartbeat(t0, "g", a, gen); err != nil {
		t.Fatalf("heartbeat after replay: %v", err)
	}
	commitG(t, r, t0, "g", a, gen, off("t", 0, 43))
	if got := r.Offsets("g", []TopicPartition{{"t", 0}, {"t", 9}}); got[0].Offset != 43 || got[1].Offset != -1 {
		t.Fatalf("offsets: %+v", got)
	}
	if err := r.Heartbeat(t0, "g", a, gen-1); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("old generation: %v", err)
	}
	jb := joinG(r, t0, "g", "", "")
	if jb.res.MemberID == a {
		t.Fatalf("new member took the replayed id %q", a)
	}
	ja2 := joinG(r, t0, "g", a, "")
	if !ja2.done || ja2.err != nil || ja2.res.Generation != gen+1 {
		t.Fatalf("rejoin after replay: %+v", ja2)
	}
}

// TestCommitAnsweredWhenDurable: a commit is answered, and visible, only
// after the log says it is durable; one the log fails is answered its
// error and changes nothing.
func TestCommitAnsweredWhenDurable(t *testing.T) {
	log := &memLog{hold: true}
	c := NewLogged(noDelay, log)
	var got []error
	c.Commit(t0, "g", "", -1, []Offset{off("t", 0, 5)}, func(err error) { got = append(got, err) })
	if len(got) != 0 || c.Offsets("g", []TopicPartition{{"t", 0}})[0].Offset != -1 {
		t.Fatalf("answered or applied before durable: %v", got)
	}
	log.release(nil)
	if len(got) != 1 || got[0] != nil || c.Offsets("g", []TopicPartition{{"t", 0}})[0].Offset != 5 {
		t.Fatalf("after durable: %v %+v", got, c.Offsets("g", nil))
	}
	bad := errors.New("not primary")
	c.Commit(t0, "g", "", -1, []Offset{off("t", 0, 9)}, func(err error) { got = append(got, err) })
	log.release(bad)
	if len(got) != 2 || !errors.Is(got[1], bad) || c.Offsets("g", nil)[0].Offset != 5 {
		t.Fatalf("failed append: %v %+v", got, c.Offsets("g", nil))
	}
	c.Commit(t0, "g", "", -1, []Offset{off("t", 0, -2)}, func(err error) { got = append(got, err) })
	if !errors.Is(got[2], ErrInvalidOffset) {
		t.Fatalf("negative offset: %v", got[2])
	}
}

// TestSyncAnsweredWhenDurable: the leader's assignment reaches the
// members only once the group record is durable; a failed append is
// answered its error and the group rebalances.
func TestSyncAnsweredWhenDurable(t *testing.T) {
	for _, fail := range []bool{false, true} {
		log := &memLog{hold: true}
		c := NewLogged(noDelay, log)
		ja := joinG(c, t0, "g", "", "")
		a := ja.res.MemberID
		s := syncG(c, t0, "g", a, ja.res.Generation, map[string][]byte{a: []byte("all")})
		if s.done {
			t.Fatalf("sync answered before the record was durable")
		}
		var err error
		if fail {
			err = errors.New("lost primary")
		}
		log.release(err)
		d, _ := c.Describe("g")
		switch {
		case !s.done:
			t.Fatalf("fail=%v: sync not answered", fail)
		case fail && (!errors.Is(s.err, err) || d.State != PreparingRebalance):
			t.Fatalf("failed append: %+v, state %v", s, d.State)
		case !fail && (s.err != nil || string(s.a) != "all" || d.State != Stable):
			t.Fatalf("durable: %+v, state %v", s, d.State)
		}
	}
}

// TestLogOrderFollowsStateOrder: appends reach the log in the order the
// state changed, also when a done runs inside Append and queues more.
func TestLogOrderFollowsStateOrder(t *testing.T) {
	log := &memLog{}
	c := NewLogged(noDelay, log)
	for i := int64(0); i < 20; i++ {
		c.Commit(t0, "g", "", -1, []Offset{off("t", 0, i)}, func(err error) {
			if err == nil && i%2 == 0 {
				// A commit made from a commit's answer.
				c.Commit(t0, "g", "", -1, []Offset{off("t", 1, i)}, func(error) {})
			}
		})
	}
	var seen []int64
	for _, b := range log.batches {
		for _, r := range b {
			if GroupOfKey(r.Key) != "g" {
				t.Fatalf("key %q", r.Key)
			}
			if string(r.Key) == string(OffsetKey("g", TopicPartition{"t", 0})) {
				var o Offset
				_ = decodeOffset(r.Value, &o)
				seen = append(seen, o.Offset)
			}
		}
	}
	if !sort.SliceIsSorted(seen, func(i, j int) bool { return seen[i] < seen[j] }) || len(seen) != 20 {
		t.Fatalf("log order: %v", seen)
	}
	if got := c.Offsets("g", nil); len(got) != 2 || got[0].Offset != 19 || got[1].Offset != 18 {
		t.Fatalf("offsets: %+v", got)
	}
}

func TestRecordErrors(t *testing.T) {
	good := encodeGroup(groupImage{generation: 3, protocolType: "consumer", protocol: "range", leader: "m-1",
		members: []memberImage{{id: "m-1", session: time.Second, rebalance: time.Second, assignment: []byte("x")}}})
	for _, tc := range []struct {
		name string
		rec  Record
	}{
		{"unknown kind", Record{Key: []byte("other/g"), Value: good}},
		{"empty group name", Record{Key: []byte("group/"), Value: good}},
		{"empty value", Record{Key: GroupKey("g"), Value: []byte{}}},
		{"other version", Record{Key: GroupKey("g"), Value: append([]byte{9}, good[1:]...)}},
		{"truncated", Record{Key: GroupKey("g"), Value: good[:len(good)-1]}},
		{"trailing", Record{Key: GroupKey("g"), Value: append(append([]byte{}, good...), 0)}},
		{"member count past the value", Record{Key: GroupKey("g"), Value: append(append([]byte{}, good[:len(good)-40]...), 0xff, 0xff, 0x7f)}},
		{"offset key without partition", Record{Key: []byte("offset/g/t"), Value: encodeOffset(off("t", 0, 1))}},
		{"offset key with a bad partition", Record{Key: []byte("offset/g/t/x"), Value: encodeOffset(off("t", 0, 1))}},
		{"offset truncated", Record{Key: OffsetKey("g", TopicPartition{"t", 0}), Value: encodeOffset(off("t", 0, 1))[:20]}},
		{"offset without its topic id", Record{Key: OffsetKey("g", TopicPartition{"t", 0}), Value: []byte{1, 0, 0}}},
	} {
		c := New(noDelay)
		if err := c.Replay(t0, tc.rec); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: %v, want ErrCorruptRecord", tc.name, err)
		}
		if len(c.List()) != 0 {
			t.Errorf("%s: a refused record changed the state", tc.name)
		}
	}
	if err := New(noDelay).Replay(t0, LoadMarker()); err != nil {
		t.Fatalf("load marker: %v", err)
	}
	if GroupOfKey(OffsetKey("grp", TopicPartition{"t.x", 3})) != "grp" || GroupOfKey(GroupKey("grp")) != "grp" || GroupOfKey([]byte("x")) != "" {
		t.Fatal("GroupOfKey")
	}
}

// FuzzReplay: no record makes Replay panic, and a group value it reads
// encodes back to the same bytes.
func FuzzReplay(f *testing.F) {
	good := encodeGroup(groupImage{generation: 1, protocolType: "consumer", protocol: "range", leader: "a-1",
		members: []memberImage{{id: "a-1", instance: "i", metadata: []byte{1}, assignment: []byte{2}}}})
	f.Add([]byte("group/g"), []byte{})
	f.Add([]byte("group/g"), good)
	f.Add([]byte("group/g"), append(append([]byte{}, good...), 0xde, 0xad))
	f.Add([]byte("offset/g/t/0"), encodeOffset(off("t", 0, 1<<62)))
	f.Add([]byte("offset/g/t/0"), make([]byte, 1<<16))
	f.Add([]byte(checkpointBeginKey), CheckpointBegin(1).Value)
	f.Add([]byte(checkpointEndKey), CheckpointEnd(1, 0).Value)
	f.Add([]byte(checkpointEndKey), CheckpointEnd(1, 0).Value[:9])
	f.Add([]byte(checkpointEndKey), append(CheckpointEnd(1, 0).Value, 0))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c := New(noDelay)
		_ = c.Replay(t0, Record{Key: key, Value: value})
		// The same record inside a checkpoint, and to a tracker.
		c = New(noDelay)
		_ = c.Replay(t0, CheckpointBegin(1))
		_ = c.Replay(t0, Record{Key: key, Value: value})
		_ = c.Replay(t0, CheckpointEnd(1, 1))
		NewCheckpointTracker().Observe(0, key, value)
		if im, err := decodeGroup(value); err == nil {
			if back := encodeGroup(im); string(back) != string(value) {
				// Durations round to milliseconds; only values this
				// encoder wrote must round-trip.
				if im2, err := decodeGroup(back); err != nil || !reflect.DeepEqual(im, im2) {
					t.Fatalf("round trip: %v", err)
				}
			}
		}
	})
}

// TestConcurrentCommitsShareAnAppend: while one Append is in flight, the
// commits that queue go to the log as one Append once it is answered,
// each answered with it, in order.
func TestConcurrentCommitsShareAnAppend(t *testing.T) {
	log := &memLog{hold: true}
	c := NewLogged(noDelay, log)
	var answered []int64
	for i := int64(1); i <= 5; i++ {
		c.Commit(t0, "g", "", -1, []Offset{off("t", int32(i), i)}, func(err error) {
			if err != nil {
				t.Errorf("commit %d: %v", i, err)
			}
			answered = append(answered, i)
		})
	}
	if len(log.batches) != 1 || len(log.held) != 1 {
		t.Fatalf("%d appends sent before the first was answered", len(log.batches))
	}
	log.release(nil)
	if len(log.batches) != 2 || len(log.batches[1]) != 4 || fmt.Sprint(answered) != "[1]" {
		t.Fatalf("after the first answer: %d appends (the second of %d records), answered %v", len(log.batches), len(log.batches[len(log.batches)-1]), answered)
	}
	log.release(nil)
	if fmt.Sprint(answered) != "[1 2 3 4 5]" || len(c.Offsets("g", nil)) != 5 {
		t.Fatalf("answered %v, offsets %+v", answered, c.Offsets("g", nil))
	}
	// A failed shared append fails every commit in it, and applies none.
	var errs []error
	for i := int64(6); i <= 8; i++ {
		c.Commit(t0, "g", "", -1, []Offset{off("u", 0, i)}, func(err error) { errs = append(errs, err) })
	}
	log.release(nil) // the first, alone
	log.release(errors.New("lost the partition"))
	if len(errs) != 3 || errs[0] != nil || errs[1] == nil || errs[2] == nil || c.Offsets("g", []TopicPartition{{"u", 0}})[0].Offset != 6 {
		t.Fatalf("errors %v, offset %+v", errs, c.Offsets("g", []TopicPartition{{"u", 0}}))
	}
}

// TestLateSyncWaitsForTheRecord: a follower whose SyncGroup arrives after
// the leader's, while the generation's record is still being written, is
// answered only once it is durable (else it could hold a generation that
// a new coordinator never hears of: found by the whole-node simulator),
// and with the log's error when the write fails.
func TestLateSyncWaitsForTheRecord(t *testing.T) {
	for _, fail := range []bool{false, true} {
		log := &memLog{hold: true}
		c := NewLogged(noDelay, log)
		ja := join(c, t0, "")
		a := ja.res.MemberID
		jb := join(c, t0, "") // a rebalance: a must rejoin
		ja = join(c, t0, a)
		if !ja.done || !jb.done || ja.res.Generation != 2 || ja.res.LeaderID != a {
			t.Fatalf("joins: %+v %+v", ja, jb)
		}
		b := jb.res.MemberID
		sa := syncg(c, t0, a, 2, map[string][]byte{a: []byte("pa"), b: []byte("pb")})
		sb := syncg(c, t0, b, 2, nil)
		if sa.done || sb.done {
			t.Fatalf("answered before the record is durable: %+v %+v", sa, sb)
		}
		var err error
		if fail {
			err = errors.New("lost the partition")
		}
		log.release(err)
		switch {
		case !sa.done || !sb.done:
			t.Fatalf("fail %v: not answered once the log answered: %+v %+v", fail, sa, sb)
		case fail && (sb.err == nil || sb.a != nil):
			t.Fatalf("a failed write answered the late sync %+v", sb)
		case !fail && (sb.err != nil || string(sb.a) != "pb" || string(sa.a) != "pa"):
			t.Fatalf("syncs: %+v %+v", sa, sb)
		}
	}
}
