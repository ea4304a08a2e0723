package node

import (
	"fmt"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard/partition"
)

// A node answers metadata reads (Metadata, ListTopics, DescribeTopic,
// ClusterStatus, DescribePartition, FetchOffsets, and a data request for a
// topic it does not know) only once its View holds everything committed
// that it could know of. Before that it answers METADATA_NOT_READY, which
// clients retry, often at another node, never an answer that leaves
// topics out. (After a whole-cluster restart nodes used to answer from
// their snapshot alone until the metadata group had a quorum, and clients
// were told that topics they had just used did not exist.)
//
// Raft keeps the commit index in memory only, so a restarted node cannot
// tell which entries of its log were committed: the metadata primary
// teaches it. A node is loaded once it has applied an entry of the
// current term: a committed entry of term T lies after the no-op entry
// that T's primary appended at its election, and every entry committed
// before T (every command this node could have seen answered) lies before
// that no-op, so it is applied too. That covers the primary (its own
// no-op) and the followers (the primary's no-op, or any later entry).
// The commit index a primary sends is no substitute: right after its
// election it is whatever that node held before, -1 after a restart.
//
// A follower so far behind that the primary sends a snapshot (MsgReset)
// learns the term of the entry the snapshot ends at; when that is the
// current term, installing the snapshot loads it.
//
// A node that restarts from its own snapshot counts the entry the
// snapshot ends at as applied, with the term its log records for that
// offset: when it is the current term, the no-op lies at or below it.
// Before, the restarted node waited for an entry of the current term to
// apply, and when its snapshot covered everything committed it answered
// METADATA_NOT_READY until the next metadata write, in a quiet cluster
// for ever (control-plane simulator, seed 146). Every rule also needs the
// node to follow a primary in that term, so a node that restarts in a
// term it knows from disk waits to hear from that term's primary.
//
// Loaded is a latch: a node that loses the metadata quorum later keeps
// serving the metadata it has, as a Kafka broker does, and the View only
// ever grows from a state that held everything committed once.

// observe notes, from a MsgReset of the current primary, the snapshot
// point and its term. Runs on shard metaShard.
func (c *controller) observe(r *partition.Replica, m *raftlite.Message) {
	if c.d.loaded.Load() || r != c.r || m.Type != raftlite.MsgReset {
		return
	}
	rf := r.Raft()
	c.ObserveReset(m, rf.Leader(), rf.Term())
	c.checkLoaded()
}

// checkLoaded sets the latch once an entry of the current term is
// applied. Runs on shard metaShard.
func (c *controller) checkLoaded() {
	if c.d.loaded.Load() || c.r == nil {
		return
	}
	rf := c.r.Raft()
	term := rf.Term()
	if !c.LoadedIn(term, rf.Leader() != raftlite.None) {
		return
	}
	c.d.loaded.Store(true)
	c.d.log.Info("cluster metadata loaded", "applied", c.Applied(), "term", term, "topics", len(c.State().Topics()))
}

// metadataReady returns nil once this node's metadata is loaded, else
// METADATA_NOT_READY saying what it waits for. Safe on any goroutine.
func (n *Node) metadataReady() error {
	if n.metaLoaded.Load() {
		return nil
	}
	lead, gen := n.metaRoute()
	live := 0
	roster := n.roster.nodes()
	for _, m := range roster {
		if n.alive(int32(m.ID)) {
			live++
		}
	}
	quorum := len(roster)/2 + 1
	var why string
	switch {
	case lead > 0 && lead != int32(n.self):
		why = fmt.Sprintf("it is catching up with the metadata primary, node %d", lead)
	case lead == int32(n.self):
		why = "it was just elected metadata primary and is committing its term"
	case live < quorum:
		why = fmt.Sprintf("no metadata primary: it reaches %d of %d nodes and a quorum needs %d", live, len(roster), quorum)
	default:
		why = "the metadata group is electing a primary"
	}
	e := service.Errorf(service.ErrMetadataNotReady, "node %d has not loaded the committed cluster metadata yet (%s); retry shortly or ask another node", n.self, why)
	if lead > 0 && lead != int32(n.self) {
		e.Hint = &service.Hint{NodeID: lead, ClientAddr: n.addrOf(lead), Generation: gen}
	}
	return e
}
