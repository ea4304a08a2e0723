package clienttest

import (
	"fmt"

	"github.com/corestream/corestream/netio/wire"
)

// Faults of whole nodes that keep their sockets open: a hung process
// (SIGSTOP) and a node cut off from its peers (a network partition between
// nodes that clients can still cross). Neither closes a connection, so a
// client learns of them only from deadlines and from what the nodes say.

// cutView is what a node cut off from its peers still believes: the
// partition routes as they were when it was cut off.
type cutView struct {
	// routes maps each partition to its primary and generation at the cut.
	routes map[partKey]frozenRoute
}

type frozenRoute struct {
	primary, gen int32
}

// up reports whether n's peers hear from it: it runs, is not hung and is
// not cut off. Other nodes report it not alive in metadata.
// REQUIRES: c.mu held.
func (n *node) up() bool { return n.alive && n.hung == nil && n.cut == nil }

// Hang makes node id stop answering, as a stopped process (SIGSTOP) would:
// its sockets stay open and accept requests and new connections, but
// nothing is handled or answered until Resume, which handles the backlog in
// order. Other nodes report it not alive. Partitions it leads keep it as
// primary until the test moves them (MovePrimary), as before an election.
func (c *Cluster) Hang(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(id)
	if n.hung == nil {
		n.hung = make(chan struct{})
	}
}

// Resume lets a hung node run again (SIGCONT).
func (c *Cluster) Resume(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resumeLocked(c.node(id))
}

func (c *Cluster) resumeLocked(n *node) {
	if n.hung != nil {
		close(n.hung)
		n.hung = nil
	}
}

// awaitRunning blocks while n is hung. It reports false when the node was
// stopped or the cluster closed meanwhile: the request must be dropped.
func (c *Cluster) awaitRunning(n *node) bool {
	c.mu.Lock()
	hung := n.hung
	c.mu.Unlock()
	if hung == nil {
		return true
	}
	<-hung // closed by Resume, StopNode and Close
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.alive && !c.closed
}

// CutOff isolates node id from its peers while clients can still reach
// it, as a network partition between nodes would. The node keeps the
// routes it knew: it answers Metadata with only itself alive, no metadata
// primary, and every partition it does not lead without a primary
// (NOT_ENOUGH_REPLICAS, or PRIMARY_NOT_AVAILABLE at replication factor 1);
// it refuses writes to the partitions it leads with NOT_ENOUGH_REPLICAS and
// other data requests with NOT_PRIMARY without a hint. Other nodes report
// it not alive. Heal ends it.
func (c *Cluster) CutOff(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(id)
	if n.cut != nil {
		return
	}
	v := &cutView{routes: map[partKey]frozenRoute{}}
	for name, t := range c.topics {
		for _, p := range t.parts {
			v.routes[partKey{name, p.index}] = frozenRoute{primary: p.primary, gen: p.gen}
		}
	}
	n.cut = v
}

// Heal reconnects a node cut off from its peers.
func (c *Cluster) Heal(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.node(id).cut = nil
}

// cutOffRoute answers a data request for ref received by node n, which is
// cut off. REQUIRES: c.mu held; n.cut != nil.
func (c *Cluster) cutOffRoute(n *node, ref *wire.PartitionRef) error {
	fr, ok := n.cut.routes[partKey{ref.Topic, ref.Partition}]
	if ok && fr.primary == n.id && ref.Generation <= fr.gen {
		return wire.Errorf(wire.ErrNotEnoughReplicas, "node %d leads %s/%d but reaches no quorum of its replicas", n.id, ref.Topic, ref.Partition)
	}
	return wire.Errorf(wire.ErrNotPrimary, "node %d is not the primary of %s/%d and cannot reach the other nodes", n.id, ref.Topic, ref.Partition)
}

// cutOffMetadata is the partial metadata a node cut off from its peers
// answers: the topics and partitions it knew at the cut. REQUIRES: c.mu held; n.cut != nil.
func (c *Cluster) cutOffMetadata(n *node, r *wire.MetadataRequest) *wire.MetadataResponse {
	resp := &wire.MetadataResponse{MetadataPrimaryID: wire.NodeNone, MetadataGeneration: c.metadataGen}
	for _, m := range c.nodes {
		resp.Nodes = append(resp.Nodes, wire.Node{ID: m.id, ClientAddr: m.addr, Alive: m == n})
	}
	names := r.Topics
	if len(names) == 0 {
		names = c.topicNames()
	}
	for _, name := range names {
		t := c.topics[name]
		if _, known := n.cut.routes[partKey{name, 0}]; t == nil || !known {
			// Created after the cut: the node never heard of it.
			if len(r.Topics) > 0 {
				resp.Topics = append(resp.Topics, wire.TopicMetadata{ErrorCode: wire.ErrUnknownTopicOrPartition.Code, Name: name})
			}
			continue
		}
		tm := wire.TopicMetadata{Name: t.name, ID: t.id, ReplicationFactor: t.rf}
		for _, p := range t.parts {
			fr, ok := n.cut.routes[partKey{name, p.index}]
			if !ok { // added after the cut
				break
			}
			pr := wire.PartitionRoute{Partition: p.index, PrimaryID: wire.NodeNone, Generation: -1,
				PreferredPrimaryID: p.replicas[0], Replicas: append([]int32(nil), p.replicas...), InSync: []int32{}, Offline: []int32{}}
			for _, id := range p.replicas {
				if id != n.id {
					pr.Offline = append(pr.Offline, id)
				}
			}
			switch {
			case fr.primary == n.id:
				pr.PrimaryID, pr.Generation, pr.InSync = n.id, fr.gen, []int32{n.id}
			case len(p.replicas) > 1:
				pr.ErrorCode = wire.ErrNotEnoughReplicas.Code
			default:
				pr.ErrorCode = wire.ErrPrimaryNotAvailable.Code
			}
			tm.Partitions = append(tm.Partitions, pr)
		}
		resp.Topics = append(resp.Topics, tm)
	}
	return resp
}

// cutOffAdmin answers an admin request other than a read received by a
// node cut off from its peers, or nil. REQUIRES: c.mu held.
func (c *Cluster) cutOffAdmin(node int32, req wire.Request) error {
	n := c.node(node)
	if n.cut == nil {
		return nil
	}
	switch req.(type) {
	case *wire.MetadataRequest, *wire.ListTopicsRequest, *wire.DescribeTopicRequest, *wire.ClusterStatusRequest,
		*wire.ProduceRequest, *wire.FetchRequest, *wire.ListOffsetsRequest, *wire.DescribePartitionRequest,
		*wire.HandshakeRequest:
		return nil
	}
	return wire.Errorf(wire.ErrNotEnoughReplicas, "node %d cannot reach a quorum of the metadata group for %s", node, fmt.Sprint(req.APIKey()))
}
