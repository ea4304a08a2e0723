package rafttest

import (
	"container/heap"

	"github.com/corestream/corestream/raftlite"
)

// simMsg is a message in flight in the simulated network: a raftlite
// message, or a node-level liveness ping (what the node layer's coalesced
// per-peer heartbeat is in a real node).
type simMsg struct {
	at   int64  // delivery step
	seq  uint64 // tie-break: send order
	ping bool
	from raftlite.NodeID
	to   raftlite.NodeID
	m    raftlite.Message
}

// msgHeap orders messages by delivery step, then send order.
type msgHeap []simMsg

// Len, Less, Swap, Push and Pop implement container/heap.Interface.
func (h msgHeap) Len() int { return len(h) }
func (h msgHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h msgHeap) Swap(i, j int)       { h[i], h[j] = h[j], h[i] }
func (h *msgHeap) Push(x interface{}) { *h = append(*h, x.(simMsg)) }
func (h *msgHeap) Pop() interface{} {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// network is the seeded network: drops, duplicates, random delays (hence
// reordering) and cut links.
type network struct {
	q   msgHeap
	seq uint64
	// cut[from][to] blocks the link from -> to (index id-1).
	cut [][]bool
	// Per-message odds in per mille, and the delay range in steps.
	dropPermille int
	dupPermille  int
	delayMin     int
	delayMax     int
}

func newNetwork(n int) *network {
	nw := &network{cut: make([][]bool, n)}
	for i := range nw.cut {
		nw.cut[i] = make([]bool, n)
	}
	return nw
}

// send queues m (or a ping) for delivery, subject to drops and duplicates.
func (nw *network) send(s *sim, m simMsg) {
	if s.rng.IntN(1000) < nw.dropPermille {
		return
	}
	copies := 1
	if s.rng.IntN(1000) < nw.dupPermille {
		copies = 2
	}
	for i := 0; i < copies; i++ {
		nw.seq++
		m.seq = nw.seq
		m.at = s.now + int64(nw.delayMin+s.rng.IntN(nw.delayMax-nw.delayMin+1))
		heap.Push(&nw.q, m)
	}
}

// due pops the next message due at or before now (ok false when none).
// Messages on a link that is cut at delivery time are lost.
func (nw *network) due(now int64) (simMsg, bool) {
	for len(nw.q) > 0 && nw.q[0].at <= now {
		m := heap.Pop(&nw.q).(simMsg)
		if nw.cut[m.from-1][m.to-1] {
			continue
		}
		return m, true
	}
	return simMsg{}, false
}

// heal restores every link.
func (nw *network) heal() {
	for i := range nw.cut {
		for j := range nw.cut[i] {
			nw.cut[i][j] = false
		}
	}
}

// partitioned reports whether any link is cut.
func (nw *network) partitioned() bool {
	for i := range nw.cut {
		for j := range nw.cut[i] {
			if nw.cut[i][j] {
				return true
			}
		}
	}
	return false
}
