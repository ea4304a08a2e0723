package node

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// handler serves the native client protocol: it decodes each request
// frame, calls the typed service (cluster/service) and encodes the answer
// or the error (wireError, one table). Every method runs on the shard
// that owns the connection (its home shard); so do the service's
// completions, which are given the home shard as from.
type handler struct {
	svc           service.Service
	log           *slog.Logger
	maxFrameBytes int
	// group and ownerShard move a connection to the shard its requests
	// go to (maybeMigrate); ownerShard is the shard owning a partition,
	// -1 when the topic or partition is unknown.
	group      *shard.Group
	ownerShard func(topic string, p int32) int
	// migrations counts connections moved.
	migrations *atomic.Uint64
}

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
		h.log.Debug("connection closed", "remote", c.RemoteAddr(), "err", err)
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
		size, h.maxFrameBytes)
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
	case wire.APIProduce:
		h.produce(c, hdr, req)
	case wire.APIFetch:
		h.fetch(c, hdr, req)
	case wire.APIListOffsets:
		h.listOffsets(c, hdr, req)
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
	id := h.svc.Identity()
	resp := wire.ServerHandshake(v, id.NodeID, id.ClusterID, id.Version, uint32(h.maxFrameBytes))
	reply(c, hdr, resp)
}

// reply sends a successful response.
func reply(c *netio.Conn, hdr wire.RequestHeader, resp wire.Response) {
	c.Reply(netio.Response{Header: wire.AppendResponse(nil, hdr.CorrelationID, hdr.APIVersion, resp)})
}

// replyErr sends an error response: a service error gets its native code
// from the one table (wireError).
func replyErr(c *netio.Conn, hdr wire.RequestHeader, err error) {
	c.Reply(netio.Response{Header: wire.AppendErrorResponse(nil, hdr.CorrelationID, wireError(err))})
}
