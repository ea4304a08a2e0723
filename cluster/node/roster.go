package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"sync/atomic"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/checkpoint"
)

// Growing and shrinking the roster (docs/design/membership.md). The
// roster lives in the committed metadata; this file keeps the node's copy
// of it (rosterBook) and its file, and tells the transport of peers that
// came or went. Seeding the metadata with cluster.nodes at a cluster's
// first start, and the metadata group's membership change that follows
// each roster command, are the roster driver's (cluster/controller).

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
		n.peers.SetPeers(nodes)
	}
}
