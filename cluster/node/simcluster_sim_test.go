package node

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/corestream/corestream/cluster/balance"
	"github.com/corestream/corestream/cluster/clock"
	ctl "github.com/corestream/corestream/cluster/controller"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard/partition"
)

// The control-plane simulator: N nodes' control planes in one goroutine
// on a simulated clock and a simulated network, driven by one seed.
//
// What runs is the node's own code: the metadata controller's pure core
// (ctl.Core: the committed log's batches in, the applied state, the
// proposers' results and the readiness rule out), the route table with
// its learn rule and announcements, the liveness detector and its
// down-watch, the failover rule (campaignsAfterDown), the balancer
// driver (ctl.Balancer, over ctl.BalancerDeps) and the balance policy, and
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
	sc := newSimCluster(o, nil)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic at %v: %v", sc.now, r)
		}
		res = sc.res
	}()
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

// newSimCluster builds a cluster of started nodes with the parameters
// drawn from the seed, or p when given (a scripted scenario); nothing
// runs until runUntil.
func newSimCluster(o simClusterOptions, p *simParams) *simCluster {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0xc105e4))
	sc := &simCluster{o: o, rng: rng, p: drawSimParams(rng, o.Nodes), hb: 100 * time.Millisecond, elect: time.Second,
		start: time.UnixMilli(1_700_000_000_000), leaders: map[raftlite.GroupID]map[int32]int32{},
		committed: map[int64]uint32{}, acked: map[string]simAcked{},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if p != nil {
		sc.p = *p
	}
	sc.clock = clock.NewManual(sc.start)
	sc.res.Nodes = sc.p.n
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
	return sc
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
	sc.create(sc.nodes[sc.rng.IntN(len(sc.nodes))], fmt.Sprintf("t%d", sc.topicSeq+1), 0)
}

// create asks node nd to create topic name with parts partitions (0:
// drawn, 1 to 4), as a client does; it reports whether a metadata primary
// took the proposal.
func (sc *simCluster) create(nd *simNode, name string, parts int) bool {
	if !nd.up {
		return false
	}
	// A node that is not the metadata primary answers
	// NOT_METADATA_PRIMARY with the primary it knows; the client follows
	// the hint once.
	if lead := nd.meta.rn.Leader(); nd.meta.rn.Role() != raftlite.RoleLeader && lead != raftlite.None {
		nd = sc.nodes[lead-1]
	}
	if !nd.up || nd.meta.rn.Role() != raftlite.RoleLeader || !nd.loaded {
		return false
	}
	var roster, eligible []metadata.NodeID
	for _, o := range sc.nodes {
		roster = append(roster, metadata.NodeID(o.id))
		if nd.alive(o.id) {
			eligible = append(eligible, metadata.NodeID(o.id))
		}
	}
	if parts == 0 {
		parts = 1 + sc.rng.IntN(4)
	}
	req := metadata.CreateRequest{Name: name, Partitions: parts}
	cmd, err := nd.core.State().PlanCreateTopic(req, roster, eligible, min(3, sc.p.n), nd.clock.Now().UnixMilli())
	if err != nil {
		return false
	}
	// PlanCreateTopic draws the id from the global generator: replace it
	// with one from the seed, so a run replays.
	var id metadata.TopicID
	binary.BigEndian.PutUint64(id[:8], sc.rng.Uint64())
	binary.BigEndian.PutUint64(id[8:], sc.rng.Uint64())
	id[6] = id[6]&0x0f | 0x40
	cmd.Topic.ID = id
	data, err := ctl.EncodeCommand(cmd, nd.clock.Now().UnixMilli())
	if err != nil {
		sc.fail("encoding a command: %v", err)
		return false
	}
	e, err := nd.meta.rn.Propose(1, data)
	if err != nil {
		return false
	}
	sc.topicSeq++
	nd.proposals = append(nd.proposals, simProposal{ent: e, name: name, id: id})
	sc.tracef("node %d proposes topic %s (%d partitions) at %d", nd.id, name, req.Partitions, e.Base)
	nd.ready(nd.meta)
	return true
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
	want := lead.core.State().Snapshot()
	for _, nd := range sc.nodes {
		if nd.meta.rn.Leader() != raftlite.NodeID(lead.id) || nd.meta.rn.Term() != lead.meta.rn.Term() {
			return fmt.Sprintf("node %d follows %d in term %d, not %d in %d", nd.id, nd.meta.rn.Leader(), nd.meta.rn.Term(), lead.id, lead.meta.rn.Term())
		}
		if !nd.loaded {
			return fmt.Sprintf("node %d has not loaded the metadata (applied %d of term %d, commit %d, log from %d, term %d, primary %d)",
				nd.id, nd.core.Applied(), nd.core.AppliedTerm(), nd.meta.rn.Commit(), nd.meta.log.StartOffset(), nd.meta.rn.Term(), nd.meta.rn.Leader())
		}
		if nd.core.Applied() != lead.core.Applied() || string(nd.core.State().Snapshot()) != string(want) {
			return fmt.Sprintf("node %d answers metadata applied to %d, the primary to %d", nd.id, nd.core.Applied(), lead.core.Applied())
		}
		if nd.core.Applied() < lead.meta.rn.Commit() {
			return fmt.Sprintf("node %d applied %d of %d committed", nd.id, nd.core.Applied(), lead.meta.rn.Commit())
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
				rt, ok := nd.routes.Get(key)
				if !ok || rt.Leader != primary.id || rt.Term != pg.rn.Term() {
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
	v := lead.bal.View()
	if m, ok := lead.bal.InFlight(); ok {
		return fmt.Sprintf("the balancer's move of %s is still running", m.Key)
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
