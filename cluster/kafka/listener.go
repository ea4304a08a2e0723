package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/frontend"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// ErrUnknownAPI is the reason a connection that sent a request with an API
// key Kafka does not define is closed (as a Kafka broker closes it).
var ErrUnknownAPI = errors.New("kafka: unknown API key")

// ErrMalformedRequest is the reason a connection whose request body does
// not parse for its key and version is closed (as a Kafka broker does).
var ErrMalformedRequest = errors.New("kafka: malformed request")

// ErrUnsupportedAPI is the reason a connection is closed after a request
// this listener does not serve (not listed by ApiVersions) whose
// response has no top-level error code to say so.
var ErrUnsupportedAPI = errors.New("kafka: API not served")

// ErrSASLFailed is the reason a connection is closed when authentication
// fails in the raw token exchange after a v0 SaslHandshake, which has no
// field to carry an error (as a Kafka broker closes it).
var ErrSASLFailed = errors.New("kafka: SASL authentication failed")

// Listener serves Kafka's protocol on netio connections: it is the
// netio.Handler of the node's Kafka port. Every method runs on the shard
// that owns the connection. It calls the node's typed service and
// nothing else.
type Listener struct {
	svc service.Service
	cfg Config
	// sessionIDs numbers fetch sessions (session.go); shared by the
	// views of authenticated users (sasl.go), as is names.
	sessionIDs *atomic.Uint32
	// names maps topic ids to names (topicids.go); shared by the views.
	names *topicNames
	// users are the user calls as this view's principal may make them
	// (service.GuardUsers); nil when the node gave none.
	users service.Users
}

// Config is what the listener needs besides the service.
type Config struct {
	// MaxFrameBytes is the server's frame limit, logged with a larger
	// request.
	MaxFrameBytes int
	// Log receives connection-level events at debug level.
	Log *slog.Logger
	// Auth, when set, requires SASL authentication (sasl.go); nil:
	// security.auth = none.
	Auth *Auth
	// NodeID is this node's id, the broker resource DescribeConfigs
	// answers for; BrokerConfigs are its configs under Kafka's names, in
	// order, as DescribeConfigs lists them (read-only: a node's
	// configuration is its file).
	NodeID        int32
	BrokerConfigs []BrokerConfig
	// AutoCreatePartitions, when above 0, creates a topic a Metadata
	// request names and allows to be created (cluster.auto_create_topics)
	// with this many partitions and the cluster's default factor; 0: off.
	AutoCreatePartitions int32
	// Mover moves a connection whose produce and fetch requests all go to
	// partitions of one other shard onto that shard, and counts the moves
	// and the calls served across shards (frontend.Mover, shared with the
	// native front end). Nil: connections stay where they were accepted.
	Mover *frontend.Mover
	// Users are the cluster's users, which the SCRAM credential and ACL
	// APIs read and change (scramcredentials.go, acls.go); with Auth, each
	// connection calls them as its user (service.GuardUsers). Nil: those
	// APIs answer as a broker without them (acls.go).
	Users service.Users
}

// New returns a listener that answers through svc.
func New(svc service.Service, cfg Config) *Listener {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Listener{svc: svc, cfg: cfg, sessionIDs: new(atomic.Uint32), names: &topicNames{}, users: cfg.Users}
}

// conn is one connection's state. Kafka clients match responses to
// requests by order, not only by correlation id (franz-go, librdkafka
// and the Java client read the next response as the answer to their
// oldest request), so answers that complete out of order (partitions on
// other shards) wait here until every earlier one was sent.
type conn struct {
	// next is the sequence number of the next request; sent the number
	// of the next answer to send. Invariant: sent <= next.
	next, sent uint64
	// ready holds answers to requests after sent, by sequence number;
	// at most netio's in-flight bound per connection.
	ready map[uint64]answer
	// session is the connection's incremental fetch session, nil when
	// none (session.go).
	session *fetchSession
	// sasl is the connection's authentication (sasl.go).
	sasl saslState
	// closed is set once the connection closed: answers that complete
	// later are dropped, not kept in ready.
	closed bool
	// homing is the connection's way toward the shard its produce and
	// fetch requests go to (Config.Mover).
	homing frontend.Homing
	// keys are the API keys of the latest requests by sequence number
	// modulo their length: when a close times out, the log names the
	// request the answers waited on.
	keys [keysRing]int16
}

// keysRing is how many requests' API keys a connection remembers.
const keysRing = 64

// answer is a response frame, or pieces of one (a fetch answer whose
// records are sent from files, fetchfiles.go), or none (a produce with
// acks 0).
type answer struct {
	frame   []byte
	pieces  []netio.Response
	noReply bool
	// drop releases what pieces hold when the answer is never sent.
	drop func()
}

// OnOpen implements netio.Handler.
func (l *Listener) OnOpen(c *netio.Conn) error {
	c.SetContext(&conn{ready: map[uint64]answer{}})
	return nil
}

// OnClose implements netio.Handler.
func (l *Listener) OnClose(c *netio.Conn, err error) {
	if st, ok := c.Context().(*conn); ok {
		st.closed = true
		for seq, a := range st.ready {
			a.dropped()
			delete(st.ready, seq)
		}
	}
	if st, ok := c.Context().(*conn); ok && (errors.Is(err, netio.ErrCloseTimeout) || errors.Is(err, netio.ErrServerClosed)) && st.next > st.sent {
		// A graceful close (a stop) waited for an answer that did not
		// come, until its bound or the stop's deadline: name the request
		// it waited on.
		waited := "unknown"
		if st.next-st.sent <= keysRing {
			waited = kmsg.NameForKey(st.keys[st.sent%keysRing])
		}
		l.cfg.Log.Warn("kafka connection closed with requests unanswered", "remote", c.RemoteAddr(),
			"unanswered", st.next-st.sent, "waiting_on", waited)
		return
	}
	if err != nil && !errors.Is(err, netio.ErrClosed) {
		l.cfg.Log.Debug("kafka connection closed", "remote", c.RemoteAddr(), "err", err)
	}
}

// OnFrameTooLarge implements netio.Handler. Kafka has no response to a
// request it did not read: a broker closes the connection, and so do we
// (netio closes it and logs why).
func (l *Listener) OnFrameTooLarge(c *netio.Conn, size uint32, head []byte) {
	l.cfg.Log.Debug("kafka request too large; closing", "remote", c.RemoteAddr(), "bytes", size, "max", l.cfg.MaxFrameBytes)
}

// deliver sends the answer to request seq once every earlier answer was
// sent.
func (st *conn) deliver(c *netio.Conn, seq uint64, a answer) {
	if seq != st.sent {
		if st.closed {
			a.dropped()
			return
		}
		st.ready[seq] = a
		return
	}
	for {
		switch {
		case a.noReply:
			c.Release()
		case a.pieces != nil:
			// Queued in one go: nothing else comes between the pieces.
			last := len(a.pieces) - 1
			for _, p := range a.pieces[:last] {
				c.Send(p)
			}
			c.Reply(a.pieces[last])
		default:
			c.Reply(netio.Response{Header: a.frame})
		}
		st.sent++
		var ok bool
		if a, ok = st.ready[st.sent]; !ok {
			return
		}
		delete(st.ready, st.sent)
	}
}

// dropped releases what an answer that is never sent holds.
func (a answer) dropped() {
	if a.drop != nil {
		a.drop()
	}
}

// OnFrame implements netio.Handler: it reads the request header and
// dispatches by API key.
func (l *Listener) OnFrame(c *netio.Conn, frame []byte) {
	if st := c.Context().(*conn); st.sasl.raw {
		seq := st.next
		st.next++
		l.rawToken(c, st, seq, frame)
		return
	}
	h, req, body, err := parseHeader(frame)
	if err != nil {
		c.Release()
		c.Abort(err)
		return
	}
	st := c.Context().(*conn)
	seq := st.next
	st.next++
	st.keys[seq%keysRing] = h.Key
	reply := func(resp kmsg.Response) { st.deliver(c, seq, answer{frame: encodeResponse(h, resp)}) }
	if req == nil {
		l.refuse(c, st, seq, fmt.Errorf("%w %d (version %d, client %q)", ErrUnknownAPI, h.Key, h.Version, h.ClientID))
		return
	}
	min, max, ok := versionRange(h.Key)
	if h.Key == apiVersionsKey && (h.Version < min || h.Version > max) {
		// KIP-511: answer with version 0 and our versions, so the client
		// can pick one.
		v0 := h
		v0.Version = 0
		st.deliver(c, seq, answer{frame: encodeResponse(v0, apiVersionsResponse(kerr.UnsupportedVersion.Code))})
		return
	}
	if !ok || h.Version < min || h.Version > max {
		why := fmt.Sprintf("%s v%d is not served (ApiVersions lists what is)", kmsg.NameForKey(h.Key), h.Version)
		if resp := errorResponse(req, kerr.UnsupportedVersion.Code); resp != nil {
			reply(resp)
			return
		}
		l.refuse(c, st, seq, fmt.Errorf("%w: %s", ErrUnsupportedAPI, why))
		return
	}
	// The body is decoded in place: the frame aliases the read buffer,
	// valid until OnFrame returns. kmsg copies strings; the byte fields
	// it aliases (a produce's record batches) are used only before
	// OnFrame returns (the service copies a batch it serves on another
	// shard before Produce returns), unless the log retained the read
	// buffer to write a batch from it (produce.go, frontend.Lend).
	if err := req.ReadFrom(body); err != nil {
		l.refuse(c, st, seq, fmt.Errorf("%w: %s v%d: %v", ErrMalformedRequest, kmsg.NameForKey(h.Key), h.Version, err))
		return
	}
	as := l.forConn(st)
	if as == nil && !saslOpen(h.Key) {
		why := fmt.Sprintf("%s before SASL authentication: this node requires it (security.auth = scram)", kmsg.NameForKey(h.Key))
		if resp := errorResponse(req, kerr.SaslAuthenticationFailed.Code); resp != nil {
			l.cfg.Log.Debug("kafka request refused", "remote", c.RemoteAddr(), "why", why)
			reply(resp)
			return
		}
		l.refuse(c, st, seq, fmt.Errorf("%w: %s", ErrUnsupportedAPI, why))
		return
	}
	if as == nil {
		as = l
	}
	as.serve(c, h, req, reply, func(a answer) { st.deliver(c, seq, a) })
}

// refuse closes the connection for a request it cannot answer, after the
// answers to earlier requests (a Kafka broker closes such connections).
func (l *Listener) refuse(c *netio.Conn, st *conn, seq uint64, why error) {
	l.cfg.Log.Debug("kafka request refused; closing the connection", "remote", c.RemoteAddr(), "err", why)
	st.deliver(c, seq, answer{noReply: true})
	c.Close()
}

// errorResponse is req's response with its top-level error code set to
// code, or nil when the response has none at req's version (or kmsg
// cannot encode the version). A field kmsg has but the version does not
// carry would leave the client an empty answer: the response is encoded
// with and without the code, and must differ.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	if req.GetVersion() > req.MaxVersion() || req.GetVersion() < 0 {
		return nil
	}
	resp := req.ResponseKind()
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		return nil
	}
	without := resp.AppendTo(nil)
	f.SetInt(int64(code))
	if string(resp.AppendTo(nil)) == string(without) {
		return nil
	}
	return resp
}

// serve dispatches a decoded request. reply sends its response (once);
// send sends an answer already encoded (once, instead of reply), or none
// (acks 0).
func (l *Listener) serve(c *netio.Conn, h RequestHeader, req kmsg.Request, reply func(kmsg.Response), send func(answer)) {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		reply(apiVersionsResponse(0))
	case *kmsg.SASLHandshakeRequest:
		reply(l.saslHandshake(c.Context().(*conn), r))
	case *kmsg.SASLAuthenticateRequest:
		reply(l.saslAuthenticate(c, c.Context().(*conn), r))
	case *kmsg.MetadataRequest:
		reply(l.metadata(c, r))
	case *kmsg.DescribeConfigsRequest:
		reply(l.describeConfigs(r))
	case *kmsg.IncrementalAlterConfigsRequest:
		l.incrementalAlterConfigs(c, r, reply)
	case *kmsg.AlterConfigsRequest:
		l.alterConfigsLegacy(c, r, reply)
	case *kmsg.DescribeClusterRequest:
		reply(l.describeCluster(r))
	case *kmsg.DescribeLogDirsRequest:
		l.describeLogDirs(c, r, reply)
	case *kmsg.DescribeTopicPartitionsRequest:
		reply(l.describeTopicPartitions(r))
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		reply(l.describeUserScramCredentials(r))
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		l.alterUserScramCredentials(c, r, reply)
	case *kmsg.DescribeACLsRequest:
		reply(l.describeACLs(r))
	case *kmsg.CreateACLsRequest:
		l.createACLs(c, r, reply)
	case *kmsg.DeleteACLsRequest:
		l.deleteACLs(c, r, reply)
	case *kmsg.ElectLeadersRequest:
		l.electLeaders(c, r, reply)
	case *kmsg.AlterPartitionAssignmentsRequest:
		l.alterPartitionAssignments(c, r, reply)
	case *kmsg.ListPartitionReassignmentsRequest:
		l.listPartitionReassignments(c, r, reply)
	case *kmsg.ProduceRequest:
		l.produce(c, r, reply, func() { send(answer{noReply: true}) })
	case *kmsg.FetchRequest:
		l.fetch(c, h, r, send)
	case *kmsg.ListOffsetsRequest:
		l.listOffsets(c, r, reply)
	case *kmsg.DescribeProducersRequest:
		l.describeProducers(c, r, reply)
	case *kmsg.DeleteRecordsRequest:
		l.deleteRecords(c, r, reply)
	case *kmsg.InitProducerIDRequest:
		l.initProducerID(c, r, reply)
	case *kmsg.OffsetForLeaderEpochRequest:
		l.offsetForLeaderEpoch(c, r, reply)
	case *kmsg.CreateTopicsRequest:
		l.createTopics(c, r, reply)
	case *kmsg.DeleteTopicsRequest:
		l.deleteTopics(c, r, reply)
	case *kmsg.CreatePartitionsRequest:
		l.createPartitions(c, r, reply)
	case *kmsg.FindCoordinatorRequest:
		reply(l.findCoordinator(r))
	case *kmsg.JoinGroupRequest:
		l.joinGroup(c, h.ClientID, r, reply)
	case *kmsg.SyncGroupRequest:
		l.syncGroup(c, r, reply)
	case *kmsg.HeartbeatRequest:
		l.heartbeat(c, r, reply)
	case *kmsg.LeaveGroupRequest:
		l.leaveGroup(c, r, reply)
	case *kmsg.OffsetCommitRequest:
		l.offsetCommit(c, r, reply)
	case *kmsg.OffsetFetchRequest:
		l.offsetFetch(c, r, reply)
	case *kmsg.ListGroupsRequest:
		l.listGroups(c, r, reply)
	case *kmsg.DescribeGroupsRequest:
		l.describeGroups(c, r, reply)
	case *kmsg.DeleteGroupsRequest:
		l.deleteGroups(c, r, reply)
	case *kmsg.OffsetDeleteRequest:
		l.offsetDelete(c, r, reply)
	case *kmsg.AddPartitionsToTxnRequest:
		l.addPartitionsToTxn(c, r, reply)
	case *kmsg.AddOffsetsToTxnRequest:
		l.addOffsetsToTxn(c, r, reply)
	case *kmsg.EndTxnRequest:
		l.endTxn(c, r, reply)
	case *kmsg.TxnOffsetCommitRequest:
		l.txnOffsetCommit(c, r, reply)
	case *kmsg.DescribeTransactionsRequest:
		l.describeTransactions(c, r, reply)
	case *kmsg.ListTransactionsRequest:
		l.listTransactions(c, r, reply)
	default:
		// versionRange listed a key serve does not handle: a bug here.
		panic(fmt.Sprintf("kafka: %s is listed as supported but has no handler", kmsg.NameForKey(h.Key)))
	}
}
