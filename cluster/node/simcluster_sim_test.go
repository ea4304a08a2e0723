package node

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/balance"
	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// The control-plane simulator: N nodes' control planes in one goroutine
// on a simulated clock and a simulated network, driven by one seed.
//
// What runs is the node's own code: the metadata controller's pure core
// (metaCore: the committed log's batches in, the applied state, the
// proposers' results and the readiness rule out), the route table with
// its learn rule and announcements, the liveness detector and its
// down-watch, the failover rule (campaignsAfterDown), the balancer
// driver (balancer, over balancerDeps) and the balance policy, and
// raftlite for the metadata group and for every partition's group.
// What the simulator stands in for: the shards (one event queue), the
// TCP transport (simNet: drop, delay, reorder, partition, heal), the
// segment logs (raftlite.MemLog, durable at once), and the data path
// (partitions carry only their primaries' no-ops; no produce, fetch or
// replica files). docs/design/node-parts.md says the same.

// Bounds of one simulation.
const (
	// simReadyRoundsMax bounds the Ready loop of one group per event.
	simReadyRoundsMax = 64
	// simEventsMax bounds the events of one run (a livelock guard).
	simEventsMax = 5_000_000
	// simSettleMax bounds the time from the heal to a settled cluster.
	simSettleMax = 150 * time.Second
	// simSettleCheckEvery is how often the settled conditions are checked.
	simSettleCheckEvery = time.Second
	// simTopicsMax bounds the topics the clients create.
	simTopicsMax = 6
)

// simClusterOptions configure one run; the rest is drawn from the seed.
type simClusterOptions struct {
	Seed int64
	// Nodes is the roster size (0: drawn, 3 or 5).
	Nodes int
	// Faulty is the length of the adversarial phase.
	Faulty time.Duration
	// Trace, when set, receives one line per notable event.
	Trace func(string)
}

// simClusterResult counts what a run did, for the figures.
type simClusterResult struct {
	Nodes                            int
	Messages, Dropped, Partitions    int
	MetaTerms, PartTerms             int
	TopicsAcked, MovesDone, PeerDown int
	Crashes, ClockJumps              int
	Snapshots, Installs              int
	// Unbalanced is 1 when the run settled with primary counts outside
	// the policy's bounds and no single move left to make.
	Unbalanced   int
	SettledAfter time.Duration
}

// simParams are drawn from the seed.
type simParams struct {
	n                int
	dropPermille     int
	latencyMin       time.Duration
	jitterMax        time.Duration
	partitionPerTick int // permille per heartbeat tick
	partitionTicks   int // longest partition, in ticks
	createPerTick    int // permille per tick: a client asks to create a topic
	balanceEvery     time.Duration
	imbalancePercent int
	crashPerTick     int // permille per tick: one node crashes
	downTicksMax     int // longest a crashed node stays down
	wholeRestart     bool
	jumpPerTick      int // permille per tick: one node's clock jumps
	lagWindow        time.Duration
	// snapEvery is how many applied metadata entries trigger a snapshot
	// and a compaction of the metadata log (0: never).
	snapEvery int64
}

type simEvent struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simMsgKind uint8

const (
	simRaft simMsgKind = iota
	simPing
	simRoutes
	simTransfer
)

type simMsg struct {
	kind     simMsgKind
	from, to int32
	raft     raftlite.Message
	routes   []peerwire.Route
	transfer peerwire.Transfer
}

type simCluster struct {
	o      simClusterOptions
	rng    *rand.Rand
	p      simParams
	clock  *clock.Manual
	start  time.Time
	now    time.Duration
	q      simQueue
	seq    uint64
	events int
	nodes  []*simNode
	// cut[a-1][b-1]: messages from node a to node b are dropped.
	cut    [][]bool
	faults bool
	limits *raftlite.Limits
	hb     time.Duration
	elect  time.Duration
	log    *slog.Logger
	// The checker's records: the leader seen in each term of each group,
	// the committed metadata log (offset -> checksum of its batch), and
	// the topics whose creation was acknowledged.
	leaders   map[raftlite.GroupID]map[int32]int32
	committed map[int64]uint32
	acked     map[string]simAcked
	topicSeq  int
	res       simClusterResult
	err       error
}

type simGroup struct {
	key      [20]byte
	gid      raftlite.GroupID
	rn       *raftlite.Node
	disk     *simDisk
	log      *raftlite.MemLog
	data     map[int64][]byte // batch bytes by base offset (disk.data)
	replicas []raftlite.NodeID
	meta     bool
}

// simAcked is a topic whose creation a client saw acknowledged: its id
// and the term of its entry.
type simAcked struct {
	id   metadata.TopicID
	term int32
}

type simProposal struct {
	ent  raftlite.Entry
	name string
	id   metadata.TopicID
}

// simDisk is what a node keeps across a crash: every group's log (the
// simulator's logs are durable as soon as they are written) and its term
// and vote.
type simDisk struct {
	log  *raftlite.MemLog
	data map[int64][]byte
	hs   raftlite.HardState
	// snap is the metadata snapshot (encodeSnapshot; nil: none), the
	// metadata log compacted up to its end.
	snap []byte
}

// simClock is one node's clock: the simulation's time plus the node's own
// offset, which a clock jump moves.
type simClock struct {
	base *clock.Manual
	off  time.Duration
}

func (c *simClock) Now() time.Time { return c.base.Now().Add(c.off) }

// simNode is one node's control plane.
type simNode struct {
	sc    *simCluster
	id    int32
	clock *simClock
	// up says the node runs; inc counts its starts (events of an earlier
	// incarnation are dropped).
	up          bool
	inc         int
	disks       map[raftlite.GroupID]*simDisk
	core        *metaCore
	view        *View
	loaded      bool
	routes      routes
	live        *liveness
	watch       *downWatch
	bal         *balancer
	meta        *simGroup
	groups      map[raftlite.GroupID]*simGroup
	announce    []peerwire.Route
	sinceFull   time.Duration
	stats       BalanceStats
	rebalancing atomic.Bool
	proposals   []simProposal
	inSync      map[[20]byte][]int32
	lags        lagTable
	// routeTerm is the highest route term this node has held per
	// partition: a route never goes back to an older generation.
	routeTerm map[[20]byte]int32
}

func drawSimParams(rng *rand.Rand, nodes int) simParams {
	p := simParams{
		n:                nodes,
		dropPermille:     rng.IntN(150),
		latencyMin:       time.Duration(1+rng.IntN(5)) * time.Millisecond,
		jitterMax:        time.Duration(rng.IntN(60)) * time.Millisecond,
		partitionPerTick: rng.IntN(15),
		partitionTicks:   5 + rng.IntN(60),
		createPerTick:    20 + rng.IntN(60),
		balanceEvery:     time.Duration(500+rng.IntN(3000)) * time.Millisecond,
		imbalancePercent: []int{0, 10, 25}[rng.IntN(3)],
		crashPerTick:     rng.IntN(8),
		downTicksMax:     5 + rng.IntN(60),
		wholeRestart:     rng.IntN(8) == 0,
		jumpPerTick:      rng.IntN(4),
		lagWindow:        time.Duration(1+rng.IntN(10)) * time.Second,
		snapEvery:        []int64{0, 2, 3, 5, 8}[rng.IntN(5)],
	}
	if p.n == 0 {
		p.n = []int{3, 3, 5}[rng.IntN(3)]
	}
	return p
}

// runSimCluster runs one seeded schedule and returns the first violation.
func runSimCluster(o simClusterOptions) (res simClusterResult, err error) {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0xc105e4))
	sc := &simCluster{o: o, rng: rng, p: drawSimParams(rng, o.Nodes), hb: 100 * time.Millisecond, elect: time.Second,
		start: time.UnixMilli(1_700_000_000_000), leaders: map[raftlite.GroupID]map[int32]int32{},
		committed: map[int64]uint32{}, acked: map[string]simAcked{},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sc.clock = clock.NewManual(sc.start)
	sc.res.Nodes = sc.p.n
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic at %v: %v", sc.now, r)
		}
		res = sc.res
	}()
	lim := raftlite.DefaultLimits()
	lim.ElectionTicks = int32(sc.elect / sc.hb)
	lim.HeartbeatTicks = 1
	lim.Quiesce = sc.p.n > 1
	sc.limits = lim
	sc.cut = make([][]bool, sc.p.n)
	for i := range sc.cut {
		sc.cut[i] = make([]bool, sc.p.n)
	}
	sc.tracef("params %+v", sc.p)
	for i := 1; i <= sc.p.n; i++ {
		sc.nodes = append(sc.nodes, sc.newNode(int32(i)))
	}
	sc.faults = true
	sc.at(0, sc.chaos)
	if err := sc.runUntil(o.Faulty); err != nil {
		return sc.res, err
	}
	sc.heal()
	sc.faults = false
	healed := sc.now
	for {
		if err := sc.runUntil(sc.now + simSettleCheckEvery); err != nil {
			return sc.res, err
		}
		why := sc.settled()
		if why == "" {
			sc.res.SettledAfter = sc.now - healed
			return sc.res, nil
		}
		if sc.now-healed > simSettleMax {
			return sc.res, fmt.Errorf("not settled %v after the heal: %s", simSettleMax, why)
		}
	}
}

func (sc *simCluster) tracef(format string, args ...any) {
	if sc.o.Trace != nil {
		sc.o.Trace(fmt.Sprintf("%9.3fs ", sc.now.Seconds()) + fmt.Sprintf(format, args...))
	}
}

func (sc *simCluster) fail(format string, args ...any) {
	if sc.err == nil {
		sc.err = fmt.Errorf("at %v: %s", sc.now, fmt.Sprintf(format, args...))
		sc.tracef("FAIL %v", sc.err)
	}
}

// at schedules fn d from now.
func (sc *simCluster) at(d time.Duration, fn func()) {
	sc.seq++
	heap.Push(&sc.q, &simEvent{at: sc.now + d, seq: sc.seq, fn: fn})
}

func (sc *simCluster) runUntil(end time.Duration) error {
	for sc.q.Len() > 0 && sc.q[0].at <= end && sc.err == nil {
		e := heap.Pop(&sc.q).(*simEvent)
		sc.now = e.at
		sc.clock.Set(sc.start.Add(sc.now))
		sc.events++
		if sc.events > simEventsMax {
			return fmt.Errorf("more than %d events", simEventsMax)
		}
		e.fn()
	}
	if sc.err == nil {
		sc.now = end
		sc.clock.Set(sc.start.Add(sc.now))
	}
	return sc.err
}

// chaos draws the network faults, once per heartbeat tick.
func (sc *simCluster) chaos() {
	if !sc.faults {
		return
	}
	if sc.rng.IntN(1000) < sc.p.partitionPerTick {
		sc.partition()
	}
	if sc.rng.IntN(1000) < sc.p.createPerTick {
		sc.createTopic()
	}
	if sc.rng.IntN(1000) < sc.p.crashPerTick {
		nd := sc.nodes[sc.rng.IntN(len(sc.nodes))]
		if nd.up {
			nd.crash()
			sc.at(time.Duration(1+sc.rng.IntN(sc.p.downTicksMax))*sc.hb, sc.restart(nd))
		}
	}
	if sc.p.wholeRestart && sc.rng.IntN(1000) < 5 {
		sc.tracef("whole-cluster restart")
		for _, nd := range sc.nodes {
			if nd.up {
				nd.crash()
				sc.at(time.Duration(1+sc.rng.IntN(20))*sc.hb, sc.restart(nd))
			}
		}
	}
	if sc.rng.IntN(1000) < sc.p.jumpPerTick {
		nd := sc.nodes[sc.rng.IntN(len(sc.nodes))]
		d := time.Duration(200+sc.rng.IntN(3000)) * time.Millisecond
		if sc.rng.IntN(3) == 0 {
			d = -d / 2
		}
		nd.clock.off += d
		sc.res.ClockJumps++
		sc.tracef("node %d's clock jumps %v", nd.id, d)
	}
	sc.at(sc.hb, sc.chaos)
}

// restart returns the event that restarts nd (unless it already runs).
func (sc *simCluster) restart(nd *simNode) func() {
	return func() {
		if !nd.up {
			sc.tracef("node %d restarts", nd.id)
			nd.start()
		}
	}
}

// partition cuts the network: a random side from the rest, both ways or
// one way, healed after a random number of ticks.
func (sc *simCluster) partition() {
	n := sc.p.n
	side := make([]bool, n)
	size := 1 + sc.rng.IntN(n-1)
	for _, i := range sc.rng.Perm(n)[:size] {
		side[i] = true
	}
	oneWay := sc.rng.IntN(4) == 0
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if side[a] && !side[b] || (!oneWay && !side[a] && side[b]) {
				sc.cut[a][b] = true
			}
		}
	}
	sc.res.Partitions++
	sc.tracef("partition %v one-way=%v", side, oneWay)
	sc.at(time.Duration(1+sc.rng.IntN(sc.p.partitionTicks))*sc.hb, func() {
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if side[a] && !side[b] || (!oneWay && !side[a] && side[b]) {
					sc.cut[a][b] = false
				}
			}
		}
		sc.tracef("partition %v healed", side)
	})
}

func (sc *simCluster) heal() {
	for _, nd := range sc.nodes {
		if !nd.up {
			sc.tracef("node %d restarts", nd.id)
			nd.start()
		}
	}
	for a := range sc.cut {
		for b := range sc.cut[a] {
			sc.cut[a][b] = false
		}
	}
	sc.tracef("heal")
}

// send puts m on the simulated network: dropped, or delivered after a
// latency with jitter (which reorders messages).
func (sc *simCluster) send(m simMsg) {
	sc.res.Messages++
	if sc.cut[m.from-1][m.to-1] || (sc.faults && sc.rng.IntN(1000) < sc.p.dropPermille) {
		sc.res.Dropped++
		return
	}
	d := sc.p.latencyMin
	if sc.faults && sc.p.jitterMax > 0 {
		d += time.Duration(sc.rng.Int64N(int64(sc.p.jitterMax)))
	}
	to := sc.nodes[m.to-1]
	sc.at(d, func() { to.receive(m) })
}

// createTopic is a client asking a random node to create the next
// topic; only a loaded metadata primary takes it.
func (sc *simCluster) createTopic() {
	if sc.topicSeq >= simTopicsMax {
		return
	}
	nd := sc.nodes[sc.rng.IntN(len(sc.nodes))]
	if !nd.up {
		return
	}
	// A node that is not the metadata primary answers
	// NOT_METADATA_PRIMARY with the primary it knows; the client follows
	// the hint once.
	if lead := nd.meta.rn.Leader(); nd.meta.rn.Role() != raftlite.RoleLeader && lead != raftlite.None {
		nd = sc.nodes[lead-1]
	}
	if !nd.up || nd.meta.rn.Role() != raftlite.RoleLeader || !nd.loaded {
		return
	}
	name := fmt.Sprintf("t%d", sc.topicSeq+1)
	var roster, eligible []metadata.NodeID
	for _, o := range sc.nodes {
		roster = append(roster, metadata.NodeID(o.id))
		if nd.alive(o.id) {
			eligible = append(eligible, metadata.NodeID(o.id))
		}
	}
	req := metadata.CreateRequest{Name: name, Partitions: 1 + sc.rng.IntN(4)}
	cmd, err := nd.core.state.PlanCreateTopic(req, roster, eligible, min(3, sc.p.n), nd.clock.Now().UnixMilli())
	if err != nil {
		return
	}
	// PlanCreateTopic draws the id from the global generator: replace it
	// with one from the seed, so a run replays.
	var id metadata.TopicID
	binary.BigEndian.PutUint64(id[:8], sc.rng.Uint64())
	binary.BigEndian.PutUint64(id[8:], sc.rng.Uint64())
	id[6] = id[6]&0x0f | 0x40
	cmd.Topic.ID = id
	data, err := encodeCommand(cmd, nd.clock.Now().UnixMilli())
	if err != nil {
		sc.fail("encoding a command: %v", err)
		return
	}
	e, err := nd.meta.rn.Propose(1, data)
	if err != nil {
		return
	}
	sc.topicSeq++
	nd.proposals = append(nd.proposals, simProposal{ent: e, name: name, id: id})
	sc.tracef("node %d proposes topic %s (%d partitions) at %d", nd.id, name, req.Partitions, e.Base)
	nd.ready(nd.meta)
}

func (sc *simCluster) newNode(id int32) *simNode {
	nd := &simNode{sc: sc, id: id, clock: &simClock{base: sc.clock}, disks: map[raftlite.GroupID]*simDisk{}}
	nd.start()
	return nd
}

// start (re)starts the node from its disks: every volatile part is new,
// as after a process restart; the metadata is replayed from the log once
// the group commits, and partitions reopen as the View lists them.
func (nd *simNode) start() {
	sc := nd.sc
	nd.up = true
	nd.inc++
	inc := nd.inc
	nd.core = newMetaCore(sc.log)
	nd.view = nd.core.view()
	nd.loaded = false
	nd.routes = routes{}
	nd.groups = map[raftlite.GroupID]*simGroup{}
	nd.announce, nd.sinceFull, nd.proposals = nil, 0, nil
	nd.inSync = map[[20]byte][]int32{}
	nd.lags = lagTable{}
	nd.routeTerm = map[[20]byte]int32{}
	nd.live = newLiveness(nd.clock, sc.elect)
	nd.watch = newDownWatch(sc.hb, sc.elect)
	var all []raftlite.NodeID
	for i := 1; i <= sc.p.n; i++ {
		all = append(all, raftlite.NodeID(i))
	}
	nd.meta = nd.openGroup(shardKey(metaTopicID, 0), all, true)
	// As startController: the snapshot first, the log after it replayed
	// as the group commits; the snapshot's View opens its partitions.
	if snap := nd.meta.disk.snap; snap != nil {
		if _, err := nd.core.install(snap); err != nil {
			sc.fail("node %d: its snapshot: %v", nd.id, err)
			return
		}
		nd.core.restored(nd.meta.log.TermAt)
		nd.view = nd.core.view()
		nd.reconcile()
	}
	ids := make([]int32, sc.p.n)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	nd.bal = newBalancer(balancerDeps{
		clock: nd.clock,
		after: func(d time.Duration, fn func()) { nd.after(inc, d, fn) },
		log:   sc.log, roster: ids, alive: nd.alive,
		view:        func() *View { return nd.view },
		route:       nd.routes.get,
		lastMovedMs: func(topic string, p int32) int64 { return nd.core.state.LastMovedMs(topic, p) },
		isPrimary:   func() bool { return nd.meta.rn.Role() == raftlite.RoleLeader },
		transfer:    nd.transfer,
		propose:     nd.proposeMeta,
		stats:       &nd.stats, rebalancing: &nd.rebalancing,
		every: sc.p.balanceEvery, auto: true, imbalancePercent: sc.p.imbalancePercent,
		moveTimeout: 2*sc.elect + time.Second,
	}, func() bool { return nd.inc != inc || !nd.up })
	// Nodes start a little apart, as processes do.
	nd.after(inc, time.Duration(sc.rng.IntN(int(sc.hb))), nd.tick)
}

// after runs fn d from now unless the node crashed since (incarnation
// inc): a timer dies with its process.
func (nd *simNode) after(inc int, d time.Duration, fn func()) {
	nd.sc.at(d, func() {
		if nd.up && nd.inc == inc {
			fn()
		}
	})
}

// crash stops the node: its volatile state is gone, its disks stay.
func (nd *simNode) crash() {
	nd.up = false
	nd.sc.res.Crashes++
	nd.sc.tracef("node %d crashes", nd.id)
}

func (nd *simNode) alive(id int32) bool { return id == nd.id || nd.live.alive(id) }

func (nd *simNode) openGroup(key [20]byte, replicas []raftlite.NodeID, meta bool) *simGroup {
	gid := partition.GroupID(key)
	d := nd.disks[gid]
	if d == nil {
		d = &simDisk{log: raftlite.NewMemLog(), data: map[int64][]byte{}}
		nd.disks[gid] = d
	}
	g := &simGroup{key: key, gid: gid, disk: d, log: d.log, data: d.data, replicas: replicas, meta: meta}
	rn, err := raftlite.New(raftlite.Config{ID: raftlite.NodeID(nd.id), Group: g.gid,
		Replicas: raftlite.NewReplicaSet(replicas...), Log: g.log, HardState: d.hs,
		Seed: nd.sc.rng.Uint64(), Preferred: replicas[0] == raftlite.NodeID(nd.id), Limits: nd.sc.limits})
	if err != nil {
		nd.sc.fail("node %d: opening group %x: %v", nd.id, key[:4], err)
		return g
	}
	g.rn = rn
	nd.groups[g.gid] = g
	return g
}

// tick is one heartbeat interval of the node: every group ticks, the
// down-watch beats, pings and route announcements go out, and the
// primaries refresh their in-sync sets.
func (nd *simNode) tick() {
	sc := nd.sc
	for _, g := range nd.sortedGroups() {
		g.rn.Tick()
		nd.ready(g)
	}
	var peers []int32
	for _, o := range sc.nodes {
		if o.id != nd.id {
			peers = append(peers, o.id)
		}
	}
	for _, id := range nd.watch.beat(nd.clock.Now(), peers, nd.live.alive) {
		sc.res.PeerDown++
		sc.tracef("node %d: peer %d down", nd.id, id)
		nd.peerDown(raftlite.NodeID(id))
	}
	for _, g := range nd.sortedGroups() {
		if !g.meta && g.rn.Role() == raftlite.RoleLeader {
			in := nd.sampleInSync(g)
			if !sameIDs(in, nd.inSync[g.key]) {
				nd.inSync[g.key] = in
				nd.setRoute(g)
			}
		}
	}
	nd.checkLoaded()
	nd.sinceFull += sc.hb
	routes := nd.announce
	nd.announce = nil
	if nd.sinceFull >= routesFullEvery {
		nd.sinceFull = 0
		routes = nd.routes.ledBy(nd.id)
		sort.Slice(routes, func(i, j int) bool {
			return string(routes[i].TopicID[:]) < string(routes[j].TopicID[:]) ||
				routes[i].TopicID == routes[j].TopicID && routes[i].Partition < routes[j].Partition
		})
	}
	for _, id := range peers {
		sc.send(simMsg{kind: simPing, from: nd.id, to: id})
		if len(routes) > 0 {
			sc.send(simMsg{kind: simRoutes, from: nd.id, to: id, routes: routes})
		}
	}
	nd.after(nd.inc, sc.hb, nd.tick)
}

// sortedGroups lists the groups in a fixed order (maps iterate randomly,
// and a run must replay).
func (nd *simNode) sortedGroups() []*simGroup {
	out := make([]*simGroup, 0, len(nd.groups))
	for _, g := range nd.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gid < out[j].gid })
	return out
}

// sampleInSync samples g, a group this node leads, into the node's lag
// table (insync.go's rule, as node.go's inSync feeds it).
func (nd *simNode) sampleInSync(g *simGroup) []int32 {
	var seed []int32
	if old, ok := nd.routes.get(g.key); ok && old.term < g.rn.Term() {
		seed = old.inSync
	}
	rn := g.rn
	return nd.lags.sample(g.key, nd.clock.Now(), nd.sc.p.lagWindow, sampleInput{
		self: raftlite.NodeID(nd.id), term: rn.Term(), replicas: g.replicas, seed: seed, end: g.log.EndOffset(),
		follower: func(id raftlite.NodeID) (int64, bool, bool) {
			m, active, ok := rn.Follower(id)
			return m, active || rn.Quiesced(), ok
		},
		alive: func(id raftlite.NodeID) bool { return nd.alive(int32(id)) },
	})
}

// peerDown is the node's failover reaction (peers.go's peerDown, on the
// same rule).
func (nd *simNode) peerDown(id raftlite.NodeID) {
	alive := func(m raftlite.NodeID) bool { return nd.alive(int32(m)) }
	for _, g := range nd.sortedGroups() {
		if !raftlite.NewReplicaSet(g.replicas...).Has(id) {
			continue
		}
		g.rn.Unquiesce()
		lead := g.rn.Leader()
		if lead == id || lead == raftlite.None {
			g.rn.ForgetLeader()
			if campaignsAfterDown(g.replicas, lead, id, raftlite.NodeID(nd.id), alive) {
				g.rn.Campaign()
				g := g
				nd.after(nd.inc, 2*nd.sc.hb, func() {
					if g.rn.Leader() == raftlite.None {
						g.rn.Campaign()
						nd.ready(g)
					}
				})
			}
		}
		nd.ready(g)
	}
}

func (nd *simNode) receive(m simMsg) {
	sc := nd.sc
	if !nd.up {
		return
	}
	nd.live.heard(m.from)
	switch m.kind {
	case simRaft:
		g := nd.groups[m.raft.Group]
		if g == nil {
			return // not open here yet: consensus retransmits
		}
		if err := g.rn.Step(m.raft); err != nil {
			return
		}
		if g.meta && !nd.loaded {
			nd.core.observeReset(&m.raft, g.rn.Leader(), g.rn.Term())
			nd.checkLoaded()
		}
		nd.ready(g)
	case simRoutes:
		for _, r := range m.routes {
			key := shardKey(r.TopicID, r.Partition)
			nd.routes.learn(key, route{leader: r.Leader, term: r.Term, inSync: maskIDs(r.InSync)})
			nd.checkRoute(key)
		}
	case simTransfer:
		key := shardKey(m.transfer.TopicID, m.transfer.Partition)
		if g := nd.groups[partition.GroupID(key)]; g != nil {
			_ = g.rn.TransferLeadership(raftlite.NodeID(m.transfer.Target))
			nd.ready(g)
		}
	case simPing:
	default:
		sc.fail("unknown message kind %d", m.kind)
	}
}

// transfer is the balancer's arrow to the partition's primary.
func (nd *simNode) transfer(topicID [16]byte, p int32, from, to int32) {
	nd.sc.tracef("node %d: move %x/%d from %d to %d", nd.id, topicID[:2], p, from, to)
	if from != nd.id {
		nd.sc.send(simMsg{kind: simTransfer, from: nd.id, to: from,
			transfer: peerwire.Transfer{TopicID: topicID, Partition: p, Target: to}})
		return
	}
	if g := nd.groups[partition.GroupID(shardKey(topicID, p))]; g != nil {
		_ = g.rn.TransferLeadership(raftlite.NodeID(to))
		nd.ready(g)
	}
}

// proposeMeta is the balancer's arrow to the metadata log.
func (nd *simNode) proposeMeta(cmd metadata.Command) {
	if cmd.Op == metadata.OpPrimaryMoved {
		nd.sc.res.MovesDone++
	}
	data, err := encodeCommand(cmd, nd.clock.Now().UnixMilli())
	if err != nil {
		nd.sc.fail("encoding a command: %v", err)
		return
	}
	if _, err := nd.meta.rn.Propose(1, data); err == nil {
		nd.ready(nd.meta)
	}
}

// simNoop is a primary's no-op: a one-record control batch.
func simNoop(atMs int64) []byte {
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		panic(err)
	}
	if err := b.AppendKV(atMs, []byte{0, 0, 0xff, 0xff}, nil); err != nil {
		panic(err)
	}
	out, err := b.Build()
	if err != nil {
		panic(err)
	}
	const offAttributes, offCRC = 21, 17
	attrs := binary.BigEndian.Uint16(out[offAttributes:])
	binary.BigEndian.PutUint16(out[offAttributes:], attrs|batch.ControlBit)
	binary.BigEndian.PutUint32(out[offCRC:], batch.Checksum(out))
	return out
}

// ready handles g's Readys in raftlite's order: entries written (and
// durable at once), messages sent, routes updated, commits applied.
func (nd *simNode) ready(g *simGroup) {
	sc := nd.sc
	for round := 0; g.rn.HasReady() && sc.err == nil; round++ {
		if round == simReadyRoundsMax {
			sc.fail("node %d: group %x still has a Ready after %d rounds", nd.id, g.key[:4], round)
			return
		}
		rd := g.rn.Ready()
		if rd.HardStateChanged {
			g.disk.hs = rd.HardState
		}
		if rd.Reset != nil && !nd.installReset(g, rd.Reset) {
			return
		}
		var last raftlite.Entry
		if len(rd.Entries) > 0 {
			ents := make([]raftlite.Entry, len(rd.Entries))
			datas := make([][]byte, len(rd.Entries))
			for i, e := range rd.Entries {
				data := e.Data
				if e.Kind == raftlite.EntryLeaderNoop && data == nil {
					data = simNoop(nd.clock.Now().UnixMilli())
				}
				if data == nil {
					sc.fail("node %d: entry %v has no bytes", nd.id, e)
					return
				}
				data = append([]byte(nil), data...)
				batch.SetBaseOffset(data, e.Base)
				batch.SetPartitionLeaderEpoch(data, e.Term)
				e.Data = nil
				ents[i], datas[i] = e, data
			}
			removed, err := g.log.Append(ents...)
			if err != nil {
				sc.fail("node %d: append: %v", nd.id, err)
				return
			}
			for _, r := range removed {
				delete(g.data, r.Base)
			}
			for i, e := range ents {
				g.data[e.Base] = datas[i]
			}
			last = ents[len(ents)-1]
		}
		for _, m := range rd.Messages {
			if m.Type == raftlite.MsgReset && g.meta {
				m.Snapshot = g.disk.snap // the state below the log start
			}
			if m.Type == raftlite.MsgApp && len(m.Entries) > 0 {
				m.Entries = append([]raftlite.Entry(nil), m.Entries...)
				ok := true
				for i := range m.Entries {
					if m.Entries[i].Data == nil {
						d := g.data[m.Entries[i].Base]
						if d == nil {
							ok = false
							break
						}
						m.Entries[i].Data = d
					}
				}
				if !ok {
					continue // the log moved: consensus resends
				}
			}
			sc.send(simMsg{kind: simRaft, from: nd.id, to: int32(m.To), raft: m})
		}
		if rd.SoftStateChanged {
			nd.softState(g, rd)
		}
		g.rn.Advance(rd)
		if len(rd.Entries) > 0 {
			g.rn.Durable(last.Last, last.Term)
		}
		if rd.CommitChanged && g.meta {
			nd.applyMeta(rd.Commit)
		}
	}
}

// softState records a leader change: the checker's one-leader-per-term
// record, and the node's route.
func (nd *simNode) softState(g *simGroup, rd raftlite.Ready) {
	sc := nd.sc
	term := rd.HardState.Term
	if rd.Role == raftlite.RoleLeader {
		byTerm := sc.leaders[g.gid]
		if byTerm == nil {
			byTerm = map[int32]int32{}
			sc.leaders[g.gid] = byTerm
		}
		if prev, ok := byTerm[term]; ok && prev != nd.id {
			sc.fail("group %x: nodes %d and %d both lead term %d", g.key[:4], prev, nd.id, term)
			return
		}
		if _, ok := byTerm[term]; !ok {
			if g.meta {
				sc.res.MetaTerms++
			} else {
				sc.res.PartTerms++
			}
			sc.tracef("node %d leads %s in term %d", nd.id, g.name(), term)
		}
		byTerm[term] = nd.id
	}
	if g.meta {
		nd.routes.setLocal(g.key, route{leader: leaderOrNone(rd.Lead), term: term})
		return
	}
	if rd.Role == raftlite.RoleLeader {
		nd.inSync[g.key] = nd.sampleInSync(g)
	}
	nd.setRoute(g)
}

func (g *simGroup) name() string {
	if g.meta {
		return "the metadata"
	}
	return fmt.Sprintf("partition %x/%d", g.key[:2], binary.BigEndian.Uint32(g.key[16:]))
}

func leaderOrNone(id raftlite.NodeID) int32 {
	if id == raftlite.None {
		return -1
	}
	return int32(id)
}

// setRoute is node.go's setRoute: the local replica's primary and
// generation, announced when this node is the primary.
func (nd *simNode) setRoute(g *simGroup) {
	lead := g.rn.Leader()
	rt := route{leader: leaderOrNone(lead), term: g.rn.Term()}
	if lead == raftlite.NodeID(nd.id) {
		rt.inSync = nd.inSync[g.key]
	}
	if !nd.routes.setLocal(g.key, rt) {
		return
	}
	nd.checkRoute(g.key)
	if lead == raftlite.NodeID(nd.id) {
		nd.announce = append(nd.announce, announcement(g.key, rt))
	}
}

// checkRoute holds a route to the checker's record: the primary it names
// led that generation, and its generation never goes back.
func (nd *simNode) checkRoute(key [20]byte) {
	sc := nd.sc
	rt, ok := nd.routes.get(key)
	if !ok {
		return
	}
	if rt.leader > 0 {
		if led, ok := sc.leaders[partition.GroupID(key)][rt.term]; !ok || led != rt.leader {
			sc.fail("node %d: route of %x/%d names node %d for generation %d, which node %d led",
				nd.id, key[:2], binary.BigEndian.Uint32(key[16:]), rt.leader, rt.term, led)
			return
		}
	}
	if rt.term < nd.routeTerm[key] {
		sc.fail("node %d: route of %x/%d went back from generation %d to %d (primary %d)",
			nd.id, key[:2], binary.BigEndian.Uint32(key[16:]), nd.routeTerm[key], rt.term, rt.leader)
		return
	}
	nd.routeTerm[key] = rt.term
}

// applyMeta applies the committed metadata entries through the
// controller's core, checks them against the committed log every node
// must share, then publishes, reconciles and checks readiness as the
// controller does.
func (nd *simNode) applyMeta(commit int64) {
	sc := nd.sc
	g := nd.meta
	changed := false
	for nd.core.applied < commit {
		off := nd.core.applied + 1
		data := g.data[off]
		if data == nil {
			sc.fail("node %d: committed metadata entry %d is not in its log", nd.id, off)
			return
		}
		sum := crc32.ChecksumIEEE(data)
		if prev, ok := sc.committed[off]; ok && prev != sum {
			sc.fail("node %d applied a metadata entry at %d that differs from the committed one", nd.id, off)
			return
		}
		sc.committed[off] = sum
		ch, err := nd.core.applyData(data, off)
		if err != nil {
			sc.fail("node %d: %v", nd.id, err)
			return
		}
		changed = changed || ch
	}
	if changed {
		nd.view = nd.core.view()
		nd.reconcile()
	}
	nd.maybeSnapshot()
	nd.checkLoaded()
	kept := nd.proposals[:0]
	for _, p := range nd.proposals {
		if p.ent.Last > commit {
			kept = append(kept, p)
			continue
		}
		if t, err := g.log.TermAt(p.ent.Last); err == nil && t == p.ent.Term {
			sc.acked[p.name] = simAcked{id: p.id, term: p.ent.Term}
			sc.res.TopicsAcked++
			sc.tracef("topic %s acknowledged", p.name)
		}
	}
	nd.proposals = kept
}

// installReset replaces g's log as a Ready's reset asks; for the
// metadata group it installs the snapshot that came with it, as the
// controller's onReset does. It reports false after a failure.
func (nd *simNode) installReset(g *simGroup, r *raftlite.LogReset) bool {
	sc := nd.sc
	if !g.meta {
		sc.fail("node %d: a log reset of %s (partitions never compact here)", nd.id, g.name())
		return false
	}
	g.log.ResetTo(*r)
	clear(g.data)
	if len(r.Snapshot) == 0 {
		sc.fail("node %d: a metadata log reset to %d without a snapshot", nd.id, r.Start)
		return false
	}
	ok, err := nd.core.install(r.Snapshot)
	if err != nil {
		sc.fail("node %d: installing a snapshot: %v", nd.id, err)
		return false
	}
	if ok {
		g.disk.snap = r.Snapshot
		sc.res.Installs++
		sc.tracef("node %d installs a metadata snapshot up to %d", nd.id, nd.core.applied)
		nd.view = nd.core.view()
		nd.reconcile()
		nd.checkLoaded()
	}
	return true
}

// maybeSnapshot writes a metadata snapshot and compacts the log once
// snapEvery entries were applied since the last one (snapshot.go's
// maybeSnapshot, every few entries instead of 10,000).
func (nd *simNode) maybeSnapshot() {
	sc := nd.sc
	g := nd.meta
	every := sc.p.snapEvery
	if every == 0 || nd.core.applied-(g.log.StartOffset()-1) < every {
		return
	}
	applied := nd.core.applied
	g.disk.snap = encodeSnapshot(applied, nd.core.state.Snapshot())
	if err := g.log.Compact(applied + 1); err != nil {
		sc.fail("node %d: compacting the metadata log to %d: %v", nd.id, applied+1, err)
		return
	}
	for off := range g.data {
		if off <= applied {
			delete(g.data, off)
		}
	}
	sc.res.Snapshots++
}

// checkLoaded latches readiness by the controller's rule (ready.go) and
// holds the View it will answer with to what was acknowledged. The
// controller evaluates it when it applies; the simulator also at every
// tick, as a client's read may come at any time.
func (nd *simNode) checkLoaded() {
	sc := nd.sc
	if !nd.loaded && nd.core.loadedIn(nd.meta.rn.Term(), nd.meta.rn.Leader() != raftlite.None) {
		nd.loaded = true
		// Loaded means answering metadata reads: everything acknowledged
		// in an earlier term must be in them (after a whole-cluster
		// restart nodes once answered without topics they had). What the
		// current term committed may still be on its way, as on any
		// follower (ready.go).
		term := nd.meta.rn.Term()
		for name, a := range sc.acked {
			if a.term >= term {
				continue
			}
			if t := nd.view.Topics[name]; t == nil || t.ID != a.id {
				sc.fail("node %d loaded its metadata at %d without acknowledged topic %s", nd.id, nd.core.applied, name)
				return
			}
		}
		sc.tracef("node %d: metadata loaded at %d (%d topics)", nd.id, nd.core.applied, len(nd.view.Sorted))
	}
}

// reconcile opens a group for every partition of the View this node
// holds a replica of (reconcile.go's job; topics are never deleted here).
func (nd *simNode) reconcile() {
	for _, t := range nd.view.Sorted {
		for p, reps := range t.Replicas {
			if !hosts(reps, raftlite.NodeID(nd.id)) {
				continue
			}
			key := shardKey(t.ID, int32(p))
			if nd.groups[partition.GroupID(key)] != nil {
				continue
			}
			ids := make([]raftlite.NodeID, len(reps))
			for i, r := range reps {
				ids[i] = raftlite.NodeID(r)
			}
			g := nd.openGroup(key, ids, false)
			if g.rn != nil {
				nd.ready(g)
			}
		}
	}
}

// settled returns "" once the healed cluster has converged, else what it
// still waits for: one metadata primary that every node follows, every
// node loaded with the committed metadata (every acknowledged topic in
// it), every node's route of every partition naming its current primary
// and generation, and the primaries balanced within the policy's bounds.
func (sc *simCluster) settled() string {
	var lead *simNode
	for _, nd := range sc.nodes {
		if nd.meta.rn.Role() == raftlite.RoleLeader {
			if lead != nil {
				return fmt.Sprintf("nodes %d and %d both lead the metadata", lead.id, nd.id)
			}
			lead = nd
		}
	}
	if lead == nil {
		return "no metadata primary"
	}
	want := lead.core.state.Snapshot()
	for _, nd := range sc.nodes {
		if nd.meta.rn.Leader() != raftlite.NodeID(lead.id) || nd.meta.rn.Term() != lead.meta.rn.Term() {
			return fmt.Sprintf("node %d follows %d in term %d, not %d in %d", nd.id, nd.meta.rn.Leader(), nd.meta.rn.Term(), lead.id, lead.meta.rn.Term())
		}
		if !nd.loaded {
			return fmt.Sprintf("node %d has not loaded the metadata (applied %d of term %d, commit %d, log from %d, term %d, primary %d)",
				nd.id, nd.core.applied, nd.core.appliedTerm, nd.meta.rn.Commit(), nd.meta.log.StartOffset(), nd.meta.rn.Term(), nd.meta.rn.Leader())
		}
		if nd.core.applied != lead.core.applied || string(nd.core.state.Snapshot()) != string(want) {
			return fmt.Sprintf("node %d answers metadata applied to %d, the primary to %d", nd.id, nd.core.applied, lead.core.applied)
		}
		if nd.core.applied < lead.meta.rn.Commit() {
			return fmt.Sprintf("node %d applied %d of %d committed", nd.id, nd.core.applied, lead.meta.rn.Commit())
		}
	}
	for name, a := range sc.acked {
		if t := lead.view.Topics[name]; t == nil || t.ID != a.id {
			return fmt.Sprintf("acknowledged topic %s is missing from the committed metadata", name)
		}
	}
	for _, t := range lead.view.Sorted {
		for p := range t.Replicas {
			key := shardKey(t.ID, int32(p))
			var primary *simNode
			for _, nd := range sc.nodes {
				if g := nd.groups[partition.GroupID(key)]; g != nil && g.rn.Role() == raftlite.RoleLeader {
					primary = nd
				}
			}
			if primary == nil {
				return fmt.Sprintf("%s/%d has no primary", t.Name, p)
			}
			pg := primary.groups[partition.GroupID(key)]
			for _, nd := range sc.nodes {
				rt, ok := nd.routes.get(key)
				if !ok || rt.leader != primary.id || rt.term != pg.rn.Term() {
					return fmt.Sprintf("node %d's route of %s/%d is %+v, the primary is node %d in generation %d",
						nd.id, t.Name, p, rt, primary.id, pg.rn.Term())
				}
			}
		}
	}
	// The balancer has converged when it has nothing left to do: no move
	// in flight and none the policy would start. That is within the
	// policy's bounds unless the replica sets make the bounds out of
	// reach (a topic placed while some nodes were cut off holds no
	// replica on them, and a primary moves only within its replica set,
	// one move at a time); sc.res.Unbalanced counts those seeds.
	v := lead.bal.view()
	if lead.bal.inFlight != nil {
		return fmt.Sprintf("the balancer's move of %s is still running", lead.bal.inFlight.Key)
	}
	v.MuteMs = 0 // a muted partition only waits: converged means nothing left once mutes end
	if m, ok := balance.Next(v); ok {
		return fmt.Sprintf("the balancer still has a move to make (%s from %d to %d): counts %v", m.Key, m.From, m.To, balance.Counts(v))
	}
	sc.res.Unbalanced = 0
	if !balance.Balanced(v) {
		sc.res.Unbalanced = 1
	}
	return ""
}
