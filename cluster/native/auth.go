package native

import (
	"crypto/rand"
	"errors"
	"io"
	"net"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/netio/wire/scram"
)

// Auth makes a Handler require authentication (security.auth = scram):
// after the Handshake a connection runs the SCRAM exchange (Authenticate,
// docs/protocol.md) and every later request calls the service through
// service.Guard of the user authenticated.
type Auth struct {
	// Users reads the committed users (their credentials and rules).
	Users service.Users
	// Limiter refuses addresses with too many recent failures; shared
	// with the other listeners.
	Limiter *security.Limiter
	// Now is the node's clock; Rand draws nonces (crypto/rand when nil).
	Now  func() time.Time
	Rand io.Reader
}

// svcOf is the service as the connection's principal may call it: the
// node's service itself when authentication is off, the Guard of the
// authenticated user otherwise. REQUIRES: the connection is
// authenticated or authentication is off (OnFrame checks).
func (h *Handler) svcOf(c *netio.Conn) service.Service {
	if st := c.Context().(*connState); st.svc != nil {
		return st.svc
	}
	return h.svc
}

// requireAuth is nil when the connection may send key now.
func (h *Handler) requireAuth(st *connState, key wire.APIKey) error {
	if h.auth == nil || st.svc != nil || key == wire.APIHandshake || key == wire.APIAuthenticate {
		return nil
	}
	return wire.Errorf(wire.ErrAuthenticationFailed, "%s before Authenticate: this node requires authentication (security.auth = scram); run the SCRAM-SHA-256 exchange after the Handshake (a client library predating it cannot connect)", key)
}

// authenticate serves one step of the exchange.
func (h *Handler) authenticate(c *netio.Conn, st *connState, hdr wire.RequestHeader, body []byte) {
	var req wire.AuthenticateRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	if h.auth == nil {
		reply(c, hdr, &wire.AuthenticateResponse{Complete: true})
		return
	}
	if req.Mechanism != wire.MechanismSCRAMSHA256 {
		replyErr(c, hdr, wire.Errorf(wire.ErrAuthenticationFailed, "mechanism %q is not served; this node speaks %s", req.Mechanism, wire.MechanismSCRAMSHA256))
		return
	}
	addr := hostOf(c.RemoteAddr())
	a := h.auth
	if st.conv == nil {
		// A first step: a new exchange (on an authenticated connection,
		// to change user; the old identity stays until it completes).
		if wait, ok := a.Limiter.Allow(addr, a.Now()); !ok {
			e := wire.Errorf(wire.ErrAuthenticationFailed, "too many failed logins from %s; retry in %v", addr, wait.Round(time.Second))
			e.RetryAfterMs = uint32(wait.Milliseconds())
			replyErr(c, hdr, e)
			return
		}
		rnd := a.Rand
		if rnd == nil {
			rnd = rand.Reader
		}
		conv := scram.NewServerConversation(func(name string) (scram.Credential, bool) {
			u, err := a.Users.User(name)
			if err != nil || u == nil {
				return scram.Credential{}, false
			}
			return u.CredentialOf(scram.SHA256)
		}, rnd)
		first, err := conv.First(string(req.Payload))
		if err != nil {
			h.authFailed(c, hdr, addr, err)
			return
		}
		st.conv = conv
		reply(c, hdr, &wire.AuthenticateResponse{Payload: []byte(first)})
		return
	}
	conv := st.conv
	st.conv = nil
	final, user, err := conv.Final(string(req.Payload))
	if err != nil {
		h.authFailed(c, hdr, addr, err)
		return
	}
	u, err := a.Users.User(user)
	if err != nil || u == nil {
		h.authFailed(c, hdr, addr, scram.ErrAuthFailed)
		return
	}
	st.svc = service.Guard(h.svc, a.Users, principalOf(u))
	h.log.Debug("connection authenticated", "remote", c.RemoteAddr(), "user", user)
	reply(c, hdr, &wire.AuthenticateResponse{Payload: []byte(final), Complete: true, User: user})
}

// authFailed answers a failed step and counts it against the address.
func (h *Handler) authFailed(c *netio.Conn, hdr wire.RequestHeader, addr string, err error) {
	h.auth.Limiter.Fail(addr, h.auth.Now())
	h.log.Info("authentication failed", "remote", addr, "err", err)
	msg := "authentication failed: unknown user or wrong password"
	if errors.Is(err, scram.ErrBadMessage) {
		msg = "authentication failed: " + err.Error()
	}
	replyErr(c, hdr, wire.Errorf(wire.ErrAuthenticationFailed, "%s", msg))
}

func principalOf(u *metadata.User) security.Principal {
	return security.Principal{User: u.Name, Superuser: u.Superuser}
}

// hostOf is addr's host, the unit the limiter counts failures by.
func hostOf(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}
