// Package httpapi is the HTTP API's front end (docs/http.md): JSON in and
// out, strict parsing, one error shape named by the native wire codes, and
// one-hop forwarding to the node that must serve a request. Every handler
// calls the typed service (cluster/service), as the native protocol does;
// it builds no frames and reads no files. Handlers run on net/http's
// goroutines and call the service with no shard (from nil), waiting for
// the completion (await).
package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corestream/corestream/cluster/forward"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The HTTP API (docs/http.md). Every node serves it. A request about a
// partition runs on the partition's primary and a request that changes
// metadata on the metadata primary: a node that is not the right one
// forwards the request there in one hop, signed with a proof
// (cluster/forward) that expires after 10 s; a forwarded request is never
// forwarded again. The handlers call the typed service (cluster/service),
// the same calls the binary protocol makes, and turn its results into
// JSON; they hold no *Node.

// Bounds of the HTTP API (BodyBytesMax and httpRecordsMax are with
// the parsing and the records).
const (
	// httpForwardTimeout bounds one forwarded request, including a
	// fetch's long poll (at most wire.FetchWaitMsMax).
	httpForwardTimeout = 30*time.Second + wire.FetchWaitMsMax*time.Millisecond
	// httpReadHeaderTimeout bounds the wait for a request's headers, so a
	// client that stops mid-request does not hold a connection forever.
	httpReadHeaderTimeout = 10 * time.Second
	// httpIdleTimeout closes keep-alive connections idle this long.
	httpIdleTimeout = 2 * time.Minute
	// httpBodyTimeout bounds the read of a request body once its headers
	// are in: 16 MiB at about 0.5 MiB/s.
	httpBodyTimeout = 30 * time.Second
)

// API is the HTTP API of one node.
type API struct {
	svc service.Service
	// self is this node's id; jwtSecret signs and verifies forwarded
	// requests ("" : this node forwards nothing).
	self      int32
	jwtSecret string
	// httpAddrs is node id's advertised HTTP address ("" when the roster
	// has none).
	httpAddrs func(id int32) string
	srv       *http.Server
	ln        net.Listener
	mux       *http.ServeMux
	client    *http.Client
	// bodyTimeout is httpBodyTimeout; tests shorten it.
	bodyTimeout time.Duration
	// auth is nil when security.auth is none (auth.go); users serves the
	// user routes (users.go), nil: none.
	auth  *Auth
	users service.Users
	// replays refuses a forwarding proof used twice.
	replays forward.Replays
	// scheme is how this node calls the others ("https" with TLS).
	scheme string
	// stats are this node's traffic figures (nil: all 0).
	stats func() Stats
	// groups serves the groups routes (groups.go); nil: none.
	groups GroupsSource
	// history is this node's samples for GET /v1/history (history.go);
	// nil: none.
	history HistorySource
}

// httpMethods are the methods any route serves; an unknown path or
// method is answered from them (notRouted).
var httpMethods = []string{http.MethodGet, http.MethodPost, http.MethodDelete}

// Config is what an API is built from.
type Config struct {
	Service service.Service
	// Self is this node's id.
	Self int32
	// JWTSecret signs and verifies forwarded requests (http.jwt_secret);
	// "" forwards nothing: the answer names the right node instead.
	JWTSecret string
	// HTTPAddrOf is a node's advertised HTTP address ("" when the roster
	// has none).
	HTTPAddrOf func(id int32) string
	// Metrics serves GET /metrics (nil: no such route).
	Metrics http.Handler
	// Stats are this node's traffic figures for GET /v1/stats (nil: all
	// 0).
	Stats func() Stats
	// History is this node's samples for GET /v1/history and the
	// console's charts (nil: none).
	History HistorySource
	// BodyTimeout bounds the read of a request body once its headers are
	// in; 0 is httpBodyTimeout (30 s).
	BodyTimeout time.Duration
	// Auth, when set, requires a login token on every request but
	// health, metrics and login (auth.go); nil: security.auth = none.
	Auth *Auth
	// Users serves the user routes (users.go); nil: no such routes.
	Users service.Users
	// Groups serves the consumer groups routes (groups.go); nil: no
	// such routes.
	Groups GroupsSource
	// TLS, when set, serves HTTPS (security.tls_cert_file), and
	// ClientTLS is how this node calls the others then (every node of a
	// cluster serves HTTPS or none does).
	TLS, ClientTLS *tls.Config
}

// New builds the router and the server on ln; Serve runs it.
func New(cfg Config, ln net.Listener) *API {
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = httpBodyTimeout
	}
	h := &API{svc: cfg.Service, self: cfg.Self, jwtSecret: cfg.JWTSecret, httpAddrs: cfg.HTTPAddrOf,
		ln: ln, mux: http.NewServeMux(), client: &http.Client{Timeout: httpForwardTimeout}, bodyTimeout: cfg.BodyTimeout,
		auth: cfg.Auth, users: cfg.Users, stats: cfg.Stats, history: cfg.History}
	h.mux.HandleFunc("GET /v1/health", h.health)
	h.mux.HandleFunc("GET /v1/cluster", h.cluster)
	h.mux.HandleFunc("GET /v1/cluster/nodes", h.listNodes)
	h.mux.HandleFunc("POST /v1/cluster/nodes", h.addNode)
	h.mux.HandleFunc("DELETE /v1/cluster/nodes/{id}", h.removeNode)
	h.mux.HandleFunc("GET /v1/topics", h.listTopics)
	h.mux.HandleFunc("POST /v1/topics", h.createTopic)
	h.mux.HandleFunc("GET /v1/topics/{topic}", h.describeTopic)
	h.mux.HandleFunc("DELETE /v1/topics/{topic}", h.deleteTopic)
	h.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{partition}/records", h.produce)
	h.mux.HandleFunc("GET /v1/topics/{topic}/partitions/{partition}/records", h.fetch)
	h.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{partition}/primary", h.movePrimary)
	h.mux.HandleFunc("GET /v1/partitions", h.listPartitions)
	h.mux.HandleFunc("POST /v1/partitions/log", h.partitionsLog)
	h.mux.HandleFunc("POST /v1/rebalance", h.rebalance)
	h.mux.HandleFunc("GET /v1/stats", h.nodeStats)
	h.mux.HandleFunc("GET /v1/cluster/stats", h.clusterStats)
	h.mux.HandleFunc("GET /v1/history", h.nodeHistory)
	h.mux.HandleFunc("GET /v1/cluster/history", h.clusterHistory)
	// The console (console.go): a page and its assets, embedded.
	h.mux.HandleFunc("GET /{$}", h.consolePage)
	h.mux.Handle("GET /console/", h.consoleAssets())
	if cfg.Metrics != nil {
		h.mux.Handle("GET /metrics", cfg.Metrics)
	}
	h.mux.HandleFunc("POST /v1/login", h.login)
	h.registerUsers()
	h.registerGroups(cfg.Groups)
	h.registerReassign()
	// Everything else: ServeMux would answer 404 and 405 in plain text.
	h.mux.HandleFunc("/", h.notRouted)
	h.scheme = "http"
	if cfg.TLS != nil {
		h.scheme = "https"
		h.client.Transport = &http.Transport{TLSClientConfig: cfg.ClientTLS}
	}
	h.srv = &http.Server{Handler: h.authenticated(h.mux), TLSConfig: cfg.TLS, ReadHeaderTimeout: httpReadHeaderTimeout, IdleTimeout: httpIdleTimeout}
	return h
}

// Serve serves requests on the listener until Stop; it returns at once.
func (h *API) Serve() {
	if h.srv.TLSConfig != nil {
		go h.srv.ServeTLS(h.ln, "", "")
		return
	}
	go h.srv.Serve(h.ln)
}

// Addr is the address the API's listener bound.
func (h *API) Addr() string { return h.ln.Addr().String() }

// Stop stops accepting and waits, within ctx, for requests in flight.
func (h *API) Stop(ctx context.Context) error { return h.srv.Shutdown(ctx) }

// Close closes the listener and every connection at once.
func (h *API) Close() error { return h.srv.Close() }

// notRouted answers a request no route took: 405 with Allow when the
// path has routes for other methods, else 404. Both are JSON errors.
func (h *API) notRouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range httpMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host}
		if _, pattern := h.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		h.fail(w, &httpStatusError{status: http.StatusNotFound,
			err: wire.Errorf(wire.ErrInvalidRequest, "no route %s; the routes are listed in docs/http.md", r.URL.Path)})
		return
	}
	if slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	h.fail(w, &httpStatusError{status: http.StatusMethodNotAllowed, allow: strings.Join(allow, ", "),
		err: wire.Errorf(wire.ErrInvalidRequest, "%s does not serve %s (it serves %s)", r.URL.Path, r.Method, strings.Join(allow, ", "))})
}

// route decides where r runs: here (true), or it has been forwarded (or
// refused) and answered (false). target is the node that must serve it
// (-1 when none is known); notHere is the error when this node is not it
// (NOT_PRIMARY or NOT_METADATA_PRIMARY).
func (h *API) route(w http.ResponseWriter, r *http.Request, body []byte, target int32, notHere *wire.Error) bool {
	self := h.self
	role := "the partition's primary"
	if notHere == wire.ErrNotMetadataPrimary {
		role = "the metadata primary"
	}
	if proof := r.Header.Get(forward.Header); proof != "" {
		from, err := h.replays.Verify([]byte(h.jwtSecret), proof,
			forward.Request{Method: r.Method, PathQuery: r.URL.RequestURI(), Body: body, To: self}, time.Now())
		if err != nil {
			h.fail(w, &httpStatusError{status: http.StatusUnauthorized,
				err: wire.Errorf(wire.ErrInvalidRequest, "the %s header does not verify: %v", forward.Header, err)})
			return false
		}
		if target != self {
			h.fail(w, notThere(notHere, target, fmt.Sprintf("forwarded by node %d, but node %d is not %s (%s); a forwarded request is not forwarded again",
				from, self, role, knownPrimary(target))))
			return false
		}
		return true
	}
	if target == self {
		return true
	}
	addr := h.httpAddrs(target)
	switch {
	case target <= 0:
		h.fail(w, wire.Errorf(wire.ErrPrimaryNotAvailable, "no node is %s right now (an election, or too few nodes reachable); retry shortly", role))
		return false
	case addr == "":
		h.fail(w, notThere(notHere, target, fmt.Sprintf("node %d is not %s; node %d is, and has no http_addr in the roster", self, role, target)))
		return false
	case h.jwtSecret == "":
		h.fail(w, notThere(notHere, target, fmt.Sprintf("node %d is not %s; node %d is (forwarding needs http.jwt_secret): send to %s", self, role, target, addr)))
		return false
	}
	h.forward(w, r, body, target, addr)
	return false
}

// onMetadataPrimary is route for a change that runs on the metadata
// primary (topics, users, operator actions). The route is read from
// h.svc: the caller's guarded view passes MetadataRoute through
// unchecked, so it would answer the same.
func (h *API) onMetadataPrimary(w http.ResponseWriter, r *http.Request, body []byte) bool {
	lead, _ := h.svc.MetadataRoute()
	return h.route(w, r, body, lead, wire.ErrNotMetadataPrimary)
}

// requestBody refuses any query parameter, then reads the body within
// the body timeout (readBody); the bytes are kept for a forward, which
// sends them as they came.
func (h *API) requestBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := checkQuery(r.URL.Query()); err != nil {
		return nil, err
	}
	return readBody(w, r, h.bodyTimeout)
}

// readJSON is requestBody then decodeBody into in (a pointer to the
// route's body struct). It answers the first error itself and returns
// false; true means in is filled and body may be forwarded.
func (h *API) readJSON(w http.ResponseWriter, r *http.Request, in any) (body []byte, ok bool) {
	body, err := h.requestBody(w, r)
	if err == nil {
		err = decodeBody(body, in)
	}
	if err != nil {
		h.fail(w, err)
		return nil, false
	}
	return body, true
}

// notThere is the error for a request that must run on target.
func notThere(code *wire.Error, target int32, msg string) error {
	e := wire.Errorf(code, "%s", msg)
	e.Hint = &wire.Hint{NodeID: target, Generation: -1}
	return e
}

// knownPrimary says which node is the right one, for a message.
func knownPrimary(target int32) string {
	if target <= 0 {
		return "no primary is known"
	}
	return fmt.Sprintf("node %d is", target)
}

// forward sends r to node target once, with a signed proof, and copies
// the answer back, whatever it is: the target answers errors in the same
// JSON shape.
func (h *API) forward(w http.ResponseWriter, r *http.Request, body []byte, target int32, addr string) {
	proof, err := forward.Sign([]byte(h.jwtSecret),
		forward.Request{Method: r.Method, PathQuery: r.URL.RequestURI(), Body: body, From: h.self, To: target}, time.Now())
	if err != nil {
		h.fail(w, err)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, h.schemeOf()+"://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		h.fail(w, err)
		return
	}
	req.Header.Set(forward.Header, proof)
	if ct := r.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	// The target checks the caller's token again (auth.go).
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		e := wire.Errorf(wire.ErrNodeNotAvailable, "forwarding to node %d at %s: %v", target, addr, err)
		e.Hint = &wire.Hint{NodeID: target, Generation: -1}
		h.fail(w, &httpStatusError{status: http.StatusBadGateway, err: e})
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("X-Corestream-Served-By", strconv.Itoa(int(target)))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// await calls a service call that answers through a completion, from
// this goroutine (no shard: the completion runs on the serving shard and
// must not block), and waits for the answer.
func await[R any](call func(done func(R, error))) (R, error) {
	type answer struct {
		v   R
		err error
	}
	out := make(chan answer, 1)
	call(func(v R, err error) { out <- answer{v, err} })
	a := <-out
	return a.v, a.err
}

// schemeOf is how this node calls the others: "https" with TLS, else
// "http" (also for an API built without New, as tests do).
func (h *API) schemeOf() string {
	if h.scheme == "" {
		return "http"
	}
	return h.scheme
}
