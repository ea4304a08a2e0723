package client

import "github.com/corestream/corestream/netio/wire"

// metaQuality says how far a metadata answer can be trusted, from what the
// answer itself carries. The protocol has no explicit "this node has
// replayed the committed metadata and sees a quorum" flag; the best proxy
// it carries is the answering node's own view of the cluster: which node
// leads the metadata group (-1 when there is no quorum) and which nodes it
// hears from (Node.Alive is the answering node's failure detector). A node
// cut off from its peers hears from none of them and knows no metadata
// primary, so every partition it cannot reach looks unavailable in its
// answer; a node that does see a majority of the roster, including the
// metadata primary, answers from the metadata group's committed state.
type metaQuality struct {
	// trusted: the metadata primary is known and alive, and the node hears
	// from a majority of the roster.
	trusted bool
	// primaryKnown: the answer names a metadata primary.
	primaryKnown bool
	// alive is how many nodes the answering node hears from (itself
	// included), of nodes.
	alive, nodes int
	// generation is the metadata group's term in the answer.
	generation int32
}

// assessMetadata ranks r.
func assessMetadata(r *wire.MetadataResponse) metaQuality {
	q := metaQuality{primaryKnown: r.MetadataPrimaryID != wire.NodeNone, nodes: len(r.Nodes), generation: r.MetadataGeneration}
	primaryAlive := false
	for _, n := range r.Nodes {
		if n.Alive {
			q.alive++
			primaryAlive = primaryAlive || n.ID == r.MetadataPrimaryID
		}
	}
	q.trusted = q.primaryKnown && primaryAlive && 2*q.alive > q.nodes
	return q
}

// betterThan orders answers: trusted first, then those that know a
// metadata primary, then the newer metadata generation, then the node
// that hears from more nodes.
func (q metaQuality) betterThan(o metaQuality) bool {
	switch {
	case q.trusted != o.trusted:
		return q.trusted
	case q.primaryKnown != o.primaryKnown:
		return q.primaryKnown
	case q.generation != o.generation:
		return q.generation > o.generation
	}
	return q.alive > o.alive
}
