package kafka

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire/scram"
)

// SASL on the Kafka port (docs/security.md, docs/kafka.md). With
// Config.Auth set, a connection authenticates as Kafka clients do: after
// ApiVersions, SaslHandshake names the mechanism, then the mechanism's
// messages follow: in SaslAuthenticate requests after a v1 handshake, as
// raw size-prefixed tokens without a Kafka header after a v0 one (Kafka's
// legacy exchange, which older clients use; librdkafka decides from
// ApiVersions listing v0 whether the broker speaks SASL at all, then
// sends v1). The mechanisms: PLAIN (one step: the password itself, so only over
// TLS or a trusted network), SCRAM-SHA-256 or SCRAM-SHA-512 (two steps,
// the password never sent). Until then every other request is refused:
// with SASL_AUTHENTICATION_FAILED where its response has a top-level
// error code, else by closing the connection with the reason logged, as
// a Kafka broker does. Once authenticated, the connection calls the
// service through service.Guard of its user.

// Auth configures SASL on the Kafka listener.
type Auth struct {
	// Users reads the committed users.
	Users service.Users
	// Limiter refuses addresses with too many recent failures; shared
	// with the other listeners.
	Limiter *security.Limiter
	// Now is the node's clock; Rand draws nonces (crypto/rand when nil).
	Now  func() time.Time
	Rand io.Reader
}

// Kafka API keys of SASL.
const (
	saslHandshakeKey    int16 = 17
	saslAuthenticateKey int16 = 36
)

// saslMechanisms are the mechanisms served, in the order announced.
var saslMechanisms = []string{scram.SHA512.Name, scram.SHA256.Name, "PLAIN"}

// saslState is a connection's authentication.
type saslState struct {
	// mechanism is the one SaslHandshake chose ("": none yet).
	mechanism string
	// raw: the handshake was v0, so the mechanism's tokens arrive as
	// bare frames (rawToken), not in SaslAuthenticate requests.
	raw  bool
	conv *scram.ServerConversation
	// as is this listener as the authenticated user may use it (nil:
	// not authenticated).
	as *Listener
}

// forConn is the listener as st's connection may use it: l itself
// without authentication, the authenticated user's view otherwise (nil:
// not authenticated yet).
func (l *Listener) forConn(st *conn) *Listener {
	if l.cfg.Auth == nil {
		return l
	}
	return st.sasl.as
}

// saslOpen reports whether key may be sent before authenticating.
func saslOpen(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}

func (l *Listener) saslHandshake(st *conn, r *kmsg.SASLHandshakeRequest) *kmsg.SASLHandshakeResponse {
	st.sasl.raw = false
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = saslMechanisms
	if l.cfg.Auth == nil {
		// This node requires no authentication (security.auth = none).
		resp.SupportedMechanisms = nil
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp
	}
	for _, m := range saslMechanisms {
		if m == r.Mechanism {
			st.sasl.mechanism, st.sasl.conv = m, nil
			st.sasl.raw = r.GetVersion() == 0
			return resp
		}
	}
	resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	return resp
}

func (l *Listener) saslAuthenticate(c *netio.Conn, st *conn, r *kmsg.SASLAuthenticateRequest) *kmsg.SASLAuthenticateResponse {
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	fail := func(code int16, format string, args ...any) *kmsg.SASLAuthenticateResponse {
		msg := fmt.Sprintf(format, args...)
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp
	}
	a := l.cfg.Auth
	if a == nil || st.sasl.mechanism == "" {
		return fail(kerr.IllegalSaslState.Code, "SaslAuthenticate without a SaslHandshake naming the mechanism")
	}
	addr := hostOf(c.RemoteAddr())
	failed := func(err error) *kmsg.SASLAuthenticateResponse {
		a.Limiter.Fail(addr, a.Now())
		st.sasl.mechanism, st.sasl.conv, st.sasl.raw = "", nil, false
		l.cfg.Log.Info("kafka authentication failed", "remote", addr, "err", err)
		return fail(kerr.SaslAuthenticationFailed.Code, "authentication failed: unknown user or wrong password")
	}
	if st.sasl.conv == nil {
		if wait, ok := a.Limiter.Allow(addr, a.Now()); !ok {
			st.sasl.mechanism = ""
			return fail(kerr.SaslAuthenticationFailed.Code, "too many failed logins from %s; retry in %v", addr, wait.Round(time.Second))
		}
	}
	if st.sasl.mechanism == "PLAIN" {
		// authzid NUL authcid NUL passwd (RFC 4616); an authzid other
		// than the user is refused (no impersonation).
		parts := bytes.Split(r.SASLAuthBytes, []byte{0})
		if len(parts) != 3 || (len(parts[0]) > 0 && !bytes.Equal(parts[0], parts[1])) {
			return failed(fmt.Errorf("malformed PLAIN message"))
		}
		u := l.user(string(parts[1]))
		if u == nil || !u.VerifyPassword(string(parts[2])) {
			return failed(scram.ErrAuthFailed)
		}
		l.authenticated(c, st, u)
		return resp
	}
	m := scram.SHA256
	if st.sasl.mechanism == scram.SHA512.Name {
		m = scram.SHA512
	}
	if st.sasl.conv == nil {
		rnd := a.Rand
		if rnd == nil {
			rnd = rand.Reader
		}
		conv := m.NewServerConversation(func(name string) (scram.Credential, bool) {
			u := l.user(name)
			if u == nil {
				return scram.Credential{}, false
			}
			return u.CredentialOf(m)
		}, rnd)
		first, err := conv.First(string(r.SASLAuthBytes))
		if err != nil {
			return failed(err)
		}
		st.sasl.conv = conv
		resp.SASLAuthBytes = []byte(first)
		return resp
	}
	final, name, err := st.sasl.conv.Final(string(r.SASLAuthBytes))
	if err != nil {
		return failed(err)
	}
	u := l.user(name)
	if u == nil {
		return failed(scram.ErrAuthFailed)
	}
	l.authenticated(c, st, u)
	resp.SASLAuthBytes = []byte(final)
	return resp
}

// rawToken serves one frame of the exchange that follows a v0
// SaslHandshake: the frame is the mechanism's token itself, and the answer
// is the server's token, size-prefixed, with no Kafka header (an empty one
// after PLAIN, as Kafka sends). A failure closes the connection, as Kafka
// does in this exchange, which has no field for an error. The frame is
// answered in order after the requests before it.
func (l *Listener) rawToken(c *netio.Conn, st *conn, seq uint64, frame []byte) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = frame
	resp := l.saslAuthenticate(c, st, req)
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		l.refuse(c, st, seq, fmt.Errorf("%w: SASL (after a v0 handshake): %s", ErrSASLFailed, msg))
		return
	}
	out := make([]byte, 4, 4+len(resp.SASLAuthBytes))
	st.deliver(c, seq, answer{frame: finishFrame(append(out, resp.SASLAuthBytes...))})
}

// authenticated gives the connection its user's view of the listener.
func (l *Listener) authenticated(c *netio.Conn, st *conn, u *metadata.User) {
	st.sasl.mechanism, st.sasl.conv, st.sasl.raw = "", nil, false
	p := security.Principal{User: u.Name, Superuser: u.Superuser}
	st.sasl.as = &Listener{svc: service.Guard(l.svc, l.cfg.Auth.Users, p), cfg: l.cfg, sessionIDs: l.sessionIDs, names: l.names}
	if l.cfg.Users != nil {
		st.sasl.as.users = service.GuardUsers(l.cfg.Users, p)
	}
	l.cfg.Log.Debug("kafka connection authenticated", "remote", c.RemoteAddr(), "user", u.Name)
}

// user is the committed user named name, nil when none (or the
// metadata is not loaded).
func (l *Listener) user(name string) *metadata.User {
	u, err := l.cfg.Auth.Users.User(name)
	if err != nil {
		return nil
	}
	return u
}

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
