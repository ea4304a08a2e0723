package clienttest

import (
	"slices"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// Request describes an incoming request to fault matchers.
type Request struct {
	// Node is the node that received it.
	Node int32
	// API is its API key.
	API wire.APIKey
	// Topic and Partition address a data request (Produce, Fetch,
	// ListOffsets, DescribePartition); Topic is "" and Partition -1 for
	// other APIs.
	Topic     string
	Partition int32
}

// Fault makes matching requests misbehave. A request matches when every
// set condition holds; the first matching fault that still has uses acts.
// Exactly one action should be set.
type Fault struct {
	// Node restricts the fault to one node; 0 matches every node.
	Node int32
	// APIs restricts it to these APIs; empty matches every API. Handshakes
	// never match.
	APIs []wire.APIKey
	// Topic restricts it to one topic's data requests; "" matches any.
	Topic string
	// Partitions restricts it to these partitions; empty matches any.
	Partitions []int32
	// Match, when set, must also return true. It runs under the cluster's
	// lock: it must not call the Cluster's methods (use Then).
	Match func(Request) bool
	// Times is how many requests the fault acts on; 0 means until removed.
	Times int

	// Err answers the request with this error instead of handling it.
	Err *wire.ErrorResponse
	// Close closes the connection instead of handling the request (the
	// request is lost; nothing was applied).
	Close bool
	// CloseAfter handles the request, then closes the connection without
	// sending the response (it was applied; the client cannot know).
	CloseAfter bool
	// Delay handles the request now and sends its response after Delay.
	Delay time.Duration
	// Hold handles the request now and sends its response once Hold is
	// closed (unless the connection ends first).
	Hold <-chan struct{}
	// Then, when set, runs for each request the fault acts on, before the
	// action and outside the cluster's lock, so it may change the cluster
	// (move a primary, stop a node). A fault with only Then set handles the
	// request normally after it.
	Then func(Request)
}

// FaultHandle is an installed fault.
type FaultHandle struct {
	c     *Cluster
	f     Fault
	hits  int // guarded by c.mu
	uses  int // remaining uses when f.Times > 0; guarded by c.mu
	alive bool
}

// AddFault installs f and returns its handle. Faults are consulted in the
// order they were added.
func (c *Cluster) AddFault(f Fault) *FaultHandle {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &FaultHandle{c: c, f: f, uses: f.Times, alive: true}
	c.faults = append(c.faults, h)
	return h
}

// Hits returns how many requests the fault has acted on.
func (h *FaultHandle) Hits() int {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.hits
}

// Remove uninstalls the fault.
func (h *FaultHandle) Remove() {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	h.alive = false
	h.c.faults = slices.DeleteFunc(h.c.faults, func(x *FaultHandle) bool { return x == h })
}

// ClearFaults removes every fault.
func (c *Cluster) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.faults {
		h.alive = false
	}
	c.faults = nil
}

// matchFault returns the fault acting on r, consuming one use, or nil.
// REQUIRES: c.mu held.
func (c *Cluster) matchFault(r Request) *Fault {
	if r.API == wire.APIHandshake {
		return nil
	}
	for _, h := range c.faults {
		f := &h.f
		switch {
		case f.Node != 0 && f.Node != r.Node,
			len(f.APIs) > 0 && !slices.Contains(f.APIs, r.API),
			f.Topic != "" && f.Topic != r.Topic,
			len(f.Partitions) > 0 && (r.Partition < 0 || !slices.Contains(f.Partitions, r.Partition)),
			f.Match != nil && !f.Match(r):
			continue
		}
		h.hits++
		if f.Times > 0 {
			if h.uses--; h.uses == 0 {
				h.alive = false
				c.faults = slices.DeleteFunc(c.faults, func(x *FaultHandle) bool { return x == h })
			}
		}
		return f
	}
	return nil
}

// describe extracts the topic and partition of a data request body.
func describe(node int32, h wire.RequestHeader, body []byte) Request {
	r := Request{Node: node, API: h.APIKey, Partition: -1}
	key := h.APIKey
	if key == wire.APIDescribePartition {
		key = wire.APIFetch // same leading PartitionRef
	}
	if t, p, ok := wire.PeekPartition(key, body); ok {
		r.Topic, r.Partition = string(t), p
	}
	return r
}

// NotPrimary returns the error a node gives for a partition it does not
// lead, hinting at node hint with generation gen and address addr.
func NotPrimary(hint int32, addr string, gen int32) *wire.ErrorResponse {
	return &wire.ErrorResponse{Err: wire.ErrNotPrimary, Message: "fault: not the primary",
		Hint: &wire.Hint{NodeID: hint, Address: addr, Generation: gen}}
}

// Busy returns a BUSY error advising a retry after retryAfterMs.
func Busy(retryAfterMs uint32) *wire.ErrorResponse {
	return &wire.ErrorResponse{Err: wire.ErrBusy, Message: "fault: busy", RetryAfterMs: retryAfterMs}
}
