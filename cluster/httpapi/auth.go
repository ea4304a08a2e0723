package httpapi

import (
	"context"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// Authentication of the HTTP API (docs/security.md). With Config.Auth
// set, every request but GET /v1/health, GET /metrics and POST /v1/login
// carries "Authorization: Bearer TOKEN", a login token that
// POST /v1/login issued (security.IssueToken) on any node of the
// cluster; the handlers then call the service through service.Guard of
// the token's user (svcOf). A token is refused once it expires, or when
// its user was deleted or changed password since it was issued. A
// request forwarded to another node carries its Authorization header
// along, and the target checks it again.

// Auth configures the HTTP API's authentication.
type Auth struct {
	// Users reads the committed users.
	Users service.Users
	// Limiter refuses addresses with too many recent failures; shared
	// with the other listeners.
	Limiter *security.Limiter
	// TokenTTL is security.token_ttl_ms.
	TokenTTL time.Duration
	// Now is the node's clock.
	Now func() time.Time
}

// callerKey keys the request's caller in its context.
type callerKey struct{}

// caller is the service and the user calls as the request's user may
// call them, and the Authorization header that proved it (for the
// requests this node makes to others on the caller's behalf).
type caller struct {
	svc           service.Service
	users         service.Users
	authorization string
}

// svcOf is the service as r's caller may call it.
func (h *API) svcOf(r *http.Request) service.Service { return h.svcCtx(r.Context()) }

// svcCtx is the service as the caller of the request whose context ctx
// is (or derives from) may call it.
func (h *API) svcCtx(ctx context.Context) service.Service {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok {
		return c.svc
	}
	return h.svc
}

// onBehalf gives req, a request this node makes to another node while
// serving one (cluster stats, partition logs), the caller's
// Authorization, so the other node checks the caller's permissions.
func onBehalf(ctx context.Context, req *http.Request) {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok && c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
	}
}

// usersOf is the user calls as r's caller may call them.
func (h *API) usersOf(r *http.Request) service.Users {
	if c, ok := r.Context().Value(callerKey{}).(*caller); ok {
		return c.users
	}
	return h.users
}

// openPaths need no token: health, metrics, login and the console's
// static page (its assets are under openPrefix; what it shows comes from
// routes that need a token).
var openPaths = map[string]bool{"GET /v1/health": true, "GET /metrics": true, "POST /v1/login": true, "GET /": true}

const openPrefix = "GET /console/"

// authenticated wraps next with the bearer check (the middleware hook:
// next is the router).
func (h *API) authenticated(next http.Handler) http.Handler {
	if h.auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route := r.Method + " " + r.URL.Path; openPaths[route] || strings.HasPrefix(route, openPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		u, err := h.bearer(r)
		if err != nil {
			h.fail(w, err)
			return
		}
		p := security.Principal{User: u.Name, Superuser: u.Superuser}
		c := &caller{svc: service.Guard(h.svc, h.auth.Users, p), authorization: r.Header.Get("Authorization")}
		if h.users != nil {
			c.users = service.GuardUsers(h.users, p)
		}
		ctx := context.WithValue(r.Context(), callerKey{}, c)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bearer is the user r's token names, or AUTHENTICATION_FAILED saying
// why not. A bad token counts as a failed login of the address.
func (h *API) bearer(r *http.Request) (*metadata.User, error) {
	a := h.auth
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return nil, wire.Errorf(wire.ErrAuthenticationFailed, "this node requires authentication: send \"Authorization: Bearer TOKEN\" with a token from POST /v1/login")
	}
	name, gen, err := security.VerifyToken([]byte(h.jwtSecret), tok, a.Now())
	if err != nil {
		// Counted against the address's logins; a valid token is
		// served even from a limited address (guessing a signature is
		// not what the limit is for, and a user must not be locked out
		// by another caller at a shared address).
		a.Limiter.Fail(remoteHost(r), a.Now())
		return nil, wire.Errorf(wire.ErrAuthenticationFailed, "the bearer token is refused: %v", err)
	}
	u, err := a.Users.User(name)
	if err != nil {
		return nil, err
	}
	if u == nil || u.Generation != gen {
		return nil, wire.Errorf(wire.ErrAuthenticationFailed, "the bearer token of %s is no longer valid: the user was deleted or changed password since it was issued; log in again", name)
	}
	return u, nil
}

// loginBody is POST /v1/login's body.
type loginBody struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// loginAnswer is the token issued.
type loginAnswer struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
	User      string `json:"user"`
}

func (loginAnswer) httpAnswer() {}

// login checks a username and password against the user's stored
// credential and issues a token. The password travels in the request
// body: use it over TLS or on a trusted network (docs/security.md).
func (h *API) login(w http.ResponseWriter, r *http.Request) {
	if h.auth == nil {
		h.fail(w, wire.Errorf(wire.ErrInvalidRequest, "this node requires no authentication (security.auth = none): send requests without a token"))
		return
	}
	var req loginBody
	if _, ok := h.readJSON(w, r, &req); !ok {
		return
	}
	a := h.auth
	addr := remoteHost(r)
	now := a.Now()
	if wait, ok := a.Limiter.Allow(addr, now); !ok {
		h.fail(w, limited(addr, wait))
		return
	}
	u, err := a.Users.User(req.Username)
	if err != nil {
		h.fail(w, err)
		return
	}
	if u == nil || !u.VerifyPassword(req.Password) {
		a.Limiter.Fail(addr, now)
		h.fail(w, wire.Errorf(wire.ErrAuthenticationFailed, "authentication failed: unknown user or wrong password"))
		return
	}
	tok, err := security.IssueToken([]byte(h.jwtSecret), u.Name, u.Generation, now, a.TokenTTL)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, loginAnswer{Token: tok, ExpiresAt: now.Add(a.TokenTTL).UTC().Format(time.RFC3339), User: u.Name})
}

func limited(addr string, wait time.Duration) error {
	e := wire.Errorf(wire.ErrAuthenticationFailed, "too many failed logins from %s; retry in %v", addr, wait.Round(time.Second))
	e.RetryAfterMs = uint32(wait.Milliseconds())
	return e
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
