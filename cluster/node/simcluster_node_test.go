package node

import (
	"encoding/binary"
	"fmt"
	ctl "github.com/corestream/corestream/cluster/controller"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/transport"
	"hash/crc32"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// One simulated node's control plane (simcluster_sim_test.go runs N of
// them): the node's own parts over the simulator's clock, queue and
// network, with the simulator's stand-ins where the node needs shards.

// simDisk is what a node keeps across a crash: every group's log (the
// simulator's logs are durable as soon as they are written) and its term
// and vote.
type simDisk struct {
	log  *raftlite.MemLog
	data map[int64][]byte
	hs   raftlite.HardState
	// snap is the metadata snapshot (ctl.EncodeSnapshot; nil: none), the
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
	core        *ctl.Core
	view        *View
	loaded      bool
	routes      routes.Table
	live        *transport.Liveness
	watch       *transport.DownWatch
	bal         *ctl.Balancer
	meta        *simGroup
	groups      map[raftlite.GroupID]*simGroup
	announce    []peerwire.Route
	sinceFull   time.Duration
	stats       ctl.BalanceStats
	rebalancing atomic.Bool
	proposals   []simProposal
	inSync      map[[20]byte][]int32
	lags        routes.LagTable
	// routeTerm is the highest route term this node has held per
	// partition: a route never goes back to an older generation.
	routeTerm map[[20]byte]int32
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
	nd.core = ctl.NewCore(sc.log)
	nd.view = nd.core.View()
	nd.loaded = false
	nd.routes = routes.Table{}
	nd.groups = map[raftlite.GroupID]*simGroup{}
	nd.announce, nd.sinceFull, nd.proposals = nil, 0, nil
	nd.inSync = map[[20]byte][]int32{}
	nd.lags = routes.LagTable{}
	nd.routeTerm = map[[20]byte]int32{}
	nd.live = transport.NewLiveness(nd.clock, sc.elect)
	nd.watch = transport.NewDownWatch(sc.hb, sc.elect)
	var all []raftlite.NodeID
	for i := 1; i <= sc.p.n; i++ {
		all = append(all, raftlite.NodeID(i))
	}
	nd.meta = nd.openGroup(shardKey(metaTopicID, 0), all, true)
	// As startController: the snapshot first, the log after it replayed
	// as the group commits; the snapshot's View opens its partitions.
	if snap := nd.meta.disk.snap; snap != nil {
		if _, err := nd.core.Install(snap); err != nil {
			sc.fail("node %d: its snapshot: %v", nd.id, err)
			return
		}
		nd.core.Restored(nd.meta.log.TermAt)
		nd.view = nd.core.View()
		nd.reconcile()
	}
	ids := make([]int32, sc.p.n)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	nd.bal = ctl.NewBalancer(ctl.BalancerDeps{
		Clock: nd.clock,
		After: func(d time.Duration, fn func()) { nd.after(inc, d, fn) },
		Log:   sc.log, Roster: func() []int32 { return ids }, Alive: nd.alive,
		View:        func() *View { return nd.view },
		Routes:      &nd.routes,
		LastMovedMs: func(topic string, p int32) int64 { return nd.core.State().LastMovedMs(topic, p) },
		IsPrimary:   func() bool { return nd.meta.rn.Role() == raftlite.RoleLeader },
		Transfer:    nd.transfer,
		Propose:     nd.proposeMeta,
		Stats:       &nd.stats, Rebalancing: &nd.rebalancing,
		Every: sc.p.balanceEvery, Auto: true, ImbalancePercent: sc.p.imbalancePercent, PreferredPercent: 10,
		MoveTimeout: 2*sc.elect + time.Second,
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

func (nd *simNode) alive(id int32) bool { return id == nd.id || nd.live.Alive(id) }

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
	down, _ := nd.watch.Beat(nd.clock.Now(), peers, nd.live.Alive)
	for _, id := range down {
		sc.res.PeerDown++
		sc.tracef("node %d: peer %d down", nd.id, id)
		nd.peerDown(raftlite.NodeID(id))
	}
	for _, g := range nd.sortedGroups() {
		if !g.meta && g.rn.Role() == raftlite.RoleLeader {
			in := nd.sampleInSync(g)
			if !slices.Equal(in, nd.inSync[g.key]) {
				nd.inSync[g.key] = in
				nd.setRoute(g)
			}
		}
	}
	nd.checkLoaded()
	nd.sinceFull += sc.hb
	routes := nd.announce
	nd.announce = nil
	if nd.sinceFull >= transport.RoutesFullEvery {
		nd.sinceFull = 0
		routes = nd.routes.LedBy(nd.id)
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
	if old, ok := nd.routes.Get(g.key); ok && old.Term < g.rn.Term() {
		seed = old.InSync
	}
	rn := g.rn
	return nd.lags.Sample(g.key, nd.clock.Now(), nd.sc.p.lagWindow, routes.SampleInput{
		Self: raftlite.NodeID(nd.id), Term: rn.Term(), Replicas: g.replicas, Seed: seed, End: g.log.EndOffset(),
		Follower: func(id raftlite.NodeID) (int64, bool, bool) {
			m, active, ok := rn.Follower(id)
			return m, active || rn.Quiesced(), ok
		},
		Alive: func(id raftlite.NodeID) bool { return nd.alive(int32(id)) },
	})
}

// peerDown is the node's failover reaction (replicaHost.peerDown, on the
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
			if transport.CampaignsAfterDown(g.replicas, lead, id, raftlite.NodeID(nd.id), alive) {
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
	nd.live.Heard(m.from)
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
			nd.core.ObserveReset(&m.raft, g.rn.Leader(), g.rn.Term())
			nd.checkLoaded()
		}
		nd.ready(g)
	case simRoutes:
		for _, r := range m.routes {
			key, rt := routes.Announced(r)
			nd.routes.Learn(key, rt)
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
	data, err := ctl.EncodeCommand(cmd, nd.clock.Now().UnixMilli())
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
		nd.routes.SetLocal(g.key, routes.Route{Leader: leaderOrNone(rd.Lead), Term: term})
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
	rt := routes.Route{Leader: leaderOrNone(lead), Term: g.rn.Term()}
	if lead == raftlite.NodeID(nd.id) {
		rt.InSync = nd.inSync[g.key]
	}
	if !nd.routes.SetLocal(g.key, rt) {
		return
	}
	nd.checkRoute(g.key)
	if lead == raftlite.NodeID(nd.id) {
		nd.announce = append(nd.announce, routes.Announcement(g.key, rt))
	}
}

// checkRoute holds a route to the checker's record: the primary it names
// led that generation, and its generation never goes back.
func (nd *simNode) checkRoute(key [20]byte) {
	sc := nd.sc
	rt, ok := nd.routes.Get(key)
	if !ok {
		return
	}
	if rt.Leader > 0 {
		if led, ok := sc.leaders[partition.GroupID(key)][rt.Term]; !ok || led != rt.Leader {
			sc.fail("node %d: route of %x/%d names node %d for generation %d, which node %d led",
				nd.id, key[:2], binary.BigEndian.Uint32(key[16:]), rt.Leader, rt.Term, led)
			return
		}
	}
	if rt.Term < nd.routeTerm[key] {
		sc.fail("node %d: route of %x/%d went back from generation %d to %d (primary %d)",
			nd.id, key[:2], binary.BigEndian.Uint32(key[16:]), nd.routeTerm[key], rt.Term, rt.Leader)
		return
	}
	nd.routeTerm[key] = rt.Term
}

// applyMeta applies the committed metadata entries through the
// controller's core, checks them against the committed log every node
// must share, then publishes, reconciles and checks readiness as the
// controller does.
func (nd *simNode) applyMeta(commit int64) {
	sc := nd.sc
	g := nd.meta
	changed := false
	for nd.core.Applied() < commit {
		off := nd.core.Applied() + 1
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
		ch, err := nd.core.ApplyData(data, off)
		if err != nil {
			sc.fail("node %d: %v", nd.id, err)
			return
		}
		changed = changed || ch
	}
	if changed {
		nd.view = nd.core.View()
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
	ok, err := nd.core.Install(r.Snapshot)
	if err != nil {
		sc.fail("node %d: installing a snapshot: %v", nd.id, err)
		return false
	}
	if ok {
		g.disk.snap = r.Snapshot
		sc.res.Installs++
		sc.tracef("node %d installs a metadata snapshot up to %d", nd.id, nd.core.Applied())
		nd.view = nd.core.View()
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
	if every == 0 || nd.core.Applied()-(g.log.StartOffset()-1) < every {
		return
	}
	applied := nd.core.Applied()
	g.disk.snap = ctl.EncodeSnapshot(applied, nd.core.State().Snapshot())
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
	if !nd.loaded && nd.core.LoadedIn(nd.meta.rn.Term(), nd.meta.rn.Leader() != raftlite.None) {
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
				sc.fail("node %d loaded its metadata at %d without acknowledged topic %s", nd.id, nd.core.Applied(), name)
				return
			}
		}
		sc.tracef("node %d: metadata loaded at %d (%d topics)", nd.id, nd.core.Applied(), len(nd.view.Sorted))
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
