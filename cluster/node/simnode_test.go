package node

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"github.com/corestream/corestream/cluster/transport"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// The whole-node simulator (simnode*_test.go) runs N whole nodes in one
// goroutine on a simulated clock, seeded: each node is built by the
// node's own composition root (startParts, as Start builds it: the
// metadata controller and its group, liveness and the down-watch, the
// routes and the router, the failover rule, the balancer driver, the
// reassigner, reconciliation, the replica host and the typed service)
// over a stepped shard group on the simulator's clock, the pwrite engine
// on the node's own in-memory FS (which outlives its crashes and tears
// unsynced tails on a power loss), and a simulated Transport (below) in
// place of TCP. Clients create and delete topics through the service's
// admin calls, which reach the data path only through the metadata group
// and reconciliation, and produce to them as idempotent producers; the
// network drops, delays, reorders and partitions, nodes crash and
// restart, wall clocks jump. The control-plane checks (the committed
// metadata on every node after the heal) and the data path's
// (acknowledged batches where they were acknowledged, replicas identical
// below the high watermark) hold together.

// Bounds of a whole-node simulation.
const (
	snShards      = 2
	snDir         = "/data"
	snSettleMax   = 120 * time.Second
	snRoundsMax   = 200_000
	snAttemptMax  = 3 * time.Second
	snMessagesMax = 3_000_000
	snHeartbeatMs = 50
	snElectionMs  = 500
	snBalanceMs   = 500
)

// snParams are one seed's drawn parameters.
type snParams struct {
	n, topics, clients int
	scratch            bool // a topic created and deleted while the others run
	dropP              float64
	delayMaxMs         int
	faultGapMs         int
	crashP, powerLossP float64
	jumpP              float64
	thinkMaxMs         int
}

func drawSnParams(rng *rand.Rand, nodes int) snParams {
	p := snParams{n: nodes}
	if p.n == 0 {
		p.n = 3 + 2*rng.IntN(2)
	}
	p.topics = 1 + rng.IntN(2)
	p.clients = 1 + rng.IntN(3)
	p.scratch = rng.IntN(2) == 0
	p.dropP = []float64{0, 0.01, 0.05}[rng.IntN(3)]
	p.delayMaxMs = []int{1, 5, 30}[rng.IntN(3)]
	p.faultGapMs = 300 + rng.IntN(1500)
	p.crashP = 0.2 + 0.3*rng.Float64()
	p.powerLossP = rng.Float64()
	p.jumpP = 0.1
	p.thinkMaxMs = []int{0, 5, 50}[rng.IntN(3)]
	return p
}

// snStats are a run's figures.
type snStats struct {
	Messages, Dropped, Partitions, Crashes, PowerLosses, ClockJumps int
	TopicsCreated, TopicsDeleted, AdminCalls                        int
	Produced, Acked, Retries, BatchesChecked, RecordsChecked        int
	PeerDowns, PrimaryMoves                                         int
}

func (a *snStats) add(b snStats) {
	a.Messages += b.Messages
	a.Dropped += b.Dropped
	a.Partitions += b.Partitions
	a.Crashes += b.Crashes
	a.PowerLosses += b.PowerLosses
	a.ClockJumps += b.ClockJumps
	a.TopicsCreated += b.TopicsCreated
	a.TopicsDeleted += b.TopicsDeleted
	a.AdminCalls += b.AdminCalls
	a.Produced += b.Produced
	a.Acked += b.Acked
	a.Retries += b.Retries
	a.BatchesChecked += b.BatchesChecked
	a.RecordsChecked += b.RecordsChecked
	a.PeerDowns += b.PeerDowns
	a.PrimaryMoves += b.PrimaryMoves
}

// snSim is one seeded run.
type snSim struct {
	seed  int64
	p     snParams
	rng   *rand.Rand
	nowNs int64
	q     dsQueue
	kseq  uint64
	nodes []*snNode
	// cut[a][b] drops everything a sends to b.
	cut [][]bool
	// linkSeq numbers the messages of each link.
	linkSeq   map[snLink]uint64
	topics    []*snTopic
	clients   []*snClient
	acks      map[snAckKey]snAck
	producing bool
	stats     snStats
	err       error
	trace     func(string)
	roster    []config.RosterNode
	idSeq     uint64
	// groups is the groups scenario (simnode_groups_test.go); nil: off.
	groups *snGroups
}

// snLink is one stream of messages: from, to, and what it carries (a
// group's key, or a control kind).
type snLink struct {
	from, to int32
	key      [20]byte
}

// snNode is one simulated node: its FS survives crashes; the Node is
// built anew by start.
type snNode struct {
	s            *snSim
	id           int32
	fs           *vfs.MemFS
	up           bool
	inc          int
	wallOffsetNs int64
	n            *Node
	tr           *snTransport
}

func (s *snSim) now() time.Duration { return time.Duration(s.nowNs) }

// Now is the shards' monotonic clock (shard.Clock).
func (s *snSim) Now() int64 { return s.nowNs }

func (s *snSim) tracef(format string, args ...any) {
	if s.trace != nil {
		s.trace(fmt.Sprintf("%8.3fs ", s.now().Seconds()) + fmt.Sprintf(format, args...))
	}
}

func (s *snSim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("at %v: %s", s.now(), fmt.Sprintf(format, args...))
		s.tracef("FAIL: %v", s.err)
	}
}

// at schedules one of the simulator's own events after d.
func (s *snSim) at(d time.Duration, fn func()) {
	s.kseq++
	heap.Push(&s.q, &dsEvent{at: s.nowNs + int64(d), k2: s.kseq, fn: fn})
}

func (s *snSim) pushKeyed(d time.Duration, k1, k2 uint64, fn func()) {
	heap.Push(&s.q, &dsEvent{at: s.nowNs + int64(d), k1: k1, k2: k2, fn: fn})
}

func newSnSim(seed int64, nodes int, trace func(string)) *snSim {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5e5e))
	s := &snSim{seed: seed, rng: rng, p: drawSnParams(rng, nodes), nowNs: int64(time.Second),
		linkSeq: map[snLink]uint64{}, acks: map[snAckKey]snAck{}, trace: trace, producing: true}
	s.cut = make([][]bool, s.p.n+1)
	for i := range s.cut {
		s.cut[i] = make([]bool, s.p.n+1)
	}
	for i := 1; i <= s.p.n; i++ {
		s.roster = append(s.roster, config.RosterNode{ID: i, ClientAddr: fmt.Sprintf("10.0.0.%d:7070", i),
			ReplicationAddr: fmt.Sprintf("10.0.0.%d:7071", i)})
	}
	for i := 1; i <= s.p.n; i++ {
		nd := &snNode{s: s, id: int32(i), fs: vfs.NewMem()}
		if err := nd.fs.MkdirAll(snDir, 0o755); err != nil {
			s.fail("mkdir: %v", err)
		}
		s.nodes = append(s.nodes, nd)
	}
	s.tracef("seed %d: %+v", seed, s.p)
	return s
}

func (s *snSim) node(id int32) *snNode { return s.nodes[id-1] }

// newTopicID draws a new topic's id from the seed (the controller's
// topicID seam), so that a seed replays.
func (s *snSim) newTopicID() metadata.TopicID {
	s.idSeq++
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], xxhash.Sum64String(fmt.Sprintf("%d/%d", s.seed, s.idSeq)))
	binary.BigEndian.PutUint64(b[8:], uint64(s.seed)<<16|s.idSeq)
	return metadata.TopicID(b)
}

// Now is the node's wall clock (clock.Clock): the simulated time, shifted
// by its clock jumps.
func (nd *snNode) Now() time.Time {
	return time.UnixMilli(1_700_000_000_000).Add(nd.s.now() + time.Duration(nd.wallOffsetNs))
}

// config is the node's configuration: the product's, with the
// simulator's roster and shorter consensus timings.
func (nd *snNode) config() config.Config {
	s := nd.s
	cfg := config.Default()
	cfg.Node.ID = int(nd.id)
	cfg.Node.DataDir = snDir
	cfg.Node.ClientAddr = s.roster[nd.id-1].ClientAddr
	cfg.Node.ReplicationAddr = s.roster[nd.id-1].ReplicationAddr
	cfg.Node.HTTPAddr, cfg.Node.KafkaAddr = "", ""
	cfg.Shard.Count = snShards
	cfg.Cluster.Secret = "sim-secret"
	cfg.Cluster.Nodes = s.roster
	cfg.Cluster.HeartbeatIntervalMs = snHeartbeatMs
	cfg.Cluster.ElectionTimeoutMs = snElectionMs
	// The balancer looks every half second (30 s in the product), so
	// that primaries move while clients produce.
	cfg.Cluster.LeaderBalanceIntervalMs, cfg.Cluster.LeaderImbalanceCheckIntervalMs = snBalanceMs, snBalanceMs
	// Two partitions of __groups (created only by the groups scenario's
	// first call), so that seeds stay quick.
	cfg.Cluster.GroupsPartitions = 2
	return cfg
}

// start builds the node with the node's own composition root over the
// simulator's seams, and starts its transport's beat.
func (nd *snNode) start() {
	s := nd.s
	n, err := New(nd.config(), slog.New(slog.NewTextHandler(snLogOut(), nil)))
	if err != nil {
		s.fail("node %d: %v", nd.id, err)
		return
	}
	n.fs = nd.fs
	n.setClock(nd)
	n.topicID = s.newTopicID
	nd.n, nd.up = n, true
	err = n.startParts(partSeams{
		startShards: func(c shard.Config) (*shard.Group, error) {
			c.Clock, c.CallsInFlightMax = s, 1<<12
			g, err := shard.NewGroup(c)
			if err != nil {
				return nil, err
			}
			return g, g.StartStepped()
		},
		engine: func(vfs.FS) (segment.Engine, error) { return segment.NewPwriteEngine(), nil },
		transport: func() error {
			nd.tr = newSnTransport(nd, n.peerDeps())
			n.peers = nd.tr
			return nil
		},
	})
	if err != nil {
		nd.up = false
		s.fail("node %d: start: %v", nd.id, err)
		return
	}
	sh := n.group.Shard(0)
	if err := sh.Post(func() { nd.tr.beatLoop(sh) }); err != nil {
		s.fail("node %d: posting the beat: %v", nd.id, err)
	}
	s.tracef("node %d starts (incarnation %d)", nd.id, nd.inc)
}

// crash ends the node's process: nothing queued runs; with powerLoss the
// FS also loses what was not synced, tearing the first lost write.
func (nd *snNode) crash(powerLoss bool) {
	s := nd.s
	nd.n.stopped.Store(true)
	nd.n.group.AbandonStepped()
	s.stats.PrimaryMoves += int(nd.n.balanceStats.Finished.Load())
	nd.up = false
	nd.inc++
	s.stats.Crashes++
	if powerLoss {
		s.stats.PowerLosses++
		nd.fs.Crash(s.rng.Uint64())
	}
	s.tracef("node %d crashes (power loss %v)", nd.id, powerLoss)
}

// settle runs every live node's shards until none has work left at this
// instant.
func (s *snSim) settle() {
	for round := 0; ; round++ {
		n := 0
		for _, nd := range s.nodes {
			if !nd.up {
				continue
			}
			for i := 0; i < nd.n.group.Len(); i++ {
				n += nd.n.group.Shard(i).Step()
			}
		}
		if n == 0 {
			return
		}
		if round > snRoundsMax {
			s.fail("the shards still had work after %d rounds at one instant", snRoundsMax)
			return
		}
	}
}

// nextAt is when something is next due: an event or a shard's timer.
func (s *snSim) nextAt() int64 {
	next := int64(-1)
	if len(s.q) > 0 {
		next = s.q[0].at
	}
	for _, nd := range s.nodes {
		if !nd.up {
			continue
		}
		for i := 0; i < nd.n.group.Len(); i++ {
			if t, ok := nd.n.group.Shard(i).NextTimerNs(); ok {
				if t <= s.nowNs {
					t = s.nowNs + int64(shard.TickDefault)
				}
				if next < 0 || t < next {
					next = t
				}
			}
		}
	}
	return next
}

// runUntil runs to simulated time end, or until done reports true
// (checked after each instant), or a failure.
func (s *snSim) runUntil(end time.Duration, done func() bool) {
	for s.err == nil {
		s.settle()
		if done != nil && done() {
			return
		}
		next := s.nextAt()
		if next < 0 || next > int64(end) {
			s.nowNs = max(s.nowNs, int64(end))
			return
		}
		s.nowNs = max(s.nowNs, next)
		for len(s.q) > 0 && s.q[0].at <= s.nowNs && s.err == nil {
			heap.Pop(&s.q).(*dsEvent).fn()
		}
	}
}

// transmit sends one message of link lk; deliver runs at the receiver
// if the network lets it through and both ends are the processes they
// were. Its fate is drawn from a hash of the seed, the link and the
// message's number on it, not from the shared generator: replicas are
// walked in map order, and a seed must replay whatever that order is.
func (s *snSim) transmit(from *snNode, lk snLink, deliver func(dst *snNode)) {
	n := s.linkSeq[lk]
	s.linkSeq[lk] = n + 1
	var b [36]byte
	binary.BigEndian.PutUint64(b[:], uint64(s.seed))
	binary.BigEndian.PutUint32(b[8:], uint32(lk.from)<<8|uint32(lk.to))
	binary.BigEndian.PutUint32(b[12:], uint32(n))
	copy(b[16:], lk.key[:])
	h := xxhash.Sum64(b[:])
	s.stats.Messages++
	if s.stats.Messages > snMessagesMax {
		s.fail("more than %d messages: the cluster never settles", snMessagesMax)
		return
	}
	frac := float64(h>>11) / (1 << 53)
	if s.cut[lk.from][lk.to] || frac < s.p.dropP {
		s.stats.Dropped++
		return
	}
	dst := s.node(lk.to)
	fromInc, toInc := from.inc, dst.inc
	delay := int64(200*time.Microsecond) + int64(h%uint64(s.p.delayMaxMs*1000))*1000
	heap.Push(&s.q, &dsEvent{at: s.nowNs + delay, k1: h | 1, k2: n, fn: func() {
		if !dst.up || dst.inc != toInc || from.inc != fromInc {
			return // a connection of a dead process: lost with it
		}
		deliver(dst)
	}})
}

// snTransport is the simulated Transport: the node's messages travel as
// values through the simulator's network, appends that refer to the log
// read from it as sendfile would send them; every arrival feeds the
// receiver's liveness, and a beat on shard 0 runs the down-watch and
// sends pings and route announcements, as the TCP transport's ping loop
// does. It is built from the node's own transport.Deps (peerDeps).
type snTransport struct {
	nd        *snNode
	d         transport.Deps
	groups    map[raftlite.GroupID]int
	routesOut []peerwire.Route
}

var _ transport.Transport = (*snTransport)(nil)

func newSnTransport(nd *snNode, d transport.Deps) *snTransport {
	return &snTransport{nd: nd, d: d, groups: map[raftlite.GroupID]int{}}
}

// Control links' keys.
var (
	snPingKey     = [20]byte{0xff, 1}
	snRoutesKey   = [20]byte{0xff, 2}
	snTransferKey = [20]byte{0xff, 3}
	snReassignKey = [20]byte{0xff, 4}
	snGroupsKey   = [20]byte{0xff, 5}
	snProposeKey  = [20]byte{0xff, 6}
)

func (t *snTransport) link(to int32, key [20]byte) snLink {
	return snLink{from: t.nd.id, to: to, key: key}
}

func (t *snTransport) Send(r *partition.Replica, msgs []raftlite.Message) {
	meta := r.Key() == shardKey(metaTopicID, 0)
	for _, m := range msgs {
		m.Entries = append([]raftlite.Entry(nil), m.Entries...)
		if m.Type == raftlite.MsgReset && meta {
			m.Snapshot = t.d.Meta.Snapshot()
		}
		m.Snapshot = append([]byte(nil), m.Snapshot...)
		if !dsFillData(r, &m) {
			continue // not readable yet: consensus sends it again
		}
		from := t.nd.id
		t.nd.s.transmit(t.nd, t.link(int32(m.To), r.Key()), func(dst *snNode) {
			dst.tr.d.Live.Heard(from)
			owner, ok := dst.tr.groups[m.Group]
			if !ok {
				return // not open there (yet): consensus retransmits
			}
			_ = dst.n.group.Shard(owner).Post(func() { dst.tr.d.Replicas.Step(owner, &m) })
		})
	}
}

func (t *snTransport) Announce(r peerwire.Route) { t.routesOut = append(t.routesOut, r) }

func (t *snTransport) RequestTransfer(from int32, tr peerwire.Transfer) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(from, snTransferKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		dst.tr.d.Replicas.Transfer(tr)
	})
}

func (t *snTransport) RequestReassign(to int32, m peerwire.Reassign) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(to, snReassignKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		dst.tr.d.Replicas.Reassign(m)
	})
}

func (t *snTransport) AnswerReassign(to int32, m peerwire.ReassignState) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(to, snReassignKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		dst.tr.d.Meta.ReassignState(m)
	})
}

func (t *snTransport) SendTxnMarker(to int32, m peerwire.TxnMarker) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(to, snReassignKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		dst.tr.d.Replicas.TxnMarker(m)
	})
}

func (t *snTransport) AnswerTxnMarker(to int32, a peerwire.TxnMarkerAck) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(to, snReassignKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		dst.tr.d.Replicas.TxnMarkerAck(a)
	})
}

func (t *snTransport) RequestGroupsTopic(to int32) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(to, snGroupsKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		dst.tr.d.Meta.GroupsTopicWanted(self)
	})
}

func (t *snTransport) Propose(to int32, m peerwire.Propose) {
	self := t.nd.id
	m.Command = append([]byte(nil), m.Command...)
	t.nd.s.transmit(t.nd, t.link(to, snProposeKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		dst.tr.d.Meta.ProposeFor(self, m)
	})
}

func (t *snTransport) AnswerPropose(to int32, m peerwire.Proposed) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(to, snProposeKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		dst.tr.d.Meta.Proposed(self, m)
	})
}

func (t *snTransport) AskEnds(to int32, q peerwire.Ends) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(to, snReassignKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		if dst.tr.d.Ends != nil {
			dst.tr.d.Ends.Asked(self, q)
		}
	})
}

func (t *snTransport) AnswerEnds(to int32, a peerwire.EndsAnswer) {
	self := t.nd.id
	t.nd.s.transmit(t.nd, t.link(to, snReassignKey), func(dst *snNode) {
		dst.tr.d.Live.Heard(self)
		if dst.tr.d.Ends != nil {
			dst.tr.d.Ends.Answered(self, a)
		}
	})
}

func (t *snTransport) Opened(g raftlite.GroupID, shardID int) { t.groups[g] = shardID }
func (t *snTransport) Closed(g raftlite.GroupID)              { delete(t.groups, g) }
func (t *snTransport) Alive(id int32) bool                    { return t.d.Live.Alive(id) }
func (t *snTransport) Hops() uint64                           { return 0 }
func (t *snTransport) Shutdown(context.Context) error         { return nil }

// SetPeers is nothing to do: the simulated network reaches every node.
func (t *snTransport) SetPeers([]config.RosterNode) {}

// Segments is nil: the simulator's learners catch up by appends.
func (t *snTransport) Segments() transport.SegmentLink { return nil }

// beatLoop is the TCP transport's ping loop (transport.TCP's) over the
// simulated network: every heartbeat the down-watch turns liveness into
// edges (peerDown, the failover rule), and every peer gets a ping and the
// route changes (all led routes every transport.RoutesFullEvery). Runs
// on shard 0.
func (t *snTransport) beatLoop(sh *shard.Shard) {
	every := t.d.Heartbeat
	var sinceFull time.Duration
	watch := transport.NewDownWatch(every, t.d.Live.Timeout())
	var ids []int32
	for _, m := range t.d.Roster() {
		if int32(m.ID) != t.d.Self {
			ids = append(ids, int32(m.ID))
		}
	}
	s, self := t.nd.s, t.nd.id
	var beat func()
	beat = func() {
		if t.d.Stopped() {
			return
		}
		down, up := watch.Beat(t.d.Clock.Now(), ids, t.Alive)
		for _, id := range up {
			t.d.Liveness(id, true)
		}
		for _, id := range down {
			s.stats.PeerDowns++
			s.tracef("node %d sees node %d down", self, id)
			t.d.Liveness(id, false)
			t.d.Replicas.PeerDown(id)
		}
		sinceFull += every
		led := t.routesOut
		t.routesOut = nil
		if sinceFull >= transport.RoutesFullEvery {
			sinceFull = 0
			led = t.d.Routes.LedBy(t.d.Self)
		}
		for _, id := range ids {
			s.transmit(t.nd, t.link(id, snPingKey), func(dst *snNode) { dst.tr.d.Live.Heard(self) })
			if len(led) > 0 {
				rs := append([]peerwire.Route(nil), led...)
				s.transmit(t.nd, t.link(id, snRoutesKey), func(dst *snNode) {
					dst.tr.d.Live.Heard(self)
					for _, r := range rs {
						dst.tr.d.Routes.Learn(routes.Announced(r))
					}
				})
			}
		}
		sh.AfterFunc(every, beat)
	}
	beat()
}

// view is the node's published View (nil when down).
func (nd *snNode) view() *View {
	if !nd.up {
		return nil
	}
	return nd.n.view.Load()
}

// replica is the node's open replica of partition p of topic id, or nil.
func (nd *snNode) replica(id metadata.TopicID, p int32) *partition.Replica {
	if !nd.up {
		return nil
	}
	h := nd.n.hosts[nd.n.shardOf(id, p)]
	if h == nil {
		return nil
	}
	return h.Get(shardKey(id, p))
}

// snLogOut is where the simulated nodes log: nowhere, or with SNLOG set
// (replaying one seed), stderr.
func snLogOut() io.Writer {
	if os.Getenv("SNLOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
