package wire

// Authentication on the native protocol (docs/security.md): when a node
// requires it (security.auth = scram), a client proves who it is after
// the Handshake and before any other request, with a SASL-style exchange
// of Authenticate requests. With SCRAM-SHA-256 (RFC 5802, RFC 7677) that
// is two round trips: client-first / server-first, then client-final /
// server-final; the password never travels, only a proof that the
// client knows it, and the server proves back that it holds the user's
// credential. A node that requires no authentication answers an
// Authenticate as accepted, so a client configured with a user works
// against either.
//
// Backward compatibility: Authenticate is a new API key (17); a client
// that predates it gets AUTHENTICATION_FAILED on its first request to a
// node that requires authentication (the message says so), and a client
// configured with a user refuses a server whose Handshake does not list
// Authenticate rather than carry on unauthenticated.

// MechanismSCRAMSHA256 is the one mechanism of this version.
const MechanismSCRAMSHA256 = "SCRAM-SHA-256"

// AuthPayloadBytesMax bounds one Authenticate payload.
const AuthPayloadBytesMax = 4096

// MechanismBytesMax bounds a mechanism name.
const MechanismBytesMax = 64

// AuthenticateRequest is one client step of the exchange.
//
// Body v0:
//
//	mechanism  string  MechanismSCRAMSHA256
//	payload    bytes   the client's SCRAM message (client-first, then client-final)
type AuthenticateRequest struct {
	Mechanism string
	Payload   []byte
}

func (*AuthenticateRequest) isRequest() {}

// APIKey returns APIAuthenticate.
func (*AuthenticateRequest) APIKey() APIKey { return APIAuthenticate }

// AppendBody encodes the body.
func (r *AuthenticateRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Mechanism)
	return appendBytes(dst, r.Payload)
}

// DecodeBody decodes the body.
func (r *AuthenticateRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIAuthenticate, version, false)
	d.str("mechanism", MechanismBytesMax, &r.Mechanism)
	r.Payload = d.bytes32("payload", AuthPayloadBytesMax)
	return d.done()
}

// AuthenticateResponse is one server step of the exchange. A wrong user
// or password is an error response (AUTHENTICATION_FAILED), not a body.
//
// Body v0:
//
//	payload   bytes  the server's SCRAM message (server-first, then server-final)
//	complete  bool   the exchange is over and the connection is authenticated
//	user      string the user authenticated (when complete; "" for a node
//	                 that requires no authentication)
type AuthenticateResponse struct {
	Payload  []byte
	Complete bool
	User     string
}

func (*AuthenticateResponse) isResponse() {}

// APIKey returns APIAuthenticate.
func (*AuthenticateResponse) APIKey() APIKey { return APIAuthenticate }

// AppendBody encodes the body.
func (r *AuthenticateResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendBytes(dst, r.Payload)
	dst = appendBool(dst, r.Complete)
	return appendString(dst, r.User)
}

// DecodeBody decodes the body.
func (r *AuthenticateResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIAuthenticate, version, true)
	r.Payload = d.bytes32("payload", AuthPayloadBytesMax)
	r.Complete = d.boolean("complete")
	d.str("user", ClientIDBytesMax, &r.User)
	return d.done()
}
