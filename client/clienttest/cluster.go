// Package clienttest is an in-memory corestream cluster that speaks the
// real client protocol (package netio/wire) over real loopback TCP, for
// testing clients — the Go SDK, the CLI, and anything else that talks to a
// broker — without a broker. It is to corestream what kfake is to Kafka.
//
// A Cluster runs one listener per simulated node; all nodes share one state
// (topics, partition logs, committed offsets, producer ids) under one
// mutex. Each partition has a primary node and a generation: a data
// request sent to another node is answered NOT_PRIMARY with a hint, an old
// generation STALE_GENERATION, exactly as docs/protocol.md says a broker
// answers. Produce validates batches, stamps base offsets and deduplicates
// idempotent producers with the broker's rules; Fetch long-polls and cuts
// the last batch at max_bytes like a broker reading a segment. Every
// acknowledged batch is committed at once (the high watermark is the log
// end).
//
// Faults are injected per request (AddFault): answer an error with a hint
// and retry advice, close the connection before or after handling (the
// second loses the response of a request that was applied), delay a
// response or hold it until the test releases it. Tests can also move
// primaries (MovePrimary), stop and restart nodes, drop connections, hang
// a node (Hang/Resume: sockets open, nothing answered, as under SIGSTOP)
// and cut a node off from its peers (CutOff/Heal: clients still reach it,
// and it answers from the partial view it is left with).
//
// Everything is deterministic given the order of requests: there are no
// timers except the long-poll and Delay deadlines a request asks for.
package clienttest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// Options configure a Cluster. Zero values mean the defaults.
type Options struct {
	// Nodes is the number of simulated nodes, with ids 1..Nodes. Default 1.
	Nodes int
	// ClusterID is sent in handshakes. Default "clienttest".
	ClusterID string
	// BatchBytesMax is the largest batch Produce accepts (the broker's
	// storage.max_batch_bytes); larger ones get MESSAGE_TOO_LARGE.
	// Default 4 MiB.
	BatchBytesMax int
	// RetainBytesMax bounds each partition's stored log: past it the oldest
	// batches are dropped and the log start offset advances, as retention
	// would. Default 256 MiB.
	RetainBytesMax int64
	// HeaderChecksOnly makes Produce check only the batch header and CRC,
	// not walk every record (batch.Validate instead of ValidateRecords), to
	// keep a throughput benchmark's broker side cheap.
	HeaderChecksOnly bool
	// NoOpBatches makes every partition start each generation (at
	// creation, and whenever its primary moves or its generation changes)
	// with a one-record control batch, as a real primary appends a
	// consensus no-op when it takes over. Consumers must skip it.
	NoOpBatches bool
	// DiscardRecords makes Produce keep only each batch's offsets, not its
	// bytes (fetches then return no records): a throughput benchmark's
	// broker side does no copying.
	DiscardRecords bool
	// Addr is the listen address of every node. Default "127.0.0.1:0"
	// (a free port each).
	Addr string
}

const (
	defaultBatchBytesMax  = 4 << 20
	defaultRetainBytesMax = 256 << 20
	// readBufferBytes is each server connection's read buffer.
	readBufferBytes = 256 << 10
	// writeBufferBytes is each server connection's write buffer.
	writeBufferBytes = 256 << 10
)

// Cluster is a running fake cluster. Its methods are safe for concurrent use.
type Cluster struct {
	opts Options
	wg   sync.WaitGroup

	// mu guards every field below and all topic, partition and node state.
	mu              sync.Mutex
	closed          bool
	nodes           []*node // nodes[i].id == i+1
	topics          map[string]*topic
	metadataPrimary int32
	metadataGen     int32
	// offsets are committed offsets by consumer name.
	offsets    map[string]map[partKey]wire.CommittedOffset
	nextPID    int64
	faults     []*FaultHandle
	requests   map[reqKey]int
	rebalances int
}

type partKey struct {
	topic     string
	partition int32
}

type reqKey struct {
	node int32
	api  wire.APIKey
}

// node is one simulated broker.
type node struct {
	id    int32
	addr  string
	ln    net.Listener
	alive bool
	conns map[*serverConn]struct{}
	// hung is non-nil while the node is hung (Hang); Resume closes it.
	hung chan struct{}
	// cut is non-nil while the node is cut off from its peers (CutOff).
	cut *cutView
}

// NewCluster starts a cluster; Close stops it.
func NewCluster(opts Options) (*Cluster, error) {
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.Nodes > wire.NodesMax {
		return nil, fmt.Errorf("clienttest: %d nodes, at most %d", opts.Nodes, wire.NodesMax)
	}
	if opts.ClusterID == "" {
		opts.ClusterID = "clienttest"
	}
	if opts.BatchBytesMax <= 0 {
		opts.BatchBytesMax = defaultBatchBytesMax
	}
	if opts.RetainBytesMax <= 0 {
		opts.RetainBytesMax = defaultRetainBytesMax
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	c := &Cluster{opts: opts, topics: map[string]*topic{}, metadataPrimary: 1, metadataGen: 1,
		offsets: map[string]map[partKey]wire.CommittedOffset{}, nextPID: 1000,
		requests: map[reqKey]int{}}
	for i := 0; i < opts.Nodes; i++ {
		n := &node{id: int32(i + 1), conns: map[*serverConn]struct{}{}}
		c.nodes = append(c.nodes, n)
		if err := c.listen(n, opts.Addr); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// listen starts n's listener on addr. REQUIRES: c.mu is not held by a
// caller that expects accepts to proceed (listen itself takes no lock).
func (c *Cluster) listen(n *node, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("clienttest: node %d: %w", n.id, err)
	}
	n.ln, n.addr, n.alive = ln, ln.Addr().String(), true
	c.wg.Add(1)
	go c.accept(n, ln)
	return nil
}

// Close stops every node and waits for every goroutine of the cluster.
func (c *Cluster) Close() {
	c.mu.Lock()
	c.closed = true
	for _, n := range c.nodes {
		c.stopNodeLocked(n)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Addrs returns the client address of every node, in id order.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

// Addr returns node id's client address.
func (c *Cluster) Addr(id int32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node(id).addr
}

// node returns node id. REQUIRES: c.mu held; 1 <= id <= len(c.nodes).
func (c *Cluster) node(id int32) *node {
	if id < 1 || int(id) > len(c.nodes) {
		panic(fmt.Sprintf("clienttest: no node %d", id))
	}
	return c.nodes[id-1]
}

// StopNode closes node id's listener and connections and marks it not
// alive in metadata. Partitions it leads keep it as primary until the test
// moves them (MovePrimary), as when a broker dies before an election.
func (c *Cluster) StopNode(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopNodeLocked(c.node(id))
}

func (c *Cluster) stopNodeLocked(n *node) {
	n.alive = false
	c.resumeLocked(n) // a killed process answers nothing more
	if n.ln != nil {
		n.ln.Close()
		n.ln = nil
	}
	for sc := range n.conns {
		sc.nc.Close()
	}
}

// StartNode restarts a stopped node on its previous address.
func (c *Cluster) StartNode(id int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(id)
	if n.alive || c.closed {
		return nil
	}
	return c.listen(n, n.addr)
}

// DropConnections closes every client connection of node id (0: of every
// node); the node keeps listening.
func (c *Cluster) DropConnections(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if id == 0 || n.id == id {
			for sc := range n.conns {
				sc.nc.Close()
			}
		}
	}
}

// Connections returns how many client connections node id has open.
func (c *Cluster) Connections(id int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.node(id).conns)
}

// Requests returns how many requests of api node id has received (0: all
// nodes), counting those answered by a fault.
func (c *Cluster) Requests(id int32, api wire.APIKey) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for k, v := range c.requests {
		if k.api == api && (id == 0 || k.node == id) {
			total += v
		}
	}
	return total
}

// SetMetadataPrimary makes node id the metadata primary (and bumps the
// metadata generation); other nodes answer metadata-changing requests with
// NOT_METADATA_PRIMARY.
func (c *Cluster) SetMetadataPrimary(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.node(id)
	c.metadataPrimary = id
	c.metadataGen++
}

func (c *Cluster) accept(n *node, ln net.Listener) {
	defer c.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		if !n.alive || n.ln != ln {
			c.mu.Unlock()
			nc.Close()
			continue
		}
		sc := &serverConn{c: c, node: n.id, nc: nc, bw: bufio.NewWriterSize(nc, writeBufferBytes), done: make(chan struct{})}
		n.conns[sc] = struct{}{}
		c.wg.Add(1)
		c.mu.Unlock()
		go sc.serve(n)
	}
}

// serverConn is one client connection to one node.
type serverConn struct {
	c    *Cluster
	node int32
	nc   net.Conn
	done chan struct{} // closed when serve returns

	wmu sync.Mutex // guards bw and out
	bw  *bufio.Writer
	out []byte
}

func (sc *serverConn) serve(n *node) {
	defer sc.c.wg.Done()
	defer func() {
		sc.nc.Close()
		close(sc.done)
		sc.c.mu.Lock()
		delete(n.conns, sc)
		sc.c.mu.Unlock()
	}()
	br := bufio.NewReaderSize(sc.nc, readBufferBytes)
	var buf []byte
	handshaken := false
	self := n
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		if _, _, err := wire.NextRequestFrame(size[:], 0); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		frame := buf[:n]
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		if !sc.c.awaitRunning(self) {
			return
		}
		h, body, _ := wire.ParseRequestHeader(frame)
		if !handshaken && h.APIKey != wire.APIHandshake {
			sc.writeFrame(wire.AppendErrorResponse(nil, h.CorrelationID, wire.Errorf(wire.ErrInvalidRequest, "handshake required")), !frameBuffered(br))
			continue
		}
		if h.APIKey == wire.APIHandshake {
			handshaken = true
		}
		if !sc.c.dispatch(sc, h, body, !frameBuffered(br)) {
			return
		}
	}
}

// frameBuffered reports whether a whole request frame is already buffered:
// then its response will follow at once, and flushing can wait for it.
func frameBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	frame, _, err := wire.NextRequestFrame(b, 0)
	return frame != nil || err != nil
}

// writeFrame queues a response frame, flushing when flush is set (no more
// requests are waiting to be read, so nothing else will be coalesced).
func (sc *serverConn) writeFrame(frame []byte, flush bool) {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	sc.bw.Write(frame)
	if flush {
		sc.bw.Flush()
	}
}

// flush sends what is buffered.
func (sc *serverConn) flush() {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	sc.bw.Flush()
}

// respond encodes and writes a response (or error) for h.
func (sc *serverConn) respond(h wire.RequestHeader, resp wire.Response, err error, flush bool) {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if err != nil {
		sc.out = wire.AppendErrorResponse(sc.out[:0], h.CorrelationID, err)
	} else {
		sc.out = wire.AppendResponse(sc.out[:0], h.CorrelationID, h.APIVersion, resp)
	}
	sc.bw.Write(sc.out)
	if flush {
		sc.bw.Flush()
	}
}

// respondLater writes a response from another goroutine once release is
// closed or delay has passed, unless the connection or cluster ends first.
func (sc *serverConn) respondLater(frame []byte, delay time.Duration, release <-chan struct{}) {
	sc.c.wg.Add(1)
	go func() {
		defer sc.c.wg.Done()
		var timer <-chan time.Time
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-timer:
		case <-release:
		case <-sc.done:
			return
		}
		sc.writeFrame(frame, true)
	}()
}
