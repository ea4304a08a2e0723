package node

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/corestream/corestream/cluster/routes"
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// The data-path simulator (simdata*_test.go) runs N nodes' data path in
// one goroutine on a simulated clock, seeded: each node's real shards
// (a stepped shard.Group: the real rounds, run by the simulator), real
// partition replicas (shard/partition: consensus, segment logs, the
// idempotent-producer table, the hard-state journal) on the node's own
// in-memory FS, and the node's real typed service (nodesvc.Service), through
// which clients produce and consume as a front end calls it. Replicas
// talk over a simulated network that drops, delays, reorders and
// partitions; nodes crash (a process kill, or a power loss that tears
// the files' unsynced tails) and restart from their FS; wall clocks jump.
// The metadata is one topic fixed at the start (the control-plane
// simulator, simcluster*_test.go, covers the metadata group).

// Bounds of a data-path simulation.
const (
	dsTick         = 50 * time.Millisecond // consensus tick (heartbeat interval)
	dsElectionTick = 10                    // election timeout in ticks
	dsShards       = 2                     // shards per node: clients on 0, partitions spread
	dsSettleMax    = 120 * time.Second     // time the healed cluster has to settle
	dsRoundsMax    = 200_000               // rounds of work at one instant before the run is failed
	dsAttemptMax   = 3 * time.Second       // a client's wait for an answer before it retries elsewhere
	dsDir          = "/data"
	// dsMessagesMax bounds one seed's messages: a healthy seed sends
	// tens of thousands; a group that never converges, and resends for
	// the whole settle time, fails instead of running for minutes.
	dsMessagesMax = 3_000_000
)

// dsParams are one seed's drawn parameters.
type dsParams struct {
	n, parts, rf, clients int
	dropP                 float64
	delayMaxMs            int
	faultGapMs            int     // mean time between faults
	crashP, powerLossP    float64 // of a fault being a crash; of a crash tearing files
	jumpP                 float64
	segmentBytes          int64
	thinkMaxMs            int
}

func drawDsParams(rng *rand.Rand, nodes int) dsParams {
	p := dsParams{n: nodes}
	if p.n == 0 {
		p.n = 3 + 2*rng.IntN(2)
	}
	p.parts = 1 + rng.IntN(4)
	p.rf = min(3, p.n)
	if p.n == 5 && rng.IntN(3) == 0 {
		p.rf = 5
	}
	if p.n > 5 {
		p.parts = 8 + rng.IntN(9)
	}
	p.clients = 1 + rng.IntN(4)
	p.dropP = []float64{0, 0.01, 0.05, 0.1}[rng.IntN(4)]
	p.delayMaxMs = []int{1, 5, 30}[rng.IntN(3)]
	p.faultGapMs = 200 + rng.IntN(1500)
	p.crashP = 0.2 + 0.3*rng.Float64()
	p.powerLossP = rng.Float64()
	p.jumpP = 0.1
	p.segmentBytes = int64(4<<10) << rng.IntN(4)
	p.thinkMaxMs = []int{0, 5, 50}[rng.IntN(3)]
	return p
}

// dsEvent is a scheduled action. Events run in (at, k1, k2) order; the
// keys come from what scheduled them (a link and its sequence, a client
// and its operation count), never from the order in which replicas
// happened to be walked, so that a seed replays exactly.
type dsEvent struct {
	at     int64
	k1, k2 uint64
	fn     func()
}

type dsQueue []*dsEvent

func (q dsQueue) Len() int { return len(q) }
func (q dsQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.k1 != b.k1 {
		return a.k1 < b.k1
	}
	return a.k2 < b.k2
}
func (q dsQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *dsQueue) Push(x any)   { *q = append(*q, x.(*dsEvent)) }
func (q *dsQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// dsStats are a run's figures.
type dsStats struct {
	Messages, Dropped, Partitions, Crashes, PowerLosses, Stops, ClockJumps int
	Produced, Acked, Retries, Fetches, RecordsChecked                      int
	PrimaryTerms                                                           int
	// Lost counts what a lossy run (fsync other than always) saw lost:
	// acknowledged batches refused or read out of place; Fenced, the
	// replicas fenced because their group lost committed entries.
	Lost, Fenced int
}

// dsSim is one seeded run.
type dsSim struct {
	seed  int64
	p     dsParams
	rng   *rand.Rand
	nowNs int64
	q     dsQueue
	kseq  uint64 // k2 of the simulator's own events
	nodes []*dsNode
	topic *metadata.Topic
	view  *View
	// cut[a][b] drops everything a sends to b.
	cut [][]bool
	// linkSeq numbers the messages of each (from, to, group) link.
	linkSeq map[dsLink]uint64
	// primaries records, per partition and generation, the node that led it.
	primaries map[int32]map[int32]int32
	clients   []*dsClient
	readers   []*dsReader
	acks      *dsAcks
	producing bool // clients start new batches only while true
	stats     dsStats
	// fsync is the replicas' policy; lossy (any policy but always) lets
	// a power loss take acknowledged batches, so that what the checks
	// would fail is counted (lost) and only convergence is checked.
	fsync segment.FsyncPolicy
	lossy bool
	err   error
	trace func(string)
}

type dsLink struct {
	from, to int32
	key      [20]byte
}

// dsNode is one simulated node: its FS survives crashes, the rest is
// rebuilt by start.
type dsNode struct {
	s            *dsSim
	id           int32
	fs           *vfs.MemFS
	up           bool
	inc          int   // incarnation: messages of an earlier one are lost
	wallOffsetNs int64 // the wall clock's offset: the sum of its jumps
	group        *shard.Group
	hosts        []*partition.Host
	rt           routes.Table
	svc          *nodesvc.Service
}

func (s *dsSim) now() time.Duration { return time.Duration(s.nowNs) }

func (s *dsSim) tracef(format string, args ...any) {
	if s.trace != nil {
		s.trace(fmt.Sprintf("%8.3fs ", s.now().Seconds()) + fmt.Sprintf(format, args...))
	}
}

// lost fails the run, or, in a lossy run, counts and traces an
// acknowledged batch lost to a power loss.
func (s *dsSim) lost(format string, args ...any) {
	if !s.lossy {
		s.fail(format, args...)
		return
	}
	s.stats.Lost++
	s.tracef("LOST: "+format, args...)
}

func (s *dsSim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("at %v: %s", s.now(), fmt.Sprintf(format, args...))
		s.tracef("FAIL: %v", s.err)
	}
}

// at schedules one of the simulator's own events after d.
func (s *dsSim) at(d time.Duration, fn func()) {
	s.kseq++
	heap.Push(&s.q, &dsEvent{at: s.nowNs + int64(d), k2: s.kseq, fn: fn})
}

// Now is the shards' monotonic clock (shard.Clock).
func (s *dsSim) Now() int64 { return s.nowNs }

func newDsSim(seed int64, nodes int, fsync segment.FsyncPolicy, trace func(string)) *dsSim {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xda7a))
	s := &dsSim{seed: seed, rng: rng, p: drawDsParams(rng, nodes), nowNs: int64(time.Second),
		linkSeq: map[dsLink]uint64{}, primaries: map[int32]map[int32]int32{}, trace: trace, producing: true}
	s.acks = newDsAcks(s)
	s.fsync, s.lossy = fsync, fsync != segment.FsyncAlways
	var id metadata.TopicID
	binary.BigEndian.PutUint64(id[:8], rng.Uint64())
	binary.BigEndian.PutUint64(id[8:], rng.Uint64())
	t := &metadata.Topic{Name: "sim", ID: id, ReplicationFactor: s.p.rf}
	for p := 0; p < s.p.parts; p++ {
		var reps []metadata.NodeID
		first := rng.IntN(s.p.n)
		for i := 0; i < s.p.rf; i++ {
			reps = append(reps, metadata.NodeID(1+(first+i)%s.p.n))
		}
		t.Replicas = append(t.Replicas, reps)
	}
	s.topic = t
	s.view = &View{Applied: 0, Topics: map[string]*metadata.Topic{t.Name: t}, ByID: map[metadata.TopicID]*metadata.Topic{t.ID: t}, Sorted: []*metadata.Topic{t}}
	s.cut = make([][]bool, s.p.n+1)
	for i := range s.cut {
		s.cut[i] = make([]bool, s.p.n+1)
	}
	for i := 1; i <= s.p.n; i++ {
		nd := &dsNode{s: s, id: int32(i), fs: vfs.NewMem()}
		if err := nd.fs.MkdirAll(dsDir, 0o755); err != nil {
			s.fail("mkdir: %v", err)
		}
		s.nodes = append(s.nodes, nd)
	}
	s.tracef("seed %d: %+v; replicas %v", seed, s.p, t.Replicas)
	return s
}

func (s *dsSim) node(id int32) *dsNode { return s.nodes[id-1] }

// settle runs every live node's shards, in node and shard order, until
// none has work left at this instant.
func (s *dsSim) settle() {
	for round := 0; ; round++ {
		n := 0
		for _, nd := range s.nodes {
			if !nd.up {
				continue
			}
			for i := 0; i < nd.group.Len(); i++ {
				n += nd.group.Shard(i).Step()
			}
		}
		if n == 0 {
			return
		}
		if round > dsRoundsMax {
			s.fail("the shards still had work after %d rounds at one instant", dsRoundsMax)
			return
		}
	}
}

// nextAt is when something is next due: an event or a shard's timer.
func (s *dsSim) nextAt() int64 {
	next := int64(-1)
	if len(s.q) > 0 {
		next = s.q[0].at
	}
	for _, nd := range s.nodes {
		if !nd.up {
			continue
		}
		for i := 0; i < nd.group.Len(); i++ {
			if t, ok := nd.group.Shard(i).NextTimerNs(); ok {
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

// runUntil runs the simulation to simulated time end, or until done
// reports true (checked after each instant), or a failure.
func (s *dsSim) runUntil(end time.Duration, done func() bool) {
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

// start builds the node's shards, hosts, replicas and service on its FS,
// as Node.Start does for the data path.
func (nd *dsNode) start() {
	s := nd.s
	states, err := partition.LoadHardStates(nd.fs, dsDir)
	if err != nil {
		s.fail("node %d: loading hard states: %v", nd.id, err)
		return
	}
	// The logs closed at the last graceful stop open without a scan.
	stopped, err := segment.LoadStopRecord(nd.fs, dsDir)
	if err != nil {
		s.fail("node %d: loading the stop record: %v", nd.id, err)
		return
	}
	nd.hosts = make([]*partition.Host, dsShards)
	var hostErr error
	g, err := shard.NewGroup(shard.Config{Count: dsShards, Clock: s, CallsInFlightMax: 1 << 12,
		OnStart: func(sh *shard.Shard) {
			h, err := partition.NewHost(sh, segment.NewPwriteEngine(), dsTick, 0)
			if err == nil {
				err = h.UseJournal(nd.fs, dsDir, states)
			}
			if err != nil && hostErr == nil {
				hostErr = err
			}
			nd.hosts[sh.ID()] = h
		}})
	if err == nil {
		err = g.StartStepped()
	}
	if err == nil {
		err = hostErr
	}
	if err != nil {
		s.fail("node %d: starting shards: %v", nd.id, err)
		return
	}
	nd.group, nd.up, nd.rt = g, true, routes.Table{}
	nd.svc = nodesvc.New(nodesvc.Deps{
		Self: raftlite.NodeID(nd.id), ClusterID: func() string { return "sim" },
		AddrOf: func(id int32) string { return fmt.Sprintf("node-%d:7070", id) },
		Shards: g, Hosts: nd.hosts, ShardOf: nd.shardOf,
		View:       func() *View { return s.view },
		Routes:     &nd.rt,
		Alive:      func(int32) bool { return true },
		Ready:      func() error { return nil },
		Stopping:   func() bool { return false },
		OpenFailed: func([20]byte, string, int32) error { return nil },
		Now:        nd.wallNow,
	})
	for p, reps := range s.topic.Replicas {
		if hosts(reps, raftlite.NodeID(nd.id)) {
			nd.open(int32(p), stopped)
		}
	}
	s.tracef("node %d starts (incarnation %d)", nd.id, nd.inc)
}

// partitionDir is the directory of the node's replica of p.
func (nd *dsNode) partitionDir(p int32) string {
	return fmt.Sprintf("%s/partitions/%x-%d", dsDir, nd.s.topic.ID, p)
}

// open opens the node's replica of p on its shard (stopped: the logs
// closed at the last graceful stop, nil for none).
func (nd *dsNode) open(p int32, stopped *segment.StopRecord) {
	s := nd.s
	lim := raftlite.DefaultLimits()
	lim.ElectionTicks, lim.HeartbeatTicks = dsElectionTick, 1
	reps := s.topic.Replicas[p]
	ids := make([]raftlite.NodeID, len(reps))
	for i, r := range reps {
		ids[i] = raftlite.NodeID(r)
	}
	h := nd.hosts[nd.shardOf(s.topic.ID, p)]
	cfg := partition.Config{DenseOffsets: true, FS: nd.fs, Dir: nd.partitionDir(p),
		Log: segment.Config{SegmentBytes: s.p.segmentBytes, IndexIntervalBytes: 1024, Fsync: s.fsync,
			BatchBytesMax: 1 << 20, Stopped: stopped},
		Topic: s.topic.Name, TopicID: s.topic.ID, Partition: p, Self: raftlite.NodeID(nd.id),
		Replicas: ids, Limits: lim, Send: nd.send, OnRoute: nd.routeChanged,
		NowMs: func() int64 { return nd.wallNow().UnixMilli() }}
	if err := h.Shard().Post(func() {
		_, err := h.Open(cfg)
		switch {
		case err == nil:
		case s.lossy && errors.Is(err, partition.ErrFenced):
			nd.fenced(p)
		default:
			s.fail("node %d: opening partition %d: %v", nd.id, p, err)
		}
	}); err != nil {
		s.fail("node %d: posting an open: %v", nd.id, err)
	}
}

// fenced plays the operator for the node's replica of p, fenced because
// its group lost entries it knew committed (possible only in a lossy
// run): a second later the replica's directory is removed and the
// partition opened again, so that it copies the log from its peers.
func (nd *dsNode) fenced(p int32) {
	s, inc := nd.s, nd.inc
	s.stats.Fenced++
	s.tracef("node %d: partition %d fenced; its directory is removed in 1s", nd.id, p)
	s.at(time.Second, func() {
		if !nd.up || nd.inc != inc {
			return // restarted meanwhile: its open finds the fence again
		}
		if err := removeTree(nd.fs, nd.partitionDir(p)); err != nil {
			s.fail("node %d: removing partition %d's directory: %v", nd.id, p, err)
			return
		}
		nd.open(p, nil)
	})
}

func (nd *dsNode) shardOf(id [16]byte, p int32) int {
	return shard.ShardForPartition(id, uint32(p), dsShards)
}

// wallNow is the node's wall clock: the simulated time, shifted by its
// clock jumps.
func (nd *dsNode) wallNow() time.Time {
	return time.UnixMilli(1_700_000_000_000).Add(nd.s.now() + time.Duration(nd.wallOffsetNs))
}

// replica is the node's open replica of partition p, or nil.
func (nd *dsNode) replica(p int32) *partition.Replica {
	if !nd.up {
		return nil
	}
	return nd.hosts[nd.shardOf(nd.s.topic.ID, p)].Get(shardKey(nd.s.topic.ID, p))
}

// crash ends the node's process: nothing queued runs; with powerLoss the
// FS also loses what was not synced, tearing the first lost write.
func (nd *dsNode) crash(powerLoss bool) {
	s := nd.s
	nd.group.AbandonStepped()
	nd.up = false
	nd.inc++
	s.stats.Crashes++
	if powerLoss {
		s.stats.PowerLosses++
		nd.fs.Crash(s.rng.Uint64())
	}
	s.tracef("node %d crashes (power loss %v)", nd.id, powerLoss)
}

// stop stops the node gracefully, as Node.stopShards does: every host
// closes its logs into one stop record (waiting requests are answered),
// the shards run until quiescent, and the record is committed.
func (nd *dsNode) stop() {
	s := nd.s
	rec := segment.NewStopRecord(dsDir)
	for i, h := range nd.hosts {
		if err := nd.group.Shard(i).Post(func() {
			if err := h.Stop(rec); err != nil {
				s.fail("node %d: stopping shard %d: %v", nd.id, i, err)
			}
		}); err != nil {
			s.fail("node %d: posting a stop: %v", nd.id, err)
		}
	}
	if err := nd.group.StopStepped(dsRoundsMax); err != nil {
		s.fail("node %d: %v", nd.id, err)
	}
	if rec.Len() > 0 {
		if err := rec.Commit(nd.fs); err != nil {
			s.fail("node %d: committing the stop record: %v", nd.id, err)
		}
	}
	nd.up = false
	nd.inc++
	s.stats.Stops++
	s.tracef("node %d stops (%d logs in the stop record)", nd.id, rec.Len())
}

// routeChanged is the replicas' OnRoute: the local route, and the check
// that one node leads a partition in each generation.
func (nd *dsNode) routeChanged(r *partition.Replica) {
	s := nd.s
	leader, term := r.Route()
	nd.rt.SetLocal(r.Key(), routes.Route{Leader: leaderOrNone(leader), Term: term})
	if leader != raftlite.NodeID(nd.id) {
		return
	}
	p := r.Config().Partition
	if s.primaries[p] == nil {
		s.primaries[p] = map[int32]int32{}
	}
	if prev, ok := s.primaries[p][term]; ok && prev != nd.id {
		s.fail("partition %d: nodes %d and %d both lead generation %d", p, prev, nd.id, term)
	} else if !ok {
		s.stats.PrimaryTerms++
		s.tracef("node %d leads partition %d in generation %d", nd.id, p, term)
	}
	s.primaries[p][term] = nd.id
}

// send is every replica's Config.Send (on the sender's shard): appends
// that refer to the log get their bytes from it, as the TCP transport
// sends them by sendfile, then each message takes its chances on the
// network.
func (nd *dsNode) send(r *partition.Replica, msgs []raftlite.Message) {
	for _, m := range msgs {
		m.Entries = append([]raftlite.Entry(nil), m.Entries...)
		if !dsFillData(r, &m) {
			continue // not readable yet: consensus sends it again
		}
		nd.s.transmit(nd, int32(m.To), r.Key(), r.Config().Partition, m)
	}
}

// transmit drops or delays one message. Its fate is drawn from a hash of
// the seed, the link and the message's number on it, not from the shared
// generator: replicas on a shard are walked in map order, and a seed must
// replay whatever that order is.
func (s *dsSim) transmit(from *dsNode, to int32, key [20]byte, p int32, m raftlite.Message) {
	lk := dsLink{from: from.id, to: to, key: key}
	n := s.linkSeq[lk]
	s.linkSeq[lk] = n + 1
	var b [36]byte
	binary.BigEndian.PutUint64(b[:], uint64(s.seed))
	binary.BigEndian.PutUint32(b[8:], uint32(from.id)<<8|uint32(to))
	binary.BigEndian.PutUint32(b[12:], uint32(n))
	copy(b[16:], key[:])
	h := xxhash.Sum64(b[:])
	s.stats.Messages++
	if s.stats.Messages > dsMessagesMax {
		s.fail("more than %d messages: the replicas never converge", dsMessagesMax)
		return
	}
	frac := float64(h>>11) / (1 << 53)
	if s.cut[from.id][to] || frac < s.p.dropP {
		s.stats.Dropped++
		return
	}
	dst := s.node(to)
	fromInc, toInc := from.inc, dst.inc
	delay := int64(200*time.Microsecond) + int64(h%uint64(s.p.delayMaxMs*1000))*1000
	heap.Push(&s.q, &dsEvent{at: s.nowNs + delay, k1: h | 1, k2: n, fn: func() {
		if !dst.up || dst.inc != toInc || from.inc != fromInc {
			return // a connection of a dead process: lost with it
		}
		sh := dst.group.Shard(dst.shardOf(s.topic.ID, p))
		_ = sh.Post(func() {
			if r := dst.hosts[sh.ID()].Get(key); r != nil {
				if err := r.Step(m); s.lossy && errors.Is(err, partition.ErrFenced) {
					dst.fenced(p)
				}
			}
		})
	}})
}

// dsFillData gives m's entries their bytes: copies of what the primary
// proposed, or the batches read from its log. It reports false when the
// log has not written them yet.
func dsFillData(r *partition.Replica, m *raftlite.Message) bool {
	var need []int
	for i := range m.Entries {
		if m.Entries[i].Data == nil {
			need = append(need, i)
		} else {
			m.Entries[i].Data = append([]byte(nil), m.Entries[i].Data...)
		}
	}
	if len(need) == 0 {
		return true
	}
	first, last := m.Entries[need[0]].Base, m.Entries[need[len(need)-1]].Last
	data, at, ok := dsReadLogAt(r.Log(), first, last)
	if !ok {
		return false
	}
	for _, i := range need {
		e := &m.Entries[i]
		for len(data) >= batch.HeaderSize {
			h, err := batch.ReadHeader(data)
			if err != nil || h.Size() > len(data) {
				return false
			}
			b := data[:h.Size()]
			data = data[h.Size():]
			base := at // raft offsets: the headers carry user ones
			at += h.RaftWidth()
			if base == e.Base {
				e.Data, e.Bytes = b, int32(len(b))
				break
			}
		}
		if e.Data == nil {
			return false
		}
	}
	return true
}

// dsReadLog reads the batches of raft offsets first..last from l.
func dsReadLog(l *segment.Log, first, last int64) ([]byte, bool) {
	data, _, ok := dsReadLogAt(l, first, last)
	return data, ok
}

// dsReadLogAt is dsReadLog that also answers the raft offset of the
// first batch read.
func dsReadLogAt(l *segment.Log, first, last int64) ([]byte, int64, bool) {
	if last > l.WrittenOffset() {
		return nil, 0, false
	}
	spans, err := l.Read(first, 64<<20, last)
	if err != nil || len(spans) == 0 {
		return nil, 0, false
	}
	defer segment.ReleaseSpans(spans)
	var data []byte
	for _, sp := range spans {
		if data, err = sp.AppendTo(data); err != nil {
			return nil, 0, false
		}
	}
	return data, spans[0].FirstOffset, true
}

// dsCheckDense checks the density of a client partition's offsets
// (docs/design/offsets.md) in l below raft offset end: the data batches
// start at the log's user start and run on with no gap, each consensus
// batch is zero-width at the next data batch's offset, and the raft
// offsets the headers imply match the log's translation.
func dsCheckDense(l *segment.Log, end int64) error {
	start := l.LogStartOffset()
	if end <= start {
		return nil
	}
	data, at, ok := dsReadLogAt(l, start, end-1)
	if !ok {
		return fmt.Errorf("cannot read [%d, %d)", start, end)
	}
	next := l.UserStartOffset()
	for len(data) >= batch.HeaderSize && at < end {
		h, err := batch.ReadHeader(data)
		if err != nil || h.Size() > len(data) {
			return fmt.Errorf("bad batch at raft offset %d: %v", at, err)
		}
		if h.BaseOffset != next {
			return fmt.Errorf("the batch at raft offset %d has user offset %d, the records before it end at %d", at, h.BaseOffset, next)
		}
		if h.IsControl() && !h.IsZeroWidth() {
			return fmt.Errorf("a control batch at raft offset %d takes %d offsets", at, h.LastOffsetDelta+1)
		}
		if u := l.UserOffset(at); u != h.BaseOffset {
			return fmt.Errorf("raft offset %d translates to %d, its batch is at %d", at, u, h.BaseOffset)
		}
		next = h.LastOffset() + 1
		at += h.RaftWidth()
		data = data[h.Size():]
	}
	return nil
}
