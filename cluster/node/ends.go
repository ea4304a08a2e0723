package node

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/groupshost"
	"github.com/corestream/corestream/cluster/peerwire"
)

// Partition ends read from their primaries: a consumer group's lag on
// /metrics and in the console's history is its committed offsets
// against each partition's high watermark as the partition's primary
// has it, the end GET /v1/groups and `group describe` read, whether or
// not the coordinator's node holds a replica of the partition. A
// partition this node leads is read on its shard; the others are asked
// of their primaries over the peer links (peerwire.Ends), answered by
// the primary from its shards without blocking any. A question not
// answered within the caller's deadline leaves its partitions out.

// endsWaits pairs this node's questions with their answers.
//
// mu guards next and waiting.
type endsWaits struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]endsWait
}

// endsWait is a question in flight: the node asked, how many
// partitions, and where its answer goes (deliver never blocks).
type endsWait struct {
	to      int32
	asked   int
	deliver func(hw []int64)
}

// endsPort is the node's transport.Ends.
type endsPort struct{ n *Node }

// Asked implements transport.Ends: read the ends on this node's shards
// and answer over the metadata shard, which owns the links' control
// frames.
func (e endsPort) Asked(from int32, q peerwire.Ends) {
	n := e.n
	n.localEnds(q.Parts, func(hw []int64) {
		_ = n.group.Shard(metaShard).Post(func() {
			if n.peers != nil {
				n.peers.AnswerEnds(from, peerwire.EndsAnswer{ID: q.ID, HW: hw})
			}
		}) // refused: the node is stopping, and the asker's deadline passes
	})
}

// Answered implements transport.Ends: the answer goes to its question
// if it is still waiting, was asked of from, and answers every
// partition asked.
func (e endsPort) Answered(from int32, a peerwire.EndsAnswer) {
	w := &e.n.ends
	w.mu.Lock()
	q, ok := w.waiting[a.ID]
	if ok && q.to == from && q.asked == len(a.HW) {
		delete(w.waiting, a.ID)
	} else {
		ok = false
	}
	w.mu.Unlock()
	if ok {
		q.deliver(a.HW)
	}
}

// localEnds reads the high watermark of every partition among keys that
// this node leads (-1 for the others), each on its shard, and calls done
// once with them all, on the shard that read the last (or here when
// there is none to read). It never blocks a shard.
func (n *Node) localEnds(keys []peerwire.EndKey, done func(hw []int64)) {
	hw := make([]int64, len(keys))
	byShard := map[int][]int{}
	for i, k := range keys {
		hw[i] = -1
		if len(n.hosts) > 0 {
			s := n.shardOf(k.TopicID, k.Partition)
			byShard[s] = append(byShard[s], i)
		}
	}
	if len(byShard) == 0 {
		done(hw)
		return
	}
	var left atomic.Int32
	left.Store(int32(len(byShard)))
	finish := func() {
		if left.Add(-1) == 0 {
			done(hw)
		}
	}
	for s, idx := range byShard {
		h := n.hosts[s]
		if h == nil || n.group.Shard(s).Post(func() {
			for _, i := range idx { // each shard writes its own indexes of hw
				if r := h.Get(shardKey(keys[i].TopicID, keys[i].Partition)); r != nil && r.IsPrimary() {
					hw[i] = r.HighWatermark()
				}
			}
			finish()
		}) != nil {
			finish()
		}
	}
}

// primaryEnds are the high watermarks of the partitions among keys as
// their primaries have them (groupshost.Deps.Ends): this node's own read
// on their shards, the others asked of their primaries, at most
// peerwire.EndsPerFrameMax a question, all at once. A partition whose
// primary is unknown, did not answer within ctx, or no longer leads it
// is left out.
func (n *Node) primaryEnds(ctx context.Context, keys []metadata.OffsetKey) map[metadata.OffsetKey]groupshost.End {
	view := n.view.Load()
	out := map[metadata.OffsetKey]groupshost.End{}
	if view == nil {
		return out
	}
	type asked struct {
		keys []metadata.OffsetKey
		ids  []metadata.TopicID
	}
	byNode := map[int32]*asked{}
	for _, k := range keys {
		t := view.Topics[k.Topic]
		if t == nil || k.Partition < 0 || int(k.Partition) >= t.Partitions() {
			continue
		}
		rt, ok := n.routes.Get(shardKey(t.ID, k.Partition))
		if !ok || rt.Leader < 0 {
			continue
		}
		a := byNode[rt.Leader]
		if a == nil {
			a = &asked{}
			byNode[rt.Leader] = a
		}
		a.keys = append(a.keys, k)
		a.ids = append(a.ids, t.ID)
	}
	type answer struct {
		keys []metadata.OffsetKey
		ids  []metadata.TopicID
		hw   []int64
	}
	ch := make(chan answer, len(keys)+1) // buffered for every question (at most one a key): an answer blocks no one
	waits := 0
	var ids []uint64 // this call's questions, forgotten when it returns
	defer func() {
		n.ends.mu.Lock()
		for _, id := range ids {
			delete(n.ends.waiting, id)
		}
		n.ends.mu.Unlock()
	}()
	for node, a := range byNode {
		for from := 0; from < len(a.keys); from += peerwire.EndsPerFrameMax {
			to := min(from+peerwire.EndsPerFrameMax, len(a.keys))
			ks, tids := a.keys[from:to], a.ids[from:to]
			parts := make([]peerwire.EndKey, len(ks))
			for i := range ks {
				parts[i] = peerwire.EndKey{TopicID: tids[i], Partition: ks[i].Partition}
			}
			if node == int32(n.self) {
				n.localEnds(parts, func(hw []int64) { ch <- answer{ks, tids, hw} })
				waits++
				continue
			}
			if n.peers == nil {
				continue
			}
			w := endsWait{to: node, asked: len(parts), deliver: func(hw []int64) { ch <- answer{ks, tids, hw} }}
			n.ends.mu.Lock()
			if n.ends.waiting == nil {
				n.ends.waiting = map[uint64]endsWait{}
			}
			n.ends.next++
			id := n.ends.next
			n.ends.waiting[id] = w
			n.ends.mu.Unlock()
			ids = append(ids, id)
			if n.group.Shard(metaShard).Post(func() { n.peers.AskEnds(node, peerwire.Ends{ID: id, Parts: parts}) }) != nil {
				continue
			}
			waits++
		}
	}
	for range waits {
		select {
		case a := <-ch:
			for i, hw := range a.hw {
				if hw >= 0 {
					out[a.keys[i]] = groupshost.End{TopicID: a.ids[i], HW: hw}
				}
			}
		case <-ctx.Done():
			return out
		}
	}
	return out
}
