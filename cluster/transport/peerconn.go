package transport

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/corestream/corestream/cluster/peerauth"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// params are this node's handshake parameters for link k.
func (p *TCP) params(k int) peerauth.Params {
	prm := peerauth.Params{Version: p.d.Version, Node: int32(p.d.Self), K: int32(p.k), ConnIndex: int32(k)}
	if p.d.Meta != nil {
		prm.Cluster = p.d.Meta.Cluster()
	}
	return prm
}

func peerFrame(body []byte) netio.Response {
	b := make([]byte, 4, 4+len(body))
	b[0], b[1], b[2], b[3] = byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
	return netio.Response{Header: append(b, body...)}
}

// dial opens link l from its shard (ps); on failure or close it redials
// with backoff.
func (p *TCP) dial(ps *peerShard, l *link) {
	if p.d.Stopped() || l.gone {
		return
	}
	l.timer, l.dialing = nil, true
	err := p.dialConn(ps.sh, l.addr, &outbound{p: p, ps: ps, l: l}, func(c *netio.Conn, err error) {
		if err != nil {
			p.redial(ps, l)
		}
	})
	if err != nil {
		p.redial(ps, l)
	}
}

// dialNowIfDown dials link key at once when it is down and waiting out its
// backoff: its peer just dialed in, so it is back (restarted, or the
// network healed). Without this the link waited up to RedialMax, and a
// factor-2 partition led from here stalled that long after its follower
// returned. Runs on the link's shard (ps).
func (p *TCP) dialNowIfDown(ps *peerShard, key linkKey) {
	l := ps.links[key]
	if l == nil || l.ready || l.dialing || p.d.Stopped() {
		return
	}
	if l.timer != nil {
		ps.sh.Stop(l.timer)
		l.timer = nil
	}
	l.backoff = redialMin
	p.dial(ps, l)
}

func (p *TCP) redial(ps *peerShard, l *link) {
	l.ready, l.conn, l.dialing = false, nil, false
	if p.d.Stopped() || l.gone {
		return
	}
	d := l.backoff
	l.backoff = min(l.backoff*2, RedialMax)
	l.timer = ps.sh.AfterFunc(d, func() { p.dial(ps, l) })
}

// outbound handles a link this node dialed: it sends the Hello, checks
// the listener's Challenge, proves itself, and once Welcomed carries this
// node's messages (it receives nothing else).
type outbound struct {
	p      *TCP
	ps     *peerShard
	l      *link
	closed bool
}

func (o *outbound) OnOpen(c *netio.Conn) error {
	o.l.conn = c
	o.l.hello = peerauth.Hello{Params: o.p.params(o.l.key.k), Nonce: peerauth.NewNonce()}
	c.Send(peerFrame(peerauth.EncodeHello(o.l.hello)))
	return nil
}

func (o *outbound) OnFrame(c *netio.Conn, body []byte) {
	c.Release()
	kind, v, err := peerauth.Decode(body)
	switch {
	case err != nil:
		o.p.d.Log.Error("replication handshake refused", "peer", o.l.key.peer, "addr", o.l.addr, "err", err)
	case kind == peerauth.KindChallenge:
		ch := v.(peerauth.Challenge)
		if err := peerauth.VerifyChallenge(o.p.secret, o.l.hello, ch); err != nil {
			o.p.d.Log.Error("replication handshake refused", "peer", o.l.key.peer, "addr", o.l.addr, "err", err)
			c.Send(peerFrame(peerauth.EncodeRefusal(err.Error())))
			c.Close()
			return
		}
		c.Send(peerFrame(peerauth.EncodeProof(peerauth.DialerProofs(o.p.secret, o.l.hello, ch))))
		return
	case kind == peerauth.KindWelcome:
		o.l.ready, o.l.backoff = true, redialMin
		o.p.d.Log.Info("replication link up", "peer", o.l.key.peer, "link", o.l.key.k)
		if o.l.key.k == 0 {
			// The peer may have just restarted and know no primary:
			// tell it ours now rather than at the next full
			// announcement (RoutesFullEvery), or its clients would be
			// told PRIMARY_NOT_AVAILABLE for seconds.
			if led := o.p.d.Routes.LedBy(o.p.d.Self); len(led) > 0 {
				o.ps.sendFrame(o.l.key, peerwire.AppendRoutes(nil, led))
			}
		}
		return
	default:
		o.p.d.Log.Error("replication: unexpected handshake message", "peer", o.l.key.peer, "kind", kind)
	}
	c.Close()
}

func (o *outbound) OnFrameTooLarge(c *netio.Conn, size uint32, head []byte) {}

func (o *outbound) OnClose(c *netio.Conn, err error) {
	if o.closed {
		return
	}
	o.closed = true
	if o.l.ready {
		o.p.d.Log.Warn("replication link down", "peer", o.l.key.peer, "link", o.l.key.k, "err", err)
	}
	if o.l.conn == c || o.l.conn == nil {
		o.p.redial(o.ps, o.l)
	}
}

// inbound handles a link a peer dialed: it checks the Hello, challenges,
// verifies the proof, welcomes, moves the connection to the shard the
// link index names, and from then on receives the peer's messages.
type inbound struct{ p *TCP }

// inState is one inbound connection's handshake state.
type inState struct {
	hello     peerauth.Hello
	challenge peerauth.Challenge
	stage     int // 0 want Hello, 1 want Proof, 2 streaming
	peer      int32
}

func (in *inbound) OnOpen(c *netio.Conn) error {
	c.SetContext(&inState{})
	return nil
}

func (in *inbound) OnFrameTooLarge(c *netio.Conn, size uint32, head []byte) {
	in.p.d.Log.Error("replication: oversize frame from a peer", "remote", c.RemoteAddr(), "bytes", size)
}

func (in *inbound) OnClose(c *netio.Conn, err error) {}

func (in *inbound) refuse(c *netio.Conn, err error) {
	in.p.d.Log.Error("replication handshake refused", "remote", c.RemoteAddr(), "err", err)
	c.Send(peerFrame(peerauth.EncodeRefusal(err.Error())))
	c.Close()
}

func (in *inbound) OnFrame(c *netio.Conn, body []byte) {
	c.Release()
	st := c.Context().(*inState)
	p := in.p
	switch st.stage {
	case 0:
		kind, v, err := peerauth.Decode(body)
		if err == nil && kind != peerauth.KindHello {
			err = errors.New("peerauth: expected a Hello")
		}
		if err != nil {
			in.refuse(c, err)
			return
		}
		h := v.(peerauth.Hello)
		ours := p.params(int(h.ConnIndex))
		if err := peerauth.Compatible(ours, h.Params); err != nil {
			in.refuse(c, err)
			return
		}
		if h.Node <= 0 || h.Node > int32(raftlite.NodeIDMax) || h.Node == p.d.Self || !p.inRoster(h.Node) {
			in.refuse(c, errors.New("peerauth: node "+strconv.Itoa(int(h.Node))+" is not a peer in this node's roster (a new node joins once `corestream cluster add-node` recorded it; else check its node.id)"))
			return
		}
		if h.ConnIndex < 0 || int(h.ConnIndex) >= p.k {
			in.refuse(c, errors.New("peerauth: link index out of range"))
			return
		}
		st.hello, st.peer = h, h.Node
		st.challenge = peerauth.NewChallenge(p.secret, h, ours, peerauth.NewNonce())
		st.stage = 1
		c.Send(peerFrame(peerauth.EncodeChallenge(st.challenge)))
	case 1:
		kind, v, err := peerauth.Decode(body)
		if err == nil && kind != peerauth.KindProof {
			err = errors.New("peerauth: expected a Proof")
		}
		if err == nil {
			err = peerauth.VerifyProof(p.secret, st.hello, st.challenge, v.(peerauth.Proofs))
		}
		if err != nil {
			in.refuse(c, err)
			return
		}
		st.stage = 2
		c.Send(peerFrame(peerauth.EncodeWelcome()))
		p.d.Live.Heard(st.peer)
		to := p.d.Group.Shard(p.linkShard(int(st.hello.ConnIndex)))
		key := linkKey{peer: st.peer, k: int(st.hello.ConnIndex)}
		to.Post(func() { p.dialNowIfDown(p.shards[to.ID()], key) })
		if to != c.Shard() {
			if err := c.Migrate(to, func(*netio.Conn, error) {}); err != nil {
				p.d.Log.Warn("replication: moving a link to its shard", "err", err)
			}
		}
	default:
		p.d.Live.Heard(st.peer)
		p.receive(c.Shard(), st.peer, body)
	}
}

// receive dispatches one frame from a peer on shard sh.
func (p *TCP) receive(sh *shard.Shard, from int32, body []byte) {
	if len(body) == 0 {
		return
	}
	switch body[0] {
	case peerwire.KindMessages:
		err := peerwire.DecodeMessages(body, func(m *raftlite.Message) { p.deliverMessage(sh, m) })
		if err != nil {
			p.d.Log.Error("replication: bad frame", "peer", from, "err", err)
		}
	case peerwire.KindPing:
		if _, err := peerwire.DecodePing(body); err != nil {
			p.d.Log.Error("replication: bad ping", "peer", from, "err", err)
		}
	case peerwire.KindRoutes:
		rs, err := peerwire.DecodeRoutes(body)
		if err != nil {
			p.d.Log.Error("replication: bad routes", "peer", from, "err", err)
			return
		}
		for _, r := range rs {
			p.d.Routes.Learn(routes.Announced(r))
		}
	case peerwire.KindTransfer:
		tr, err := peerwire.DecodeTransfer(body)
		if err != nil {
			p.d.Log.Error("replication: bad transfer", "peer", from, "err", err)
			return
		}
		p.d.Replicas.Transfer(tr)
	case peerwire.KindReassign, peerwire.KindReassignState:
		p.receiveReassign(from, body)
	case peerwire.KindSegment, peerwire.KindSegmentAck:
		p.receiveSegment(sh, from, body)
	case peerwire.KindTxnMarker, peerwire.KindTxnMarkerAck:
		p.receiveTxnMarker(from, body)
	case peerwire.KindGroupsTopic:
		p.receiveGroupsTopic(from, body)
	case peerwire.KindPropose, peerwire.KindProposed:
		p.receivePropose(from, body)
	case peerwire.KindEnds, peerwire.KindEndsAnswer:
		p.receiveEnds(from, body)
	default:
		p.d.Log.Error("replication: unknown frame kind", "peer", from, "kind", body[0])
	}
}

// deliverMessage steps a message into its group: here when the group
// lives on this shard, else on its shard with a copy of the entries.
func (p *TCP) deliverMessage(sh *shard.Shard, m *raftlite.Message) {
	v, ok := p.groupShard.Load(m.Group)
	if !ok {
		return // not open here (yet): consensus retransmits
	}
	owner := v.(int)
	if owner == sh.ID() {
		p.d.Replicas.Step(owner, m)
		return
	}
	cp := *m
	cp.Entries = append([]raftlite.Entry(nil), m.Entries...)
	for i := range cp.Entries {
		cp.Entries[i].Data = append([]byte(nil), cp.Entries[i].Data...)
	}
	cp.Snapshot = append([]byte(nil), m.Snapshot...)
	p.hopCount.Add(1)
	p.d.Group.Shard(owner).Post(func() { p.d.Replicas.Step(owner, &cp) })
}

// inRoster reports whether node id is in this node's roster.
func (p *TCP) inRoster(id int32) bool {
	for _, m := range p.d.Roster() {
		if int32(m.ID) == id {
			return true
		}
	}
	return false
}

// SendSegment is a replica's Config.SendSegment: one chunk of a sealed
// segment to a learner, its bytes sent from the segment file by sendfile
// after the frame's header (docs/design/moves.md). Runs on the replica's
// shard.
func (p *TCP) SendSegment(r *partition.Replica, c *partition.SegmentChunk) {
	ps := p.shards[r.Config().Sched.(*shard.Shard).ID()]
	lk := linkKey{peer: int32(c.To), k: p.linkIndex(r.Key())}
	m := peerwire.Segment{Group: partition.GroupID(r.Key()), From: c.From, To: c.To, Term: c.Term, Base: c.Base,
		Last: c.Last, LastTerm: c.LastTerm, FileBytes: c.FileBytes, Pos: c.Pos}
	head := peerwire.AppendSegmentHeader(make([]byte, 4, 4+peerwire.SegmentHeaderBytes), &m)
	binary.BigEndian.PutUint32(head, uint32(int64(len(head)-4)+c.Span.Len))
	sp := c.Span
	resp := netio.Response{Header: head, Release: func(error) { sp.Release() }}
	if fd := sp.Fd(); fd != vfs.InvalidFd {
		resp.Files = []netio.FileRange{{Fd: int(fd), Off: sp.Pos, Len: sp.Len}}
	} else {
		var err error
		if resp.Header, err = sp.AppendTo(head); err != nil {
			sp.Release()
			return // the transfer resends
		}
	}
	p.flushPending(ps, lk)
	ps.out[lk] = append(ps.out[lk], resp)
	p.queueFlush(ps)
	p.segmentBytes.Add(sp.Len)
}

// AnswerSegment is a replica's Config.AnswerSegment: a learner's answer
// to a chunk, back to the primary. Runs on the replica's shard.
func (p *TCP) AnswerSegment(r *partition.Replica, to raftlite.NodeID, a partition.SegmentAnswer) {
	ps := p.shards[r.Config().Sched.(*shard.Shard).ID()]
	lk := linkKey{peer: int32(to), k: p.linkIndex(r.Key())}
	body := peerwire.AppendSegmentAck(nil, peerwire.SegmentAck{Group: partition.GroupID(r.Key()), From: a.From, To: to,
		Term: a.Term, Base: a.Base, Held: a.Held, Status: a.Status})
	p.flushPending(ps, lk)
	ps.out[lk] = append(ps.out[lk], peerFrame(body))
	p.queueFlush(ps)
}

// receiveSegment hands a Segment chunk or its answer to its group's
// replica, on the group's shard (the chunk copied when it crosses).
func (p *TCP) receiveSegment(sh *shard.Shard, from int32, body []byte) {
	var g raftlite.GroupID
	var fn func(r *partition.Replica)
	var chunk *partition.SegmentChunk
	if body[0] == peerwire.KindSegment {
		m, err := peerwire.DecodeSegment(body)
		if err != nil {
			p.d.Log.Error("replication: bad segment chunk", "peer", from, "err", err)
			return
		}
		c := &partition.SegmentChunk{From: m.From, To: m.To, Term: m.Term, Base: m.Base, Last: m.Last,
			LastTerm: m.LastTerm, FileBytes: m.FileBytes, Pos: m.Pos, Data: m.Chunk}
		g, fn = m.Group, func(r *partition.Replica) {
			if err := r.ReceiveSegment(c); err != nil {
				p.d.Log.Info("replication: segment refused, catching up by appends", "group", m.Group, "base", m.Base, "err", err)
			}
		}
		chunk = c
	} else {
		a, err := peerwire.DecodeSegmentAck(body)
		if err != nil {
			p.d.Log.Error("replication: bad segment answer", "peer", from, "err", err)
			return
		}
		g, fn = a.Group, func(r *partition.Replica) {
			r.SegmentAnswered(partition.SegmentAnswer{From: a.From, Term: a.Term, Base: a.Base, Held: a.Held, Status: a.Status})
		}
	}
	v, ok := p.groupShard.Load(g)
	if !ok {
		return // not open here: the primary resends
	}
	owner := v.(int)
	run := func() {
		if r := p.d.Replicas.Replica(owner, g); r != nil {
			fn(r)
		}
	}
	if owner == sh.ID() {
		run()
		return
	}
	if chunk != nil {
		chunk.Data = append([]byte(nil), chunk.Data...) // the frame's buffer is reused once this returns
	}
	p.hopCount.Add(1)
	p.d.Group.Shard(owner).Post(run)
}
