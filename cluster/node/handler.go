package node

import (
	"errors"
	"fmt"

	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// handler serves the client protocol. Every method runs on the shard
// that owns the connection (its home shard).
type handler struct{ n *Node }

// connState is one client connection's protocol state.
type connState struct {
	// handshaken says the Handshake came first, as the protocol requires.
	handshaken bool
	protocol   uint16
	// target and streak count consecutive data requests for partitions of
	// one other shard; migrating is set while the connection moves there.
	target    int
	streak    int
	migrating bool
}

func (h *handler) OnOpen(c *netio.Conn) error {
	c.SetContext(&connState{})
	return nil
}

func (h *handler) OnClose(c *netio.Conn, err error) {
	if err != nil && !errors.Is(err, netio.ErrClosed) {
		h.n.log.Debug("connection closed", "remote", c.RemoteAddr(), "err", err)
	}
}

// OnFrameTooLarge answers with MESSAGE_TOO_LARGE when the request header
// arrived with the length; the server then closes the connection.
// (netio logs the connection's close, once.)
func (h *handler) OnFrameTooLarge(c *netio.Conn, size uint32, head []byte) {
	hdr, _, err := wire.ParseRequestHeader(head)
	if err != nil {
		return
	}
	e := wire.Errorf(wire.ErrMessageTooLarge, "request frame of %d bytes exceeds network.max_frame_bytes %d; closing the connection",
		size, h.n.cfg.Network.MaxFrameBytes)
	c.Send(netio.Response{Header: wire.AppendErrorResponse(nil, hdr.CorrelationID, e)})
}

// OnFrame decodes the request header and dispatches by API.
func (h *handler) OnFrame(c *netio.Conn, body []byte) {
	hdr, req, err := wire.ParseRequestHeader(body)
	if err != nil {
		// Not even a header: the stream is unusable. netio logs the
		// abort with the peer's address and err, once.
		c.Release()
		c.Abort(err)
		return
	}
	st := c.Context().(*connState)
	if err := hdr.Check(); err != nil {
		replyErr(c, hdr, err)
		return
	}
	if !st.handshaken && hdr.APIKey != wire.APIHandshake {
		replyErr(c, hdr, wire.Errorf(wire.ErrInvalidRequest, "%s before Handshake: the first request on a connection must be Handshake", hdr.APIKey))
		return
	}
	switch hdr.APIKey {
	case wire.APIHandshake:
		h.handshake(c, st, hdr, req)
	case wire.APIProduce, wire.APIFetch, wire.APIListOffsets:
		h.dataRequest(c, hdr, req)
	case wire.APIDescribePartition:
		h.describePartition(c, hdr, req)
	case wire.APIMetadata:
		h.metadata(c, hdr, req)
	case wire.APIListTopics:
		h.listTopics(c, hdr, req)
	case wire.APIDescribeTopic:
		h.describeTopic(c, hdr, req)
	case wire.APIClusterStatus:
		h.clusterStatus(c, hdr, req)
	case wire.APIInitProducer:
		h.initProducer(c, hdr, req)
	case wire.APICreateTopic, wire.APIDeleteTopic, wire.APIAddPartitions, wire.APICommitOffsets,
		wire.APIFetchOffsets, wire.APIMovePrimary, wire.APIRebalance:
		h.admin(c, hdr, req)
	default:
		replyErr(c, hdr, wire.Errorf(wire.ErrUnsupportedVersion, "API %d is not served by this node", hdr.APIKey))
	}
}

func (h *handler) handshake(c *netio.Conn, st *connState, hdr wire.RequestHeader, body []byte) {
	var req wire.HandshakeRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	v, err := wire.NegotiateProtocol(req.ProtocolMin, req.ProtocolMax)
	if err != nil {
		replyErr(c, hdr, err)
		return
	}
	st.handshaken, st.protocol = true, v
	resp := wire.ServerHandshake(v, int32(h.n.self), h.n.clusterID(), Version, uint32(h.n.cfg.Network.MaxFrameBytes))
	reply(c, hdr, resp)
}

// clusterID names the cluster in handshakes: its roster's size and first id.
func (n *Node) clusterID() string {
	return fmt.Sprintf("corestream-%d", len(n.roster))
}

// reply sends a successful response.
func reply(c *netio.Conn, hdr wire.RequestHeader, resp wire.Response) {
	c.Reply(netio.Response{Header: wire.AppendResponse(nil, hdr.CorrelationID, hdr.APIVersion, resp)})
}

// replyErr sends an error response.
func replyErr(c *netio.Conn, hdr wire.RequestHeader, err error) {
	c.Reply(netio.Response{Header: wire.AppendErrorResponse(nil, hdr.CorrelationID, err)})
}

// busy is the answer when another shard cannot take the request now.
func busy(err error) error {
	if errors.Is(err, shard.ErrStopped) {
		return wire.Errorf(wire.ErrNodeNotAvailable, "the node is shutting down")
	}
	e := wire.Errorf(wire.ErrBusy, "the node is overloaded (%v); retry shortly", err)
	e.RetryAfterMs = 5
	return e
}

// withAddress turns a replica's error into the protocol's (wireError) and
// fills a routing hint's address from the roster.
func (n *Node) withAddress(err error) error {
	err = wireError(err)
	var er *wire.ErrorResponse
	if errors.As(err, &er) && er.Hint != nil && er.Hint.Address == "" && er.Hint.NodeID > 0 {
		er.Hint.Address = n.addrOf(er.Hint.NodeID)
	}
	return err
}
