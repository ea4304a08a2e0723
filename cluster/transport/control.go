package transport

import (
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/tlsbridge"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/shard"
)

// The TCP transport's control frames (leadership transfers, replica
// moves, the groups topic's creation), its roster changes, its TLS and
// its segment catch-up port.

var _ Transport = (*TCP)(nil)

// Segments is the TCP transport itself: it sends whole segments.
func (p *TCP) Segments() SegmentLink { return p }

// SegmentBytes is how many bytes were sent as whole segments.
func (p *TCP) SegmentBytes() int64 { return p.segmentBytes.Load() }

// RequestTransfer sends t to node from over its link 0. REQUIRES: on
// shard routes.MetaShard, which owns link 0 (the balancer's shard).
func (p *TCP) RequestTransfer(from int32, t peerwire.Transfer) {
	ps := p.shards[p.linkShard(0)]
	ps.sendFrame(linkKey{peer: from, k: 0}, peerwire.AppendTransfer(nil, t))
}

// RequestReassign sends m to node to over link 0. REQUIRES: on shard
// routes.MetaShard, which owns link 0.
func (p *TCP) RequestReassign(to int32, m peerwire.Reassign) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendReassign(nil, m))
}

// AnswerReassign sends st to node to over link 0. REQUIRES: on shard
// routes.MetaShard.
func (p *TCP) AnswerReassign(to int32, st peerwire.ReassignState) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendReassignState(nil, st))
}

// SendTxnMarker sends m to node to over link 0. REQUIRES: on shard
// routes.MetaShard.
func (p *TCP) SendTxnMarker(to int32, m peerwire.TxnMarker) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendTxnMarker(nil, m))
}

// AnswerTxnMarker sends a to node to over link 0. REQUIRES: on shard
// routes.MetaShard.
func (p *TCP) AnswerTxnMarker(to int32, a peerwire.TxnMarkerAck) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendTxnMarkerAck(nil, a))
}

// receiveTxnMarker decodes a TxnMarker or TxnMarkerAck frame from a peer.
func (p *TCP) receiveTxnMarker(from int32, body []byte) {
	if body[0] == peerwire.KindTxnMarker {
		m, err := peerwire.DecodeTxnMarker(body)
		if err != nil || m.From != from {
			p.d.Log.Error("replication: bad transaction marker", "peer", from, "err", err, "from", m.From)
			return
		}
		p.d.Replicas.TxnMarker(m)
		return
	}
	a, err := peerwire.DecodeTxnMarkerAck(body)
	if err != nil {
		p.d.Log.Error("replication: bad transaction marker answer", "peer", from, "err", err)
		return
	}
	p.d.Replicas.TxnMarkerAck(a)
}

// RequestGroupsTopic sends a GroupsTopic frame to node to over link 0.
// REQUIRES: on shard routes.MetaShard, which owns link 0.
func (p *TCP) RequestGroupsTopic(to int32) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendGroupsTopic(nil, peerwire.GroupsTopic{Node: p.d.Self}))
}

// receiveGroupsTopic decodes a GroupsTopic frame from a peer and hands
// it to the controller's port.
func (p *TCP) receiveGroupsTopic(from int32, body []byte) {
	g, err := peerwire.DecodeGroupsTopic(body)
	if err != nil || g.Node != from {
		p.d.Log.Error("replication: bad groups-topic request", "peer", from, "err", err, "node", g.Node)
		return
	}
	p.d.Meta.GroupsTopicWanted(from)
}

// Propose sends m to node to over link 0. REQUIRES: on shard
// routes.MetaShard, which owns link 0.
func (p *TCP) Propose(to int32, m peerwire.Propose) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendPropose(nil, m))
}

// AnswerPropose sends m to node to over link 0. REQUIRES: on shard
// routes.MetaShard.
func (p *TCP) AnswerPropose(to int32, m peerwire.Proposed) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendProposed(nil, m))
}

// receivePropose decodes a Propose or Proposed frame from a peer and
// hands it to the controller's port; the command is copied out of the
// read buffer.
func (p *TCP) receivePropose(from int32, body []byte) {
	if body[0] == peerwire.KindPropose {
		m, err := peerwire.DecodePropose(body)
		if err != nil || m.Node != from {
			p.d.Log.Error("replication: bad propose", "peer", from, "err", err, "node", m.Node)
			return
		}
		m.Command = append([]byte(nil), m.Command...)
		p.d.Meta.ProposeFor(from, m)
		return
	}
	m, err := peerwire.DecodeProposed(body)
	if err != nil {
		p.d.Log.Error("replication: bad propose answer", "peer", from, "err", err)
		return
	}
	p.d.Meta.Proposed(from, m)
}

// AskEnds sends q to node to over link 0. REQUIRES: on shard
// routes.MetaShard, which owns link 0.
func (p *TCP) AskEnds(to int32, q peerwire.Ends) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendEnds(nil, q))
}

// AnswerEnds sends a to node to over link 0. REQUIRES: on shard
// routes.MetaShard.
func (p *TCP) AnswerEnds(to int32, a peerwire.EndsAnswer) {
	p.shards[p.linkShard(0)].sendFrame(linkKey{peer: to, k: 0}, peerwire.AppendEndsAnswer(nil, a))
}

// receiveEnds decodes an Ends or EndsAnswer frame from a peer.
func (p *TCP) receiveEnds(from int32, body []byte) {
	if p.d.Ends == nil {
		return
	}
	if body[0] == peerwire.KindEnds {
		q, err := peerwire.DecodeEnds(body)
		if err != nil {
			p.d.Log.Error("replication: bad ends question", "peer", from, "err", err)
			return
		}
		p.d.Ends.Asked(from, q)
		return
	}
	a, err := peerwire.DecodeEndsAnswer(body)
	if err != nil {
		p.d.Log.Error("replication: bad ends answer", "peer", from, "err", err)
		return
	}
	p.d.Ends.Answered(from, a)
}

// receiveReassign decodes a Reassign or ReassignState frame from a peer.
func (p *TCP) receiveReassign(from int32, body []byte) {
	if body[0] == peerwire.KindReassign {
		m, err := peerwire.DecodeReassign(body)
		if err != nil || m.From != from {
			p.d.Log.Error("replication: bad reassign", "peer", from, "err", err, "from", m.From)
			return
		}
		p.d.Replicas.Reassign(m)
		return
	}
	st, err := peerwire.DecodeReassignState(body)
	if err != nil {
		p.d.Log.Error("replication: bad reassign state", "peer", from, "err", err)
		return
	}
	p.d.Meta.ReassignState(st)
}

// SetPeers dials the links of peers new to the roster and drops those of
// peers that left it; a peer whose replication address changed (removed
// and added again between two publishes) is dropped and dialed anew.
// REQUIRES: on shard routes.MetaShard (it owns dialed).
func (p *TCP) SetPeers(nodes []config.RosterNode) {
	want := map[int32]string{}
	for _, m := range nodes {
		if id := int32(m.ID); id != p.d.Self {
			want[id] = m.ReplicationAddr
		}
	}
	for id, addr := range p.dialed {
		if want[id] != addr {
			delete(p.dialed, id)
			p.d.Log.Info("replication: closing the links of a node gone from the roster", "peer", id, "addr", addr)
			p.dropLinks(id)
		}
	}
	for _, m := range nodes {
		id := int32(m.ID)
		if _, ok := p.dialed[id]; ok || id == p.d.Self {
			continue
		}
		p.dialed[id] = m.ReplicationAddr
		p.d.Log.Info("replication: dialing a node new to the roster", "peer", id, "addr", m.ReplicationAddr)
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
func (p *TCP) dropLinks(id int32) {
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

// serve serves the replication listener ln, over TLS when configured.
func (p *TCP) serve(ln *netio.Listener) error {
	if p.d.TLS == nil {
		return p.server.Serve(ln)
	}
	_, err := tlsbridge.Serve(p.server, ln, p.d.TLS.Serve)
	if err == nil {
		p.dialer = tlsbridge.NewDialer(p.server, p.d.TLS.Dial)
	}
	return err
}

// dialConn dials a link: over TLS when the transport has a dialer.
func (p *TCP) dialConn(sh *shard.Shard, addr string, h netio.Handler, done func(*netio.Conn, error)) error {
	if p.dialer != nil {
		return p.dialer.Dial(sh, addr, h, done)
	}
	return p.server.Dial(sh, addr, h, done)
}

// LinkState reads the outbound link k to peer on the shard that owns it:
// whether it is up, its pending redial (nil: none) and its backoff. For
// tests and diagnostics; it waits for that shard.
func (p *TCP) LinkState(peer int32, k int) (ready bool, timer *shard.Timer, backoff time.Duration, err error) {
	sh := p.d.Group.Shard(p.linkShard(k))
	err = sh.Do(func(*shard.Shard) {
		if l := p.shards[sh.ID()].links[linkKey{peer: peer, k: k}]; l != nil {
			ready, timer, backoff = l.ready, l.timer, l.backoff
		}
	})
	return ready, timer, backoff, err
}
