package groups

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

// noDelay completes an empty group's first rebalance at once.
var noDelay = func() Config { c := DefaultConfig; c.InitialRebalanceDelay = 0; return c }()

// call records what a parked call was answered, if it was.
type joinCall struct {
	done bool
	res  JoinResult
	err  error
}

func join(c *Coordinator, now time.Time, id string, protos ...string) *joinCall {
	jc := &joinCall{}
	var ps []Protocol
	for _, p := range protos {
		ps = append(ps, Protocol{Name: p, Metadata: []byte(p + "-" + id)})
	}
	if len(ps) == 0 {
		ps = []Protocol{{Name: "range"}}
	}
	c.Join(now, JoinRequest{Group: "g", MemberID: id, ClientID: "c", ProtocolType: "consumer", Protocols: ps,
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second}, func(r JoinResult, err error) {
		jc.done, jc.res, jc.err = true, r, err
	})
	return jc
}

type syncCall struct {
	done bool
	a    []byte
	err  error
}

func syncg(c *Coordinator, now time.Time, id string, gen int32, as map[string][]byte) *syncCall {
	sc := &syncCall{}
	c.Sync(now, SyncRequest{Group: "g", MemberID: id, Generation: gen, Assignments: as}, func(a []byte, err error) {
		sc.done, sc.a, sc.err = true, a, err
	})
	return sc
}

// twoMembers brings a group to Stable at generation 2 with members a and
// b (a leads), and returns their ids.
func twoMembers(t *testing.T, c *Coordinator) (a, b string) {
	t.Helper()
	j1 := join(c, t0, "")
	if !j1.done || j1.err != nil || j1.res.Generation != 1 {
		t.Fatalf("first join: %+v", j1)
	}
	a = j1.res.MemberID
	if s := syncg(c, t0, a, 1, map[string][]byte{a: []byte("all")}); !s.done || string(s.a) != "all" {
		t.Fatalf("leader's sync: %+v", s)
	}
	j2 := join(c, t0, "")
	if j2.done {
		t.Fatalf("second join answered before the first member rejoined: %+v", j2)
	}
	if err := c.Heartbeat(t0, "g", a, 1); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat during the rebalance: %v", err)
	}
	j1 = join(c, t0, a)
	if !j1.done || !j2.done || j1.res.Generation != 2 || j2.res.Generation != 2 {
		t.Fatalf("rejoin: %+v %+v", j1, j2)
	}
	b = j2.res.MemberID
	if j1.res.LeaderID != a || len(j1.res.Members) != 2 || len(j2.res.Members) != 0 {
		t.Fatalf("leader %q (want %q), leader sees %d members, follower %d", j1.res.LeaderID, a, len(j1.res.Members), len(j2.res.Members))
	}
	sb := syncg(c, t0, b, 2, nil)
	if sb.done {
		t.Fatal("follower's sync answered before the leader's")
	}
	sa := syncg(c, t0, a, 2, map[string][]byte{a: []byte("pa"), b: []byte("pb")})
	if !sa.done || !sb.done || string(sa.a) != "pa" || string(sb.a) != "pb" {
		t.Fatalf("syncs: %+v %+v", sa, sb)
	}
	return a, b
}

func TestJoinSyncTwoMembers(t *testing.T) {
	c := New(noDelay)
	a, b := twoMembers(t, c)
	d, err := c.Describe("g")
	if err != nil || d.State != Stable || d.Generation != 2 || len(d.Members) != 2 || d.Protocol != "range" {
		t.Fatalf("describe: %+v %v", d, err)
	}
	for _, id := range []string{a, b} {
		if err := c.Heartbeat(t0.Add(time.Second), "g", id, 2); err != nil {
			t.Fatalf("heartbeat %s: %v", id, err)
		}
	}
}

func TestErrors(t *testing.T) {
	c := New(noDelay)
	a, _ := twoMembers(t, c)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"heartbeat unknown member", c.Heartbeat(t0, "g", "nobody", 2), ErrUnknownMember},
		{"heartbeat unknown group", c.Heartbeat(t0, "other", a, 2), ErrUnknownMember},
		{"heartbeat old generation", c.Heartbeat(t0, "g", a, 1), ErrIllegalGeneration},
		{"heartbeat new generation", c.Heartbeat(t0, "g", a, 3), ErrIllegalGeneration},
		{"commit unknown member", c.CheckCommit(t0, "g", "nobody", 2), ErrUnknownMember},
		{"commit old generation", c.CheckCommit(t0, "g", a, 1), ErrIllegalGeneration},
		{"simple commit to a group with members", c.CheckCommit(t0, "g", "", -1), ErrIllegalGeneration},
		{"commit by a member", c.CheckCommit(t0, "g", a, 2), nil},
		{"simple commit to an unknown group", c.CheckCommit(t0, "solo", "", -1), nil},
		{"delete a group with members", c.Delete("g"), ErrNonEmptyGroup},
		{"delete an unknown group", c.Delete("solo"), ErrUnknownGroup},
		{"leave unknown member", c.Leave(t0, "g", []string{"nobody"})[0], ErrUnknownMember},
	} {
		if !errors.Is(tc.err, tc.want) || (tc.want == nil) != (tc.err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if s := syncg(c, t0, "nobody", 2, nil); !errors.Is(s.err, ErrUnknownMember) {
		t.Errorf("sync unknown member: %v", s.err)
	}
	if s := syncg(c, t0, a, 7, nil); !errors.Is(s.err, ErrIllegalGeneration) {
		t.Errorf("sync wrong generation: %v", s.err)
	}
	if j := join(c, t0, "nobody"); !errors.Is(j.err, ErrUnknownMember) {
		t.Errorf("join with an unknown id: %+v", j)
	}
	if j := join(c, t0, "", "sticky"); !errors.Is(j.err, ErrInconsistentProtocol) {
		t.Errorf("join with a protocol no member has: %+v", j)
	}
	jc := &joinCall{}
	c.Join(t0, JoinRequest{Group: "g", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}},
		SessionTimeout: time.Millisecond}, func(r JoinResult, err error) { jc.done, jc.err = true, err })
	if !errors.Is(jc.err, ErrInvalidSessionTimeout) {
		t.Errorf("join with a 1 ms session: %v", jc.err)
	}
}

// A member that stops heartbeating is removed once its session runs
// out, not before; the others are made to rejoin, and the rebalance ends
// without it.
func TestSessionExpiry(t *testing.T) {
	c := New(noDelay)
	a, b := twoMembers(t, c)
	at := t0
	for i := 0; i < 3; i++ {
		at = at.Add(5 * time.Second)
		if err := c.Heartbeat(at, "g", a, 2); err != nil {
			t.Fatal(err)
		}
		c.Tick(at)
	}
	// b last heard at t0 with a 10 s session: 15 s later it is gone.
	if err := c.Heartbeat(at, "g", b, 2); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("expired member's heartbeat: %v", err)
	}
	if err := c.Heartbeat(at, "g", a, 2); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("survivor's heartbeat: %v", err)
	}
	j := join(c, at, a)
	if !j.done || j.err != nil || j.res.Generation != 3 || len(j.res.Members) != 1 {
		t.Fatalf("survivor's rejoin: %+v", j)
	}
}

// A session that has not run out keeps the member.
func TestSessionKeptByHeartbeats(t *testing.T) {
	c := New(noDelay)
	a, b := twoMembers(t, c)
	at := t0
	for i := 0; i < 10; i++ {
		at = at.Add(9 * time.Second)
		for _, id := range []string{a, b} {
			if err := c.Heartbeat(at, "g", id, 2); err != nil {
				t.Fatalf("heartbeat %d of %s: %v", i, id, err)
			}
		}
		c.Tick(at)
	}
}

// A member that does not rejoin within the rebalance timeout is dropped
// and the rebalance completes with those that did.
func TestRebalanceTimeout(t *testing.T) {
	c := New(noDelay)
	a, b := twoMembers(t, c)
	j3 := join(c, t0.Add(time.Second), "")
	if j3.done {
		t.Fatal("a third member's join was answered at once")
	}
	ja := join(c, t0.Add(2*time.Second), a)
	// b keeps heartbeating (it is told to rejoin) but never does.
	c.Heartbeat(t0.Add(5*time.Second), "g", b, 2)
	c.Tick(t0.Add(15 * time.Second))
	if ja.done || j3.done {
		t.Fatal("the rebalance ended before its timeout")
	}
	c.Tick(t0.Add(22 * time.Second))
	if !ja.done || !j3.done || ja.res.Generation != 3 || len(ja.res.Members) != 2 {
		t.Fatalf("after the timeout: %+v %+v", ja, j3)
	}
	if err := c.Heartbeat(t0.Add(22*time.Second), "g", b, 2); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("the member that did not rejoin: %v", err)
	}
}

// JoinGroup v4+: an empty id is answered MEMBER_ID_REQUIRED with an id;
// a join with it is a member; an id never used lapses.
func TestMemberIDRequired(t *testing.T) {
	c := New(noDelay)
	jc := &joinCall{}
	req := JoinRequest{Group: "g", ClientID: "c", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}},
		SessionTimeout: 10 * time.Second, RequireKnownMember: true}
	c.Join(t0, req, func(r JoinResult, err error) { jc.done, jc.res, jc.err = true, r, err })
	if !errors.Is(jc.err, ErrMemberIDRequired) || jc.res.MemberID == "" {
		t.Fatalf("first join: %+v", jc)
	}
	req.MemberID = jc.res.MemberID
	c.Join(t0, req, func(r JoinResult, err error) { jc.done, jc.res, jc.err = true, r, err })
	if jc.err != nil || jc.res.Generation != 1 || jc.res.LeaderID != req.MemberID {
		t.Fatalf("join with the id: %+v", jc)
	}
	c.Join(t0, JoinRequest{Group: "g", ClientID: "d", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}},
		SessionTimeout: 10 * time.Second, RequireKnownMember: true}, func(r JoinResult, err error) { jc.res, jc.err = r, err })
	lapsed := jc.res.MemberID
	c.Tick(t0.Add(11 * time.Second))
	if j := join(c, t0.Add(11*time.Second), lapsed); !errors.Is(j.err, ErrUnknownMember) {
		t.Fatalf("join with a lapsed id: %+v", j)
	}
}

// Leaving rebalances the rest; the last to leave empties the group,
// which may then be deleted.
func TestLeave(t *testing.T) {
	c := New(noDelay)
	a, b := twoMembers(t, c)
	if errs := c.Leave(t0, "g", []string{b}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := c.Heartbeat(t0, "g", a, 2); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("after a leave: %v", err)
	}
	j := join(c, t0, a)
	if !j.done || j.res.Generation != 3 {
		t.Fatalf("rejoin: %+v", j)
	}
	if errs := c.Leave(t0, "g", []string{a}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if d, _ := c.Describe("g"); d.State != Empty || len(d.Members) != 0 {
		t.Fatalf("after the last leave: %+v", d)
	}
	if err := c.CheckCommit(t0, "g", "", -1); err != nil {
		t.Fatalf("simple commit to the empty group: %v", err)
	}
	if err := c.Delete("g"); err != nil {
		t.Fatal(err)
	}
	if len(c.List()) != 0 {
		t.Fatalf("list after delete: %+v", c.List())
	}
}

// A rebalance started while the leader's assignment is awaited answers
// the parked syncs with REBALANCE_IN_PROGRESS.
func TestSyncInterruptedByJoin(t *testing.T) {
	c := New(noDelay)
	a, b := twoMembers(t, c)
	ja := join(c, t0, a)
	jb := join(c, t0, b)
	if !ja.done || !jb.done {
		t.Fatal("rejoins not answered")
	}
	follower := b
	if ja.res.LeaderID != a {
		follower = a
	}
	sf := syncg(c, t0, follower, 3, nil)
	join(c, t0, "")
	if !sf.done || !errors.Is(sf.err, ErrRebalanceInProgress) {
		t.Fatalf("parked sync: %+v", sf)
	}
}

// The protocol is the one most members prefer among those all support.
func TestChooseProtocol(t *testing.T) {
	for _, tc := range []struct {
		members [][]string
		want    string
	}{
		{[][]string{{"range"}}, "range"},
		{[][]string{{"sticky", "range"}, {"sticky", "range"}}, "sticky"},
		{[][]string{{"sticky", "range"}, {"range"}}, "range"},
		{[][]string{{"a", "b"}, {"b", "a"}, {"b", "a"}}, "b"},
		{[][]string{{"a", "b"}, {"b", "a"}}, "a"},
	} {
		g := &group{members: map[string]*member{}}
		for i, ps := range tc.members {
			m := &member{id: string(rune('a' + i))}
			for _, p := range ps {
				m.protocols = append(m.protocols, Protocol{Name: p})
			}
			g.members[m.id] = m
		}
		if got := g.chooseProtocol(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.members, got, tc.want)
		}
	}
}

// Reset (the node stopped coordinating) answers parked joins and drops
// every group.
func TestReset(t *testing.T) {
	c := New(noDelay)
	a, _ := twoMembers(t, c)
	ja := join(c, t0, a)
	c.Reset()
	if !ja.done || !errors.Is(ja.err, ErrNotCoordinator) {
		t.Fatalf("parked join after reset: %+v", ja)
	}
	if len(c.List()) != 0 {
		t.Fatal("groups kept after reset")
	}
}

// An empty group's first rebalance waits the initial delay, so members
// that start together share generation 1; a Tick past it completes it.
func TestInitialRebalanceDelay(t *testing.T) {
	cfg := DefaultConfig
	cfg.InitialRebalanceDelay = 3 * time.Second
	c := New(cfg)
	j1 := join(c, t0, "")
	j2 := join(c, t0.Add(time.Second), "")
	c.Tick(t0.Add(2 * time.Second))
	if j1.done || j2.done {
		t.Fatal("the first rebalance completed before the initial delay")
	}
	c.Tick(t0.Add(3*time.Second + time.Millisecond))
	if !j1.done || !j2.done || j1.res.Generation != 1 || j2.res.Generation != 1 || len(j1.res.Members)+len(j2.res.Members) != 2 {
		t.Fatalf("after the delay: %+v %+v", j1, j2)
	}
}

// A follower parked in a sync longer than its session is not expired
// while the leader's session holds; once the leader's runs out, the
// rebalance answers the parked sync.
func TestParkedSyncOutlivesSession(t *testing.T) {
	c := New(noDelay)
	a, b := twoMembers(t, c)
	ja, jb := join(c, t0, a), join(c, t0, b)
	if !ja.done || !jb.done {
		t.Fatal("rejoins not answered")
	}
	leader, follower := ja.res.LeaderID, b
	if leader == b {
		follower = a
	}
	sf := syncg(c, t0, follower, 3, nil)
	for at := t0.Add(5 * time.Second); at.Before(t0.Add(30 * time.Second)); at = at.Add(5 * time.Second) {
		if err := c.Heartbeat(at, "g", leader, 3); err != nil {
			t.Fatal(err)
		}
		c.Tick(at)
	}
	if sf.done {
		t.Fatalf("parked sync answered while the leader lives: %+v", sf)
	}
	c.Tick(t0.Add(45 * time.Second))
	if !sf.done || !errors.Is(sf.err, ErrRebalanceInProgress) {
		t.Fatalf("after the leader expired: %+v", sf)
	}
}

// A static member that restarts (joins with its instance id and no
// member id) takes its old place in a stable group at once, same
// generation, same assignment, no rebalance; the old id is fenced; a
// static member that stops is removed once its session runs out.
func TestStaticMember(t *testing.T) {
	c := New(noDelay)
	static := func(at time.Time, id string) *joinCall {
		jc := &joinCall{}
		c.Join(at, JoinRequest{Group: "g", MemberID: id, InstanceID: "i1", ClientID: "c", ProtocolType: "consumer",
			Protocols: []Protocol{{Name: "range"}}, SessionTimeout: 10 * time.Second, RequireKnownMember: true},
			func(r JoinResult, err error) { jc.done, jc.res, jc.err = true, r, err })
		return jc
	}
	j1 := static(t0, "")
	if !j1.done || j1.err != nil || j1.res.Generation != 1 {
		t.Fatalf("a static member's first join (no MEMBER_ID_REQUIRED): %+v", j1)
	}
	old := j1.res.MemberID
	j2 := join(c, t0, "")
	ja := static(t0, old)
	if !ja.done || !j2.done || ja.res.Generation != 2 {
		t.Fatalf("second generation: %+v %+v", ja, j2)
	}
	other := j2.res.MemberID
	assign := map[string][]byte{old: []byte("p-static"), other: []byte("p-other")}
	leader := ja.res.LeaderID
	s1 := syncg(c, t0, leader, 2, assign)
	s2 := syncg(c, t0, map[bool]string{true: other, false: old}[leader == old], 2, nil)
	if !s1.done || !s2.done {
		t.Fatalf("syncs: %+v %+v", s1, s2)
	}
	// The restart.
	jr := static(t0.Add(time.Second), "")
	if !jr.done || jr.err != nil || jr.res.Generation != 2 || jr.res.MemberID == old {
		t.Fatalf("restart: %+v", jr)
	}
	if s := syncg(c, t0.Add(time.Second), jr.res.MemberID, 2, nil); !s.done || string(s.a) != "p-static" {
		t.Fatalf("restart's sync: %+v", s)
	}
	if err := c.Heartbeat(t0.Add(time.Second), "g", other, 2); err != nil {
		t.Fatalf("the other member after the restart (no rebalance): %v", err)
	}
	if j := static(t0.Add(time.Second), old); !errors.Is(j.err, ErrFencedInstance) {
		t.Fatalf("the old instance: %+v", j)
	}
	if err := c.Heartbeat(t0.Add(time.Second), "g", old, 2); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("the old id's heartbeat: %v", err)
	}
	if c.MemberOfInstance("g", "i1") != jr.res.MemberID {
		t.Fatal("MemberOfInstance")
	}
	// It stops: gone after its session.
	c.Heartbeat(t0.Add(8*time.Second), "g", other, 2)
	c.Tick(t0.Add(12 * time.Second))
	if c.MemberOfInstance("g", "i1") != "" {
		t.Fatal("a static member that stopped heartbeating was kept")
	}
	if err := c.Heartbeat(t0.Add(12*time.Second), "g", other, 2); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("after the static member expired: %v", err)
	}
}
