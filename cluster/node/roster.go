package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/checkpoint"
	"github.com/corestream/corestream/shard/partition"
)

// Growing and shrinking the roster (docs/design/membership.md). The
// roster lives in the committed metadata; this file keeps the node's copy
// of it (rosterBook), tells the transport of peers that came or went,
// seeds the metadata with cluster.nodes at a cluster's first start, and
// drives, on the metadata primary, the metadata group's membership
// change that follows each roster command.

const (
	// rosterDriveEvery is how often the metadata primary looks for a
	// roster member to move on (also after every commit).
	rosterDriveEvery = 200 * time.Millisecond
	// rosterPromoteWait bounds one promotion attempt of a joining node:
	// the learner must hold the committed log by then, else the driver
	// tries again at its next look.
	rosterPromoteWait = 5 * time.Second
)

// rosterBook is the roster this node acts on: cluster.nodes until the
// metadata records a roster, then the committed one. Read on any
// goroutine; written only by learnRoster on shard metaShard.
type rosterBook struct {
	cur atomic.Pointer[rosterNow]
}

// rosterNow is one roster, immutable once stored.
type rosterNow struct {
	// nodes holds every member by id, joining and leaving ones included
	// (the transport reaches them all).
	nodes []config.RosterNode
	// states holds each member's state; nil while the roster is
	// cluster.nodes (every member active).
	states map[int32]metadata.MemberState
}

func newRosterBook(seed []config.RosterNode) *rosterBook {
	b := &rosterBook{}
	nodes := append([]config.RosterNode(nil), seed...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	b.cur.Store(&rosterNow{nodes: nodes})
	return b
}

// nodes is every member (do not modify).
func (b *rosterBook) nodes() []config.RosterNode { return b.cur.Load().nodes }

// active is the members placement and the balancer may use.
func (b *rosterBook) active() []config.RosterNode {
	now := b.cur.Load()
	if now.states == nil {
		return now.nodes
	}
	out := make([]config.RosterNode, 0, len(now.nodes))
	for _, m := range now.nodes {
		if now.states[int32(m.ID)] == metadata.MemberActive {
			out = append(out, m)
		}
	}
	return out
}

// state is member id's state ("" when not a member); every member of
// cluster.nodes is active until the roster is committed.
func (b *rosterBook) state(id int32) metadata.MemberState {
	now := b.cur.Load()
	for _, m := range now.nodes {
		if int32(m.ID) == id {
			if now.states == nil {
				return metadata.MemberActive
			}
			return now.states[id]
		}
	}
	return ""
}

// learn replaces the roster with the committed members (none: keep
// cluster.nodes) and reports whether it changed.
func (b *rosterBook) learn(members []*metadata.Member) bool {
	if len(members) == 0 {
		return false
	}
	next := &rosterNow{states: make(map[int32]metadata.MemberState, len(members))}
	for _, m := range members {
		next.nodes = append(next.nodes, rosterNode(m))
		next.states[m.ID] = m.State
	}
	old := b.cur.Load()
	if old.states != nil && fmt.Sprint(old.nodes, old.states) == fmt.Sprint(next.nodes, next.states) {
		return false
	}
	b.cur.Store(next)
	return true
}

func rosterNode(m *metadata.Member) config.RosterNode {
	return config.RosterNode{ID: int(m.ID), ClientAddr: m.ClientAddr, ReplicationAddr: m.ReplicationAddr,
		HTTPAddr: m.HTTPAddr, KafkaAddr: m.KafkaAddr, Rack: m.Rack}
}

func rosterMember(n config.RosterNode) metadata.Member {
	return metadata.Member{ID: int32(n.ID), ClientAddr: n.ClientAddr, ReplicationAddr: n.ReplicationAddr,
		HTTPAddr: n.HTTPAddr, KafkaAddr: n.KafkaAddr, Rack: n.Rack}
}

// metaMembers is the metadata replica's opening configuration: the ids
// of cluster.nodes as voters, or, on a node that joins a running cluster
// (cluster.join), the others as voters and itself a learner, so it never
// campaigns before the group makes it a voter. Either way a configuration
// entry in the metadata log wins over it.
func metaMembers(ids []raftlite.NodeID, self raftlite.NodeID, join bool) (voters, learners []raftlite.NodeID) {
	if !join {
		return ids, nil
	}
	for _, id := range ids {
		if id != self {
			voters = append(voters, id)
		}
	}
	return voters, []raftlite.NodeID{self}
}

// The last committed roster this node learned is kept in a checkpoint
// file, so that after a restart the transport dials every member at once:
// a node added since the cluster's first start is in no one's
// cluster.nodes, and if the restarted nodes needed its vote to elect a
// metadata primary, they could not learn its address from the metadata
// log, which only a metadata primary commits.
//
// Payload (checkpoint kind "RSTR", version 1): the members as
// metadata.Member JSON, by id.
var rosterFileKind = checkpoint.Kind{'R', 'S', 'T', 'R'}

const rosterFile = "roster.checkpoint"

// loadRoster starts the book from the roster file, when there is one.
// REQUIRES: before the transport starts.
func (n *Node) loadRoster() error {
	v, p, err := checkpoint.Read(n.fs, filepath.Join(n.dir, rosterFile), rosterFileKind)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil && v != 1 {
		err = fmt.Errorf("version %d", v)
	}
	var members []*metadata.Member
	if err == nil {
		err = json.Unmarshal(p, &members)
	}
	if err != nil {
		return fmt.Errorf("node: %s: %w", rosterFile, err)
	}
	n.roster.learn(members)
	return nil
}

// learnRoster takes the roster of a newly published View: the book, the
// roster file, the transport's links, and a warning when cluster.nodes
// says otherwise. REQUIRES: on shard metaShard.
func (n *Node) learnRoster(v *View) {
	if !n.roster.learn(v.Roster) {
		return
	}
	if b, err := json.Marshal(v.Roster); err != nil || checkpoint.Write(n.fs, filepath.Join(n.dir, rosterFile), rosterFileKind, 1, b) != nil {
		n.log.Error("roster: writing the roster file failed; after a restart this node dials only cluster.nodes until it replays the metadata", "file", rosterFile)
	}
	nodes := n.roster.nodes()
	var desc []string
	for _, m := range nodes {
		desc = append(desc, fmt.Sprintf("%d:%s", m.ID, n.roster.state(int32(m.ID))))
	}
	n.log.Info("roster", "members", desc)
	if fmt.Sprint(rosterIDs(n.cfg.Roster())) != fmt.Sprint(rosterIDs(nodes)) {
		n.log.Warn("cluster.nodes differs from the committed roster; the committed roster is used",
			"cluster_nodes", rosterIDs(n.cfg.Roster()), "committed", rosterIDs(nodes))
	}
	if n.peers != nil {
		n.peers.setPeers(nodes)
	}
}

// setPeers dials the links of peers new to the roster and drops those of
// peers that left it; a peer whose replication address changed (removed
// and added again between two publishes) is dropped and dialed anew.
// REQUIRES: on shard metaShard (it owns dialed).
func (p *peers) setPeers(nodes []config.RosterNode) {
	want := map[int32]string{}
	for _, m := range nodes {
		if id := int32(m.ID); id != p.d.self {
			want[id] = m.ReplicationAddr
		}
	}
	for id, addr := range p.dialed {
		if want[id] != addr {
			delete(p.dialed, id)
			p.d.log.Info("replication: closing the links of a node gone from the roster", "peer", id, "addr", addr)
			p.dropLinks(id)
		}
	}
	for _, m := range nodes {
		id := int32(m.ID)
		if _, ok := p.dialed[id]; ok || id == p.d.self {
			continue
		}
		p.dialed[id] = m.ReplicationAddr
		p.d.log.Info("replication: dialing a node new to the roster", "peer", id, "addr", m.ReplicationAddr)
		for k := 0; k < p.k; k++ {
			l := &link{key: linkKey{peer: id, k: k}, addr: m.ReplicationAddr, backoff: redialMin}
			ps := p.shards[p.linkShard(k)]
			ps.sh.Post(func() {
				ps.links[l.key] = l
				p.dial(ps, l)
			})
		}
	}
}

// dropLinks closes peer id's outbound links and stops their redials.
// Each runs on its link's shard, posted before any new link of the same
// key (shards run their posts in order), so a re-added peer's new link
// replaces the closed one.
func (p *peers) dropLinks(id int32) {
	for k := 0; k < p.k; k++ {
		key := linkKey{peer: id, k: k}
		ps := p.shards[p.linkShard(k)]
		ps.sh.Post(func() {
			l := ps.links[key]
			if l == nil {
				return
			}
			l.gone = true
			if l.timer != nil {
				ps.sh.Stop(l.timer)
				l.timer = nil
			}
			if l.conn != nil {
				l.conn.Close()
			}
			delete(ps.links, key)
		})
	}
}

// rosterDriver is the controller's state for roster changes; owned by
// shard metaShard.
type rosterDriver struct {
	// seed is cluster.nodes, recorded by the first metadata primary;
	// seeding says its command is in flight.
	seed    []config.RosterNode
	seeding bool
	// busy says a membership step or roster command is in flight.
	busy bool
	// clustered is false on a single node (no replication transport): it
	// cannot grow.
	clustered bool
}

// startRosterDriver starts controller c's roster driver loop.
// REQUIRES: on shard metaShard.
func (n *Node) startRosterDriver(c *controller) {
	c.rd = rosterDriver{seed: n.cfg.Roster(), clustered: n.clustered()}
	var loop func()
	loop = func() {
		if n.stopped.Load() {
			return
		}
		c.driveRoster()
		c.sh.AfterFunc(rosterDriveEvery, loop)
	}
	c.sh.AfterFunc(rosterDriveEvery, loop)
}

// maybeSeedRoster records cluster.nodes when this node leads a metadata
// group that has no roster yet (the cluster's first start, or one that
// ran a version without a committed roster). Two primaries that both try
// are harmless: the second is refused. A node running alone records
// none: it cannot grow, and its own [node] stays its roster, so that a
// node first started on port 0 and later on a fixed port advertises the
// port it has now.
func (c *controller) maybeSeedRoster() {
	if !c.rd.clustered || c.rd.seeding || len(c.rd.seed) == 0 || c.state.Roster() != nil || c.r == nil || !c.r.IsPrimary() || c.d.ready() != nil {
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpRosterSeed}
	for _, m := range c.rd.seed {
		cmd.Members = append(cmd.Members, rosterMember(m))
	}
	c.rd.seeding = true
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		c.rd.seeding = false
		if err != nil && !errors.Is(err, metadata.ErrRosterChangePending) {
			c.d.log.Warn("roster: recording cluster.nodes in the metadata failed; retrying at the next commit", "err", err)
		}
	})
}

// driveRoster takes the next step of the roster change in progress, if
// this node is the metadata primary and no step is in flight. Every step
// is read again from the committed roster and the metadata group's own
// configuration, so a new metadata primary resumes where the last one
// stopped.
func (c *controller) driveRoster() {
	c.maybeSeedRoster()
	if c.rd.busy || c.r == nil || !c.r.IsPrimary() || c.d.ready() != nil {
		return
	}
	m := c.state.RosterChange()
	if m == nil || !c.r.ConfCommitted() {
		return
	}
	conf := c.r.Membership()
	id := raftlite.NodeID(m.ID)
	var step string
	c.rd.busy = true
	confDone := func(res partition.ConfChangeResult) {
		c.rd.busy = false
		if res.Err != nil {
			c.d.log.Info("roster: membership step not taken; retrying", "node", m.ID, "step", step, "err", res.Err)
			return
		}
		c.d.log.Info("roster: metadata group changed", "node", m.ID, "step", step, "conf", fmt.Sprint(res.Conf))
		c.driveRoster()
	}
	propose := func(op metadata.Op) {
		step = string(op)
		c.propose(metadata.Command{Version: metadata.CommandVersion, Op: op, Node: m.ID}, adminTimeoutDefault, func(_ metadata.Result, err error) {
			c.rd.busy = false
			if err != nil {
				c.d.log.Info("roster: command not recorded; retrying", "node", m.ID, "op", op, "err", err)
			}
		})
	}
	switch {
	case m.State == metadata.MemberJoining && conf.Learners.Has(id):
		step = "promote"
		c.r.Promote(id, rosterPromoteWait, confDone)
	case m.State == metadata.MemberJoining && conf.Voters.Has(id):
		propose(metadata.OpNodeActive)
	case m.State == metadata.MemberJoining:
		step = "add_learner"
		c.r.AddLearner(id, confDone)
	case m.State == metadata.MemberLeaving && conf.Members().Has(id):
		step = "remove"
		c.r.RemoveMember(id, confDone)
	case m.State == metadata.MemberLeaving:
		propose(metadata.OpNodeRemove)
	default:
		c.rd.busy = false
	}
}

// changeRoster answers the service's ChangeRoster: add a member
// (joining), start removing one (leaving), or list the roster. A change
// is answered once its command committed; the metadata group's
// membership steps follow in the background (driveRoster). REQUIRES: on
// shard metaShard.
func (c *controller) changeRoster(req *service.RosterRequest, done func(service.RosterResult, error)) {
	list := func() service.RosterResult {
		var res service.RosterResult
		for _, m := range c.state.Roster() {
			res.Members = append(res.Members, svcMember(*m))
		}
		if res.Members == nil { // not seeded yet: cluster.nodes
			for _, m := range c.rd.seed {
				sm := svcMember(rosterMember(m))
				sm.State = string(metadata.MemberActive)
				res.Members = append(res.Members, sm)
			}
		}
		return res
	}
	if req.Action == service.RosterList {
		done(list(), nil)
		return
	}
	if err := c.requireMetaPrimary(); err != nil {
		done(service.RosterResult{}, err)
		return
	}
	if !c.rd.clustered {
		done(service.RosterResult{}, service.Errorf(service.ErrInvalidRequest,
			"this node runs alone (cluster.nodes lists at most itself), so it has no replication transport to reach a new node; restart it with cluster.nodes and cluster.secret to grow it"))
		return
	}
	var cmd metadata.Command
	var err error
	switch req.Action {
	case service.RosterAdd:
		r := req.Member
		cmd, err = c.state.PlanAddNode(metadata.Member{ID: r.ID, ClientAddr: r.ClientAddr, ReplicationAddr: r.ReplicationAddr,
			HTTPAddr: r.HTTPAddr, KafkaAddr: r.KafkaAddr, Rack: r.Rack})
	case service.RosterRemove:
		cmd, err = c.state.PlanRemoveNode(req.Member.ID, c.d.alive)
	default:
		err = service.Errorf(service.ErrInvalidRequest, "roster action %d is not add, remove or list", req.Action)
	}
	if err != nil {
		done(service.RosterResult{}, metaKindErr(err))
		return
	}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		if err != nil {
			done(service.RosterResult{}, metaKindErr(err))
			return
		}
		c.driveRoster()
		done(list(), nil)
	})
}

func svcMember(m metadata.Member) service.RosterMember {
	return service.RosterMember{ID: m.ID, ClientAddr: m.ClientAddr, ReplicationAddr: m.ReplicationAddr, HTTPAddr: m.HTTPAddr,
		KafkaAddr: m.KafkaAddr, Rack: m.Rack, State: string(m.State)}
}
