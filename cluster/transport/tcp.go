package transport

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/peerauth"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/tlsbridge"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// The replication transport. Each node dials K connections ("links") to
// every peer and sends only on the links it dialed; it receives on the
// links its peers dialed. Link k to a peer is dialed from shard k mod S
// (S = this node's shards) and the accepting node moves it to shard
// k mod S there, so with K = S a partition's stream (link
// ShardFor(partition key, K)) is served by the shard that owns the
// partition at both ends. docs/design/replication.md has the picture.
//
// Messages of one shard round are coalesced: per link, the small
// messages (votes, heartbeats, acknowledgements) of all groups go out as
// one frame at the end of the round; an append with entries read from the
// log goes out as its own frame whose entry bytes are sendfiled from the
// segment files.

// Bounds of the transport.
const (
	// linkOutboundBytesMax drops messages for a link whose socket is that
	// far behind; consensus retransmits.
	linkOutboundBytesMax = 64 << 20
	// redialMin and RedialMax bound the backoff between dials of a link.
	redialMin = 50 * time.Millisecond
	RedialMax = 2 * time.Second
	// appRetryMax bounds how often an append waits for its entries to be
	// written before it is dropped (consensus resends it).
	appRetryMax = 100
	// RoutesFullEvery re-announces every primary this node holds (the
	// simulator's transport keeps the same beat).
	RoutesFullEvery = 5 * time.Second
)

// linkKey names one outbound link.
type linkKey struct {
	peer int32
	k    int
}

// link is one outbound connection; owned by shard k mod S.
type link struct {
	key     linkKey
	addr    string
	conn    *netio.Conn
	ready   bool
	hello   peerauth.Hello
	backoff time.Duration
	// timer is the pending redial, nil while none is.
	timer *shard.Timer
	// dialing: a dial started and has not failed yet (connecting, or
	// connected and handshaking or ready); redial clears it.
	dialing bool
	// gone: the peer left the roster (dropPeer); never dialed again.
	gone bool
}

// peerShard is one shard's part of the transport (owned by that shard).
type peerShard struct {
	sh    *shard.Shard
	links map[linkKey]*link
	// out holds, per link, what this shard's replicas queued this round.
	out         map[linkKey][]netio.Response
	pending     map[linkKey][]byte // the small-message frame being built
	pendingN    map[linkKey]int
	flushQueued bool
}

// TCP is the node's replication transport: the Transport over TCP.
type TCP struct {
	d      Deps
	server *netio.Server
	// dialer dials the links over TLS (nil: plaintext, server.Dial).
	dialer *tlsbridge.Dialer
	k      int
	secret peerauth.Secrets
	shards []*peerShard
	// hopCount counts messages that crossed shards on their way to a
	// link or from a link to their group (K differs from the shard
	// counts).
	hopCount atomic.Uint64
	// segmentBytes counts the bytes sent as whole segments (SendSegment).
	segmentBytes atomic.Int64
	// groupShard maps a consensus group to the shard hosting it here.
	groupShard sync.Map
	// routesMu guards routesOut, the route changes to announce.
	routesMu  sync.Mutex
	routesOut []peerwire.Route
	// dialed holds the peers this node has links to, with their
	// replication addresses (SetPeers); owned by shard
	// routes.MetaShard after NewTCP.
	dialed map[int32]string
}

// NewTCP builds the transport over the replication listener ln (bound
// by the node's preflight) with k links to every peer, and starts
// dialing every peer of d.Roster.
func NewTCP(d Deps, k int, secret peerauth.Secrets, netCfg config.Network, ln *netio.Listener) (*TCP, error) {
	p := &TCP{d: d, k: k, secret: secret, dialed: map[int32]string{}}
	srv, err := netio.NewServer(d.Group, netio.Config{MaxFrameBytes: netCfg.MaxFrameBytes + 1<<20,
		MaxInflightPerConn: 1024, OutboundBytesMax: linkOutboundBytesMax,
		RetransmitBackoffMax: time.Duration(netCfg.TCPRetransmitMaxMs) * time.Millisecond,
		Logf:                 func(format string, args ...any) { d.Log.Info("replication: " + sprintf(format, args...)) },
	}, &inbound{p: p})
	if err != nil {
		return nil, err
	}
	p.server = srv
	p.shards = make([]*peerShard, d.Group.Len())
	for i := range p.shards {
		p.shards[i] = &peerShard{sh: d.Group.Shard(i), links: map[linkKey]*link{}, out: map[linkKey][]netio.Response{},
			pending: map[linkKey][]byte{}, pendingN: map[linkKey]int{}}
	}
	if err := p.serve(ln); err != nil {
		return nil, err
	}
	d.Log.Info("replication listening", "addr", srv.Addr().String(), "links_per_peer", p.k)
	for _, m := range d.Roster() {
		if int32(m.ID) == d.Self {
			continue
		}
		p.dialed[int32(m.ID)] = m.ReplicationAddr
		for k := 0; k < p.k; k++ {
			l := &link{key: linkKey{peer: int32(m.ID), k: k}, addr: m.ReplicationAddr, backoff: redialMin}
			ps := p.shards[k%len(p.shards)]
			ps.sh.Post(func() {
				ps.links[l.key] = l
				p.dial(ps, l)
			})
		}
	}
	sh0 := d.Group.Shard(routes.MetaShard)
	sh0.Post(func() { p.pingLoop(sh0) })
	return p, nil
}

// Alive reports whether a frame came from node id within an election
// timeout (the liveness signal).
func (p *TCP) Alive(id int32) bool { return p.d.Live.Alive(id) }

func (p *TCP) Hops() uint64 { return p.hopCount.Load() }

func (p *TCP) Shutdown(ctx context.Context) error { return p.server.Shutdown(ctx) }

func (p *TCP) Opened(g raftlite.GroupID, shardID int) { p.groupShard.Store(g, shardID) }

func (p *TCP) Closed(g raftlite.GroupID) { p.groupShard.Delete(g) }

// linkIndex is the link a group's messages travel on: hash(partition)
// mod K (the metadata group uses link 0, which shard 0 owns at both ends).
func (p *TCP) linkIndex(key [20]byte) int {
	if key == routes.MetaKey {
		return 0
	}
	return shard.ShardFor(key[:], p.k)
}

func (p *TCP) linkShard(k int) int { return k % len(p.shards) }

// Send is a replica's Config.Send: it runs on the replica's shard, and
// encodes everything before returning (raftlite reuses msgs).
func (p *TCP) Send(r *partition.Replica, msgs []raftlite.Message) {
	sh := r.Config().Sched.(*shard.Shard)
	ps := p.shards[sh.ID()]
	k := p.linkIndex(r.Key())
	meta := r.Key() == routes.MetaKey
	for i := range msgs {
		m := &msgs[i]
		lk := linkKey{peer: int32(m.To), k: k}
		if m.Type == raftlite.MsgReset && meta {
			m.Snapshot = p.d.Meta.Snapshot() // the metadata state covering every offset below the log start
		}
		if m.Type == raftlite.MsgApp && len(m.Entries) > 0 && !hasData(m) {
			p.sendApp(ps, r, lk, *m, 0)
			continue
		}
		n := peerwire.FramedMessageBytes(m, true)
		buf := ps.pending[lk]
		if buf == nil {
			buf = peerwire.AppendMessagesHeader(getFrameBuf(frameHeaderBytes + n)[:4], 0)
		}
		ps.pending[lk] = peerwire.AppendFramedMessage(slices.Grow(buf, n), m, true)
		ps.pendingN[lk]++
	}
	p.queueFlush(ps)
}

// frameHeaderBytes is a Messages frame's length prefix, kind and count.
const frameHeaderBytes = 4 + 1 + 2

// frameBufs recycles the buffers of frames built from memory: a primary
// under load builds one per follower each round, as large as the round's
// batches, and growing a fresh one each time made most of the node's
// garbage.
var frameBufs sync.Pool // of *[]byte

// frameBufPooledMax bounds the buffers kept for reuse.
const frameBufPooledMax = 4 << 20

// getFrameBuf returns an empty buffer with room for n bytes.
func getFrameBuf(n int) []byte {
	if v, ok := frameBufs.Get().(*[]byte); ok && cap(*v) >= n {
		return (*v)[:0]
	}
	return make([]byte, 0, max(n, 4<<10))
}

// putFrameBuf hands b back once the connection is done with it.
func putFrameBuf(b []byte) {
	if cap(b) <= frameBufPooledMax {
		frameBufs.Put(&b)
	}
}

func hasData(m *raftlite.Message) bool {
	for _, e := range m.Entries {
		if e.Data == nil {
			return false
		}
	}
	return true
}

// sendApp sends an append whose entries are in the log: the message from
// memory, the entries' bytes by sendfile. Entries not yet written (the
// kernel has not finished the append) are waited for briefly.
func (p *TCP) sendApp(ps *peerShard, r *partition.Replica, lk linkKey, m raftlite.Message, tries int) {
	first, last := m.Entries[0].Base, m.Entries[len(m.Entries)-1].Last
	log := r.Log()
	if last > log.WrittenOffset() {
		if tries >= appRetryMax {
			return
		}
		m.Entries = append([]raftlite.Entry(nil), m.Entries...)
		ps.sh.AfterFunc(time.Millisecond, func() { p.sendApp(ps, r, lk, m, tries+1) })
		return
	}
	want := peerwire.DataBytes(&m)
	spans, err := log.Read(first, int(want), last)
	if err != nil {
		return // the log moved (truncated, retention): consensus resends
	}
	var got int64
	files := make([]netio.FileRange, 0, len(spans))
	for _, sp := range spans {
		got += sp.Len
		files = append(files, netio.FileRange{Fd: int(sp.Fd()), Off: sp.Pos, Len: sp.Len})
	}
	if got != want || (len(spans) > 0 && spans[0].FirstOffset != first) {
		segment.ReleaseSpans(spans)
		return
	}
	head := peerwire.AppendMessagesHeader(make([]byte, 4, 256), 1)
	head = peerwire.AppendFramedMessage(head, &m, false)
	binary.BigEndian.PutUint32(head, uint32(int64(len(head)-4)+want))
	p.flushPending(ps, lk)
	ps.out[lk] = append(ps.out[lk], netio.Response{Header: head, Files: files, Release: func(error) { segment.ReleaseSpans(spans) }})
	p.queueFlush(ps)
}

// flushPending closes the link's small-message frame into its out queue.
func (p *TCP) flushPending(ps *peerShard, lk linkKey) {
	buf := ps.pending[lk]
	if buf == nil {
		return
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	binary.BigEndian.PutUint16(buf[5:], uint16(ps.pendingN[lk]))
	ps.out[lk] = append(ps.out[lk], netio.Response{Header: buf, Release: func(error) { putFrameBuf(buf) }})
	delete(ps.pending, lk)
	delete(ps.pendingN, lk)
}

func (p *TCP) queueFlush(ps *peerShard) {
	if !ps.flushQueued {
		ps.flushQueued = true
		ps.sh.Defer(func() { p.flush(ps) })
	}
}

// flush hands this round's frames to their links (here, or on the shard
// that owns the link).
func (p *TCP) flush(ps *peerShard) {
	ps.flushQueued = false
	for lk := range ps.pending {
		p.flushPending(ps, lk)
	}
	for lk, resps := range ps.out {
		delete(ps.out, lk)
		owner := p.shards[p.linkShard(lk.k)]
		if owner == ps {
			owner.deliver(lk, resps)
			continue
		}
		p.hopCount.Add(uint64(len(resps)))
		if err := owner.sh.Post(func() { owner.deliver(lk, resps) }); err != nil {
			releaseAll(resps, err)
		}
	}
}

// deliver sends frames on an owned link, or drops them (consensus
// retransmits) when the link is down or too far behind.
func (ps *peerShard) deliver(lk linkKey, resps []netio.Response) {
	l := ps.links[lk]
	if l == nil || !l.ready || l.conn.OutboundBytes() > linkOutboundBytesMax {
		releaseAll(resps, netio.ErrClosed)
		return
	}
	for _, r := range resps {
		l.conn.Send(r)
	}
}

func releaseAll(resps []netio.Response, err error) {
	for _, r := range resps {
		if r.Release != nil {
			r.Release(err)
		}
	}
}

// sendFrame sends a frame body on an owned link if it is ready.
func (ps *peerShard) sendFrame(lk linkKey, body []byte) {
	head := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(head, uint32(len(body)))
	ps.deliver(lk, []netio.Response{{Header: append(head, body...)}})
}

// pingLoop beats every heartbeat interval on link 0 of every peer (owned
// by shard 0) and announces route changes; runs on shard 0.
func (p *TCP) pingLoop(sh *shard.Shard) {
	ps := p.shards[sh.ID()]
	every := p.d.Heartbeat
	var sinceFull time.Duration
	watch := NewDownWatch(every, p.d.Live.Timeout())
	var beat func()
	beat = func() {
		if p.d.Stopped() {
			return
		}
		var ids []int32
		for _, m := range p.d.Roster() {
			if int32(m.ID) != p.d.Self {
				ids = append(ids, int32(m.ID))
			}
		}
		down, up := watch.Beat(p.d.Clock.Now(), ids, p.Alive)
		for _, id := range up {
			p.d.Liveness(id, true)
		}
		for _, id := range down {
			p.d.Liveness(id, false)
			p.d.Replicas.PeerDown(id)
		}
		ping := peerwire.AppendPing(nil, peerwire.Ping{Node: p.d.Self, MetaApplied: p.d.Meta.Applied()})
		sinceFull += every
		full := sinceFull >= RoutesFullEvery
		if full {
			sinceFull = 0
		}
		rs := p.takeRoutes(full)
		var rbody []byte
		if len(rs) > 0 {
			rbody = peerwire.AppendRoutes(nil, rs)
		}
		for lk, l := range ps.links {
			if lk.k != 0 || !l.ready {
				continue
			}
			ps.sendFrame(lk, ping)
			if rbody != nil {
				ps.sendFrame(lk, rbody)
			}
		}
		sh.AfterFunc(every, beat)
	}
	beat()
}

// Announce queues a route change of a partition this node leads.
func (p *TCP) Announce(r peerwire.Route) {
	p.routesMu.Lock()
	p.routesOut = append(p.routesOut, r)
	p.routesMu.Unlock()
}

// takeRoutes returns the queued changes, or every route this node leads.
func (p *TCP) takeRoutes(full bool) []peerwire.Route {
	p.routesMu.Lock()
	out := p.routesOut
	p.routesOut = nil
	p.routesMu.Unlock()
	if !full {
		return out
	}
	return p.d.Routes.LedBy(p.d.Self)
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
