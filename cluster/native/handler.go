// Package native is the native binary protocol's front end: it decodes
// each request frame (netio/wire), calls the typed service
// (cluster/service) and encodes the answer, or the error with the code
// the one table (errors.go) gives its kind. It holds no rule of the
// broker's: what a request does is the service's.
//
// Every method runs on the shard goroutine that owns the connection (its
// home shard), and so do the service's completions: the handler passes
// the home shard as the service's from.
package native

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/frontend"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/netio/wire/scram"
	"github.com/corestream/corestream/shard"
)

// Config is what a Handler is built from.
type Config struct {
	Service service.Service
	Log     *slog.Logger
	// MaxFrameBytes is network.max_frame_bytes, named in the answer to a
	// frame over it.
	MaxFrameBytes int
	// Group and OwnerShard move a connection to the shard its requests
	// go to (frontend.Mover); OwnerShard is the shard owning a partition,
	// -1 when the topic or partition is unknown.
	Group      *shard.Group
	OwnerShard func(topic string, p int32) int
	// Migrations counts the connections moved.
	Migrations *atomic.Uint64
	// CrossShard counts data requests served by a shard other than the
	// connection's (two thread hand-offs each); nil counts nothing.
	CrossShard *atomic.Uint64
	// Auth, when set, requires every connection to authenticate
	// (auth.go); nil serves every connection as the anonymous superuser
	// (security.auth = none).
	Auth *Auth
}

// Handler serves the native client protocol on a netio.Server.
type Handler struct {
	svc           service.Service
	log           *slog.Logger
	maxFrameBytes int
	mover         *frontend.Mover
	auth          *Auth
}

// New builds a handler. REQUIRES: every field of cfg set but CrossShard.
func New(cfg Config) *Handler {
	mover := frontend.NewMover(frontend.Config{Group: cfg.Group, OwnerShard: cfg.OwnerShard, Migrations: cfg.Migrations,
		CrossShard: cfg.CrossShard})
	return &Handler{svc: cfg.Service, log: cfg.Log, maxFrameBytes: cfg.MaxFrameBytes, mover: mover, auth: cfg.Auth}
}

// connState is one client connection's protocol state.
type connState struct {
	// handshaken says the Handshake came first, as the protocol requires.
	handshaken bool
	protocol   uint16
	// clientID is the handshake's, shown by DescribeGroup.
	clientID string
	// homing is the connection's way toward the shard its data requests
	// go to (frontend.Mover).
	homing frontend.Homing
	// svc is the service as the authenticated user may call it (nil:
	// not authenticated, or authentication is off); conv is the SCRAM
	// exchange in progress (nil: none).
	svc  service.Service
	conv *scram.ServerConversation
}

// OnOpen gives a new connection its protocol state.
func (h *Handler) OnOpen(c *netio.Conn) error {
	c.SetContext(&connState{})
	return nil
}

// OnClose logs a connection that ended with an error.
func (h *Handler) OnClose(c *netio.Conn, err error) {
	if err != nil && !errors.Is(err, netio.ErrClosed) {
		h.log.Debug("connection closed", "remote", c.RemoteAddr(), "err", err)
	}
}

// OnFrameTooLarge answers with MESSAGE_TOO_LARGE when the request header
// arrived with the length; the server then closes the connection.
// (netio logs the connection's close, once.)
func (h *Handler) OnFrameTooLarge(c *netio.Conn, size uint32, head []byte) {
	hdr, _, err := wire.ParseRequestHeader(head)
	if err != nil {
		return
	}
	e := wire.Errorf(wire.ErrMessageTooLarge, "request frame of %d bytes exceeds network.max_frame_bytes %d; closing the connection",
		size, h.maxFrameBytes)
	c.Send(netio.Response{Header: wire.AppendErrorResponse(nil, hdr.CorrelationID, e)})
}

// OnFrame decodes the request header and dispatches by API.
func (h *Handler) OnFrame(c *netio.Conn, body []byte) {
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
	if err := h.requireAuth(st, hdr.APIKey); err != nil {
		replyErr(c, hdr, err)
		return
	}
	switch hdr.APIKey {
	case wire.APIHandshake:
		h.handshake(c, st, hdr, req)
	case wire.APIAuthenticate:
		h.authenticate(c, st, hdr, req)
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
	case wire.APIFindCoordinator, wire.APIJoinGroup, wire.APISyncGroup, wire.APIHeartbeat, wire.APILeaveGroup,
		wire.APICommitGroupOffsets, wire.APIFetchGroupOffsets, wire.APIListGroups, wire.APIDescribeGroup,
		wire.APIDeleteGroup, wire.APIDeleteGroupOffsets:
		h.groups(c, hdr, req)
	case wire.APIHome:
		h.home(c, st, hdr, req)
	case wire.APICreateTopic, wire.APIDeleteTopic, wire.APIAddPartitions, wire.APICommitOffsets,
		wire.APIFetchOffsets, wire.APIMovePrimary, wire.APIRebalance, wire.APIReassign, wire.APIChangeRoster:
		h.admin(c, hdr, req)
	default:
		replyErr(c, hdr, wire.Errorf(wire.ErrUnsupportedVersion, "API %d is not served by this node", hdr.APIKey))
	}
}

func (h *Handler) handshake(c *netio.Conn, st *connState, hdr wire.RequestHeader, body []byte) {
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
	st.handshaken, st.protocol, st.clientID = true, v, req.ClientID
	id := h.svc.Identity()
	resp := wire.ServerHandshake(v, id.NodeID, id.ClusterID, id.Version, uint32(h.maxFrameBytes))
	reply(c, hdr, resp)
}

// reply sends a successful response.
func reply(c *netio.Conn, hdr wire.RequestHeader, resp wire.Response) {
	c.Reply(netio.Response{Header: wire.AppendResponse(nil, hdr.CorrelationID, hdr.APIVersion, resp)})
}

// replyErr sends an error response: a service error gets its native code
// from the one table (Error).
func replyErr(c *netio.Conn, hdr wire.RequestHeader, err error) {
	c.Reply(netio.Response{Header: wire.AppendErrorResponse(nil, hdr.CorrelationID, wirecode.Error(err))})
}

// msDuration is a timeout of the protocol, in ms, as a duration.
func msDuration(ms uint32) time.Duration { return time.Duration(ms) * time.Millisecond }
