package node

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/service"
)

// The groups scenario of the whole-node simulator: members of one
// consumer group join, sync, heartbeat and commit offsets of the first
// topic's partitions through the service, as the Kafka and native front
// ends call it, while the simulator crashes nodes (half of the crashes it
// draws take the group's coordinator's node, so the coordinator fails
// over to another primary of its __groups partition, which replays the
// partition). Members follow Kafka's client rules: they find the
// coordinator, rejoin on REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION,
// rejoin with no id on UNKNOWN_MEMBER_ID, fetch a partition's committed
// offset when it is assigned to them and commit upwards from it.
//
// Checks, at every answer:
//
//   - one generation at a time: once a generation's assignment was handed
//     out (a SyncGroup answered), no sync or commit is answered success at
//     an older generation (a coordinator that lost a durable generation,
//     or two coordinators answering at once, would);
//   - within a generation no partition is assigned to two members;
//   - committed offsets never go back: every acknowledged commit of a
//     partition is at or above the last one acknowledged, and a fetch of
//     the group's offsets answers at least what was acknowledged before it
//     was sent (an acknowledged commit lost in a failover would not);
//
// and once settled, the coordinator's offsets are every partition's last
// acknowledged commit.

// Bounds of the scenario.
const (
	snGroupName        = "g1"
	snGroupSession     = 2 * time.Second
	snGroupRebalance   = 2 * time.Second
	snGroupCallMax     = time.Second // a call unanswered this long is sent again (its node may have crashed)
	snGroupJoinCallMax = 3 * time.Second
	snGroupBeatMs      = 150
)

// snGroups is the scenario's state: its members and what the checks
// remember.
type snGroups struct {
	s       *snSim
	members []*snMember
	topic   *snTopic
	// synced is the newest generation whose assignment a sync handed out.
	synced int32
	// owner is, per generation, which member each partition went to.
	owner map[int32]map[int32]string
	// acked is each partition's last acknowledged commit.
	acked map[int32]int64
	// final is the coordinator's answer once settled (nil: not yet), and
	// finalFloor what was acknowledged when it was asked.
	final, finalFloor map[int32]int64
	finalAsk          bool
	stats             snGroupStats
}

// snGroupStats are the scenario's figures.
type snGroupStats struct {
	Joins, Syncs, Heartbeats, CommitsAcked, Fetches, Rejoins, CoordinatorCrashes int
	Generations                                                                  int32
}

func (a *snGroupStats) add(b snGroupStats) {
	a.Joins += b.Joins
	a.Syncs += b.Syncs
	a.Heartbeats += b.Heartbeats
	a.CommitsAcked += b.CommitsAcked
	a.Fetches += b.Fetches
	a.Rejoins += b.Rejoins
	a.CoordinatorCrashes += b.CoordinatorCrashes
	a.Generations += b.Generations
}

// snMember is one member of the group.
type snMember struct {
	g     *snGroups
	idx   int
	rng   *rand.Rand
	ops   uint64
	guess int32
	id    string
	gen   int32
	// parts are the partitions of the generation it synced (nil: none
	// held); next the offset it commits next per partition (absent: it
	// must fetch the committed one first).
	parts []int32
	next  map[int32]int64
	// call numbers the requests, so that an answer to an abandoned one
	// changes nothing but the checks.
	call int
}

func newSnGroups(s *snSim) *snGroups {
	return &snGroups{s: s, owner: map[int32]map[int32]string{}, acked: map[int32]int64{}}
}

// start starts the members once topic t (the first) is acknowledged.
func (g *snGroups) start(t *snTopic) {
	if g.topic != nil {
		return
	}
	g.topic = t
	n := 2 + g.s.rng.IntN(2)
	for i := 0; i < n; i++ {
		m := &snMember{g: g, idx: i, rng: rand.New(rand.NewPCG(uint64(g.s.seed), 2<<32|uint64(i))), guess: int32(1 + g.s.rng.IntN(g.s.p.n))}
		g.members = append(g.members, m)
		m.at(time.Duration(1+m.rng.IntN(300))*time.Millisecond, m.join)
	}
}

func (m *snMember) at(d time.Duration, fn func()) {
	m.ops++
	m.g.s.pushKeyed(d, 3<<60|uint64(m.idx), m.ops, fn)
}

// send calls the service of the node the member believes coordinates
// the group, on its shard 0 as a front end does, and retries the whole
// step (again) when no answer came within max.
func (m *snMember) send(max time.Duration, again func(), call func(nd *snNode) func()) {
	s := m.g.s
	m.call++
	c := m.call
	m.at(max, func() {
		if m.call == c {
			m.refind()
			again()
		}
	})
	nd := s.node(m.guess)
	if !nd.up {
		return // the timeout retries elsewhere
	}
	fn := call(nd)
	if err := nd.n.group.Shard(0).Post(fn); err != nil {
		s.fail("member %d: posting a group call: %v", m.idx, err)
	}
}

// refind asks a random live node which node coordinates the group.
func (m *snMember) refind() {
	s := m.g.s
	nd := s.node(int32(1 + m.rng.IntN(s.p.n)))
	if !nd.up || nd.n.svc == nil {
		return
	}
	if gc, err := nd.n.svc.FindCoordinator(snGroupName); err == nil && gc.NodeID > 0 {
		m.guess = gc.NodeID
	}
}

// retry handles an error of a group call: the coordinator moved or is
// loading (find it, then do the step again), or the member must rejoin.
func (m *snMember) retry(err error, again func()) {
	m.call++ // the pending timeout is moot
	delay := time.Duration(20+m.rng.IntN(80)) * time.Millisecond
	var se *service.Error
	switch {
	case errors.Is(err, service.ErrUnknownMember):
		m.id = ""
		m.rejoin()
	case errors.Is(err, service.ErrIllegalGeneration), errors.Is(err, service.ErrRebalanceInProgress):
		m.rejoin()
	case errors.As(err, &se) && se.Hint != nil && se.Hint.NodeID > 0:
		m.guess = se.Hint.NodeID
		m.at(delay, again)
	default:
		m.at(delay, func() { m.refind(); again() })
	}
}

// rejoin drops what the member holds and joins again.
func (m *snMember) rejoin() {
	m.g.stats.Rejoins++
	m.parts, m.next = nil, nil
	m.at(time.Duration(1+m.rng.IntN(20))*time.Millisecond, m.join)
}

func (m *snMember) join() {
	g, s := m.g, m.g.s
	if !s.producing || s.err != nil {
		return
	}
	m.parts, m.next = nil, nil
	req := &service.JoinGroupRequest{Group: snGroupName, MemberID: m.id, ClientID: fmt.Sprintf("m%d", m.idx), ProtocolType: "consumer",
		Protocols: []service.GroupProtocol{{Name: "range", Metadata: []byte{0, 1}}}, SessionTimeout: snGroupSession, RebalanceTimeout: snGroupRebalance}
	m.send(snGroupJoinCallMax, m.join, func(nd *snNode) func() {
		c := m.call
		return func() {
			nd.n.svc.JoinGroup(nd.n.group.Shard(0), req, func(res service.JoinGroupResult, err error) {
				if m.call != c {
					return
				}
				if errors.Is(err, service.ErrMemberIDRequired) {
					m.id = res.MemberID
					m.call++
					m.at(time.Millisecond, m.join)
					return
				}
				if err != nil {
					m.retry(err, m.join)
					return
				}
				m.call++
				g.stats.Joins++
				m.id, m.gen = res.MemberID, res.Generation
				g.stats.Generations = max(g.stats.Generations, res.Generation)
				var assign map[string][]byte
				if res.LeaderID == res.MemberID {
					assign = m.assign(res.Members)
				}
				s.tracef("group: member %d joined generation %d as %s (leader %s)", m.idx, res.Generation, res.MemberID, res.LeaderID)
				m.sync(assign)
			})
		}
	})
}

// assign is the leader's plan: the topic's partitions dealt round robin
// over the members in id order, each member's as big-endian int32s.
func (m *snMember) assign(members []service.GroupMember) map[string][]byte {
	ids := make([]string, len(members))
	for i, mb := range members {
		ids[i] = mb.MemberID
	}
	sort.Strings(ids)
	out := map[string][]byte{}
	for _, id := range ids {
		out[id] = []byte{}
	}
	for p := int32(0); p < m.g.topic.parts; p++ {
		id := ids[int(p)%len(ids)]
		out[id] = binary.BigEndian.AppendUint32(out[id], uint32(p))
	}
	return out
}

func (m *snMember) sync(assign map[string][]byte) {
	g, s := m.g, m.g.s
	if !s.producing || s.err != nil {
		return
	}
	gen := m.gen
	req := &service.SyncGroupRequest{Group: snGroupName, MemberID: m.id, Generation: gen, Assignments: assign}
	m.send(snGroupJoinCallMax, func() { m.sync(assign) }, func(nd *snNode) func() {
		c := m.call
		return func() {
			nd.n.svc.SyncGroup(nd.n.group.Shard(0), req, func(res service.SyncGroupResult, err error) {
				if err == nil {
					g.answered(m, "sync", gen)
					g.hold(req.MemberID, gen, res.Assignment)
				}
				if m.call != c {
					return
				}
				if err != nil {
					m.retry(err, func() { m.sync(assign) })
					return
				}
				m.call++
				g.stats.Syncs++
				m.parts, m.next = nil, map[int32]int64{}
				for b := res.Assignment; len(b) >= 4; b = b[4:] {
					m.parts = append(m.parts, int32(binary.BigEndian.Uint32(b)))
				}
				s.tracef("group: member %d synced generation %d: partitions %v", m.idx, gen, m.parts)
				m.at(time.Duration(1+m.rng.IntN(snGroupBeatMs))*time.Millisecond, m.work)
			})
		}
	})
}

// work is the member's next step while it holds a generation: fetch the
// committed offsets of partitions it has not fetched, else commit or
// heartbeat.
func (m *snMember) work() {
	if !m.g.s.producing || m.g.s.err != nil || m.next == nil {
		return
	}
	for _, p := range m.parts {
		if _, ok := m.next[p]; !ok {
			m.fetch()
			return
		}
	}
	if len(m.parts) > 0 && m.rng.IntN(2) == 0 {
		m.commit()
		return
	}
	m.heartbeat()
}

// again is the member's next step after an answer.
func (m *snMember) again() {
	m.at(time.Duration(snGroupBeatMs/2+m.rng.IntN(snGroupBeatMs))*time.Millisecond, m.work)
}

func (m *snMember) heartbeat() {
	g := m.g
	req := &service.HeartbeatRequest{Group: snGroupName, MemberID: m.id, Generation: m.gen}
	m.send(snGroupCallMax, m.work, func(nd *snNode) func() {
		c := m.call
		return func() {
			nd.n.svc.Heartbeat(nd.n.group.Shard(0), req, func(err error) {
				if m.call != c {
					return
				}
				if err != nil {
					m.retry(err, m.work)
					return
				}
				m.call++
				g.stats.Heartbeats++
				m.again()
			})
		}
	})
}

func (m *snMember) fetch() {
	g := m.g
	req := &service.FetchGroupOffsetsRequest{Group: snGroupName}
	for _, p := range m.parts {
		req.Partitions = append(req.Partitions, service.TopicPartition{Topic: g.topic.name, Partition: p})
	}
	// What was acknowledged before the fetch is sent must be in its answer.
	floor := map[int32]int64{}
	for p, o := range g.acked {
		floor[p] = o
	}
	m.send(snGroupCallMax, m.work, func(nd *snNode) func() {
		c := m.call
		return func() {
			nd.n.svc.FetchGroupOffsets(nd.n.group.Shard(0), req, func(offs []service.CommittedOffset, err error) {
				if err == nil {
					g.fetched(m, offs, floor)
				}
				if m.call != c {
					return
				}
				if err != nil {
					m.retry(err, m.work)
					return
				}
				m.call++
				g.stats.Fetches++
				if m.next != nil {
					for _, o := range offs {
						m.next[o.Partition] = max(o.Offset, 0) + 1
					}
				}
				m.again()
			})
		}
	})
}

func (m *snMember) commit() {
	g := m.g
	gen := m.gen
	p := m.parts[m.rng.IntN(len(m.parts))]
	off := m.next[p]
	req := &service.CommitGroupOffsetsRequest{Group: snGroupName, MemberID: m.id, Generation: gen,
		Offsets: []service.OffsetCommit{{Topic: g.topic.name, Partition: p, Offset: off}}}
	m.send(snGroupCallMax, m.work, func(nd *snNode) func() {
		c := m.call
		return func() {
			nd.n.svc.CommitGroupOffsets(nd.n.group.Shard(0), req, func(entries []error, err error) {
				for _, e := range entries {
					if err == nil {
						err = e
					}
				}
				if err == nil {
					g.answered(m, "commit", gen)
					g.committed(m, p, off)
				}
				if m.call != c {
					return
				}
				if err != nil {
					m.retry(err, m.work)
					return
				}
				m.call++
				if m.next != nil {
					m.next[p] = off + 1 + int64(m.rng.IntN(5))
				}
				m.again()
			})
		}
	})
}

// answered checks a sync or commit answered success at generation gen:
// no generation newer than gen handed out its assignment before.
func (g *snGroups) answered(m *snMember, what string, gen int32) {
	if gen < g.synced {
		g.s.fail("group: member %d's %s answered success at generation %d, after generation %d's assignment was handed out", m.idx, what, gen, g.synced)
	}
	if what == "sync" {
		g.synced = max(g.synced, gen)
	}
}

// hold records the partitions a sync gave member id at gen; another
// member of gen holding one of them fails the seed.
func (g *snGroups) hold(id string, gen int32, assignment []byte) {
	own := g.owner[gen]
	if own == nil {
		own = map[int32]string{}
		g.owner[gen] = own
	}
	for b := assignment; len(b) >= 4; b = b[4:] {
		p := int32(binary.BigEndian.Uint32(b))
		if other, ok := own[p]; ok && other != id {
			g.s.fail("group: generation %d assigned partition %d to %s and %s", gen, p, other, id)
		}
		own[p] = id
	}
}

// committed checks an acknowledged commit: never below the last one.
func (g *snGroups) committed(m *snMember, p int32, off int64) {
	g.stats.CommitsAcked++
	if last, ok := g.acked[p]; ok && off < last {
		g.s.fail("group: partition %d's commit of %d by member %d acknowledged after one of %d: committed offsets went back", p, off, m.idx, last)
	}
	g.acked[p] = max(g.acked[p], off)
	g.s.tracef("group: member %d committed %s/%d at %d (generation %d)", m.idx, g.topic.name, p, off, m.gen)
}

// fetched checks a fetch's answer against what was acknowledged before
// it was sent.
func (g *snGroups) fetched(m *snMember, offs []service.CommittedOffset, floor map[int32]int64) {
	for _, o := range offs {
		if want, ok := floor[o.Partition]; ok && o.Offset < want {
			g.s.fail("group: member %d fetched %d for partition %d, but %d was acknowledged before: committed offsets went back", m.idx, o.Offset, o.Partition, want)
		}
	}
}

// coordinatorNode is the live node whose loaded coordinator holds the
// group's partition, as the service finds it, or nil.
func (g *snGroups) coordinatorNode() *snNode {
	for _, nd := range g.s.nodes {
		if nd.up && nd.n.svc != nil {
			if gc, err := nd.n.svc.FindCoordinator(snGroupName); err == nil && gc.NodeID > 0 {
				if c := g.s.node(gc.NodeID); c.up {
					return c
				}
			}
			return nil
		}
	}
	return nil
}

// settledWhy is "" once the final fetch of the group's offsets was
// answered (asked again while it is not).
func (g *snGroups) settledWhy() string {
	if g.topic == nil || g.final != nil {
		return ""
	}
	if g.s.producing {
		return "group: members still working"
	}
	if !g.finalAsk {
		g.finalAsk = true
		g.askFinal()
	}
	return "group: the final fetch of the committed offsets is unanswered"
}

func (g *snGroups) askFinal() {
	s := g.s
	if g.final != nil || s.err != nil {
		return
	}
	s.pushKeyed(200*time.Millisecond, 3<<60|1<<20, uint64(s.stats.Messages), g.askFinal)
	nd := g.coordinatorNode()
	if nd == nil {
		return
	}
	sh := nd.n.group.Shard(0)
	floor := map[int32]int64{}
	for p, o := range g.acked {
		floor[p] = o
	}
	_ = sh.Post(func() {
		nd.n.svc.FetchGroupOffsets(sh, &service.FetchGroupOffsetsRequest{Group: snGroupName}, func(offs []service.CommittedOffset, err error) {
			if err != nil || g.final != nil {
				return
			}
			g.final, g.finalFloor = map[int32]int64{}, floor
			for _, o := range offs {
				g.final[o.Partition] = o.Offset
			}
		})
	})
}

// check compares the settled coordinator's offsets with the commits
// acknowledged before they were asked.
func (g *snGroups) check() {
	for p, want := range g.finalFloor {
		if got, ok := g.final[p]; !ok || got < want {
			g.s.fail("group: settled, partition %d is committed at %d (present %v), %d was acknowledged", p, got, ok, want)
			return
		}
	}
}

var (
	simNodeGroupsSeedsFlag  = flag.Int("simnode.groups-seeds", 30, "number of whole-node simulation seeds of the groups scenario")
	simNodeGroupsFaultyFlag = flag.Duration("simnode.groups-faulty", 10*time.Second, "simulated time of the adversarial phase of each groups seed")
)

func simNodeGroupsReplayCmd(seed int64) string {
	extra := ""
	if *simNodeNodesFlag != 0 {
		extra += fmt.Sprintf(" -simnode.nodes=%d", *simNodeNodesFlag)
	}
	if *simNodeGroupsFaultyFlag != 10*time.Second {
		extra += fmt.Sprintf(" -simnode.groups-faulty=%v", *simNodeGroupsFaultyFlag)
	}
	return fmt.Sprintf("go test ./cluster/node -run 'TestSimNodeGroups$' -simnode.seed=%d%s -v", seed, extra)
}

// TestSimNodeGroups runs the groups scenario over many seeds
// (-simnode.groups-seeds from -simnode.first-seed), or one with a trace
// (-simnode.seed). A failing seed prints the command that replays it.
func TestSimNodeGroups(t *testing.T) {
	run := func(seed int64, trace func(string)) (snStats, snGroupStats, error) {
		return runNodeSimGroups(seed, *simNodeNodesFlag, *simNodeGroupsFaultyFlag, trace)
	}
	if *simNodeSeedFlag >= 0 {
		var lines []string
		st, gst, err := run(*simNodeSeedFlag, func(l string) { lines = append(lines, l) })
		for _, l := range lines {
			t.Log(l)
		}
		t.Logf("seed %d: %+v %+v", *simNodeSeedFlag, st, gst)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", *simNodeSeedFlag, err, simNodeGroupsReplayCmd(*simNodeSeedFlag))
		}
		return
	}
	count := *simNodeGroupsSeedsFlag
	if testing.Short() {
		count = min(count, 5)
	}
	start := time.Now()
	var total snGroupStats
	failed := 0
	for i := 0; i < count; i++ {
		seed := *simNodeFirstFlag + int64(i)
		_, gst, err := run(seed, nil)
		total.add(gst)
		if err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("seed %d: %v\nreplay: %s", seed, err, simNodeGroupsReplayCmd(seed))
			}
		}
	}
	t.Logf("%d groups seeds in %v: %+v", count, time.Since(start).Round(time.Millisecond), total)
	if total.Syncs == 0 || total.CommitsAcked == 0 {
		t.Errorf("no sync or commit was acknowledged in %d seeds: the scenario checks nothing", count)
	}
}

// TestSimNodeGroupsReplays holds that a seed of the groups scenario
// replays: two runs trace the same lines.
func TestSimNodeGroupsReplays(t *testing.T) {
	for _, seed := range []int64{2, 5} {
		var a, b []string
		_, _, errA := runNodeSimGroups(seed, 0, 2*time.Second, func(l string) { a = append(a, l) })
		_, _, errB := runNodeSimGroups(seed, 0, 2*time.Second, func(l string) { b = append(b, l) })
		if (errA == nil) != (errB == nil) {
			t.Fatalf("seed %d: %v, then %v", seed, errA, errB)
		}
		if len(a) != len(b) {
			t.Fatalf("seed %d: %d lines, then %d", seed, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("seed %d: the runs differ at line %d:\n%s\n%s", seed, i, a[i], b[i])
			}
		}
	}
}
